"""The benchmark's synthetic histories: deterministic, well-formed, one right answer per question."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path

import pytest

from ireneo.benchmark import generate as gen
from ireneo.benchmark import templates
from ireneo.benchmark.generate import (
    ATTRIBUTES,
    EPOCH,
    FACT_KINDS,
    FAMILIES,
    LANGS,
    VOCAB_OF,
    History,
    generate,
    write_funes_jsonl,
    write_questions,
)
from ireneo.formats.funes_jsonl import read_file

N = 1000
VARIANTS = [(lang, family) for lang in LANGS for family in FAMILIES]
# An equipment, ticket or decision id: not part of a longer id, particles may follow ("CH-294의").
ID = re.compile(r"(?<![A-Za-z0-9-])[A-Z]{1,3}-\d{3,5}(?!\d)")


@functools.cache
def history(lang: str, family: str, n: int = N, seed: int = 0) -> History:
    return generate(n, lang=lang, family=family, seed=seed)


def session_texts(h: History) -> dict[str, str]:
    texts: dict[str, list[str]] = defaultdict(list)
    for turn in h.turns:
        texts[turn.session_id].append(turn.text)
    return {sid: "\n".join(parts) for sid, parts in texts.items()}


def digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


# --- determinism --------------------------------------------------------------------------------


def test_same_seed_same_bytes(tmp_path):
    a = generate(300, lang="ru", family="A", seed=7, questions=40)
    b = generate(300, lang="ru", family="A", seed=7, questions=40)
    write_funes_jsonl(a, tmp_path / "a", per_file=50)
    write_funes_jsonl(b, tmp_path / "b", per_file=50)
    write_questions(a, tmp_path / "a" / "questions.json")
    write_questions(b, tmp_path / "b" / "questions.json")
    assert digest(tmp_path / "a") == digest(tmp_path / "b")


def test_same_bytes_across_processes_and_hash_seeds(tmp_path):
    """The command line in two fresh processes with different string hashing, and in-process."""
    for run, hash_seed in (("one", "1"), ("two", "12345")):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ireneo.benchmark.generate",
                "--conversations",
                "300",
                "--lang",
                "ko",
                "--family",
                "B",
                "--seed",
                "3",
                "--questions",
                "40",
                "--out",
                str(tmp_path / run),
            ],
            check=True,
            env=env,
            capture_output=True,
        )
    h = generate(300, lang="ko", family="B", seed=3, questions=40)
    write_funes_jsonl(h, tmp_path / "here")
    write_questions(h, tmp_path / "here" / "questions.json")
    assert digest(tmp_path / "one") == digest(tmp_path / "two") == digest(tmp_path / "here")
    assert len(digest(tmp_path / "one")) == 3 + 1  # 300 conversations / 100 per file + questions


def test_other_seed_other_history():
    a = generate(200, seed=1)
    b = generate(200, seed=2)
    assert [t.text for t in a.turns] != [t.text for t in b.turns]


def test_languages_share_one_world():
    """Same seed and size: the same facts and questions, only the words differ."""
    worlds = [history(lang, family) for lang, family in VARIANTS]
    for h in worlds[1:]:
        assert [(f.kind, f.equipment, f.attribute) for f in h.facts] == [
            (f.kind, f.equipment, f.attribute) for f in worlds[0].facts
        ]
        assert [q.kind for q in h.questions] == [q.kind for q in worlds[0].questions]


# --- one right answer ---------------------------------------------------------------------------


@pytest.mark.parametrize(("lang", "family"), VARIANTS)
def test_every_answer_in_its_conversation_and_no_other(lang, family):
    h = history(lang, family)
    texts = session_texts(h)
    assert len(h.questions) == 100
    for q in h.questions:
        holders = [sid for sid, text in texts.items() if q.answer in text]
        assert holders == [q.session_id], (q, holders[:5])
        assert q.answer not in q.long and q.answer not in q.short


@pytest.mark.parametrize(("lang", "family"), VARIANTS)
def test_questions_are_balanced_and_well_formed(lang, family):
    h = history(lang, family)
    assert len({q.id for q in h.questions}) == len(h.questions)
    assert len({q.session_id for q in h.questions}) == len(h.questions)
    kinds = Counter(q.kind for q in h.questions)
    assert kinds == {kind: 25 for kind in FACT_KINDS}
    for kind in FACT_KINDS:
        assert {q.names_id for q in h.questions if q.kind == kind} == {True, False}
    facts = {f.session_id: f for f in h.facts}
    for q in h.questions:
        fact = facts[q.session_id]
        assert fact.kind == q.kind and fact.answer == q.answer
        assert q.short != q.long and len(q.short.split()) <= 12
        named = ID.findall(q.long + " " + q.short)
        if q.names_id:
            assert fact.equipment in q.long and fact.equipment in q.short
        else:
            assert named == [], q
            site = fact.site.split("«")[-1] if lang == "ru" else fact.site  # Russian declines
            assert site in q.long and site in q.short, q


@pytest.mark.parametrize(("lang", "family"), VARIANTS)
def test_site_and_kind_name_one_machine(lang, family):
    h = history(lang, family)
    places = Counter(h.equipment.values())
    assert max(places.values()) == 1
    facts = {f.session_id: f for f in h.facts}
    for q in h.questions:
        fact = facts[q.session_id]
        assert h.equipment[fact.equipment] == (fact.site, fact.equipment_kind)


@pytest.mark.parametrize(("lang", "family"), VARIANTS)
def test_one_fact_per_machine_kind_and_attribute(lang, family):
    h = history(lang, family)
    keys = Counter((f.equipment, f.kind, f.attribute) for f in h.facts)
    assert max(keys.values()) == 1


def test_questions_have_near_identical_distractors():
    """The same symptom (task, product, topic) on another machine of the same kind."""
    h = history("en", "A")
    clusters = Counter((f.kind, f.equipment_kind, f.attribute) for f in h.facts)
    facts = {f.session_id: f for f in h.facts}
    with_siblings = sum(
        clusters[(f.kind, f.equipment_kind, f.attribute)] >= 2
        for f in (facts[q.session_id] for q in h.questions)
    )
    assert with_siblings >= 90


def test_small_histories_get_fewer_questions():
    h = generate(6, questions=100)
    assert 0 < len(h.questions) <= 6
    texts = session_texts(h)
    for q in h.questions:
        assert [sid for sid, text in texts.items() if q.answer in text] == [q.session_id]
    assert generate(20, questions=0).questions == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"conversations": 0},
        {"conversations": 10, "lang": "de"},
        {"conversations": 10, "family": "D"},
        {"conversations": 10, "questions": -1},
    ],
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        generate(**kwargs)


# --- the distractors ----------------------------------------------------------------------------


@pytest.mark.parametrize(("lang", "family"), VARIANTS)
def test_equipment_recurs(lang, family):
    h = history(lang, family)
    seen = Counter()
    for text in session_texts(h).values():
        seen.update(e for e in set(ID.findall(text)) if e in h.equipment)
    assert set(seen) == set(h.equipment)
    assert sum(seen.values()) / len(h.equipment) >= 4
    assert len(h.equipment) >= N // 3  # grows with the history


def test_sites_recur():
    h = history("en", "A")
    sites = sorted({site for site, _ in h.equipment.values()})
    pattern = re.compile("|".join(re.escape(s) + r"(?! \d)" for s in sorted(sites, key=len)[::-1]))
    seen = Counter()
    for text in session_texts(h).values():
        seen.update(set(pattern.findall(text)))
    assert sum(seen.values()) / len(sites) >= 4


def test_the_twelve_people_recur_everywhere():
    h = history("en", "A")
    texts = list(session_texts(h).values())
    people = gen.load_language("en").people
    assert len(people) == 12
    for name in people:
        assert sum(bool(re.search(rf"\b{name}\b", t)) for t in texts) >= 30


# --- the files ----------------------------------------------------------------------------------


def test_jsonl_lines_carry_every_field(tmp_path):
    h = generate(250, lang="ko", family="A")
    paths = write_funes_jsonl(h, tmp_path, per_file=100)
    assert [p.name for p in paths] == [f"history-000{i}.funes.jsonl" for i in range(3)]
    required = {"session_id", "turn_uuid", "seq", "ts", "role", "harness", "blocks"}
    sessions_per_file = []
    lines = 0
    for path in paths:
        sessions = set()
        for line in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            lines += 1
            assert required <= set(obj)
            assert isinstance(obj["seq"], int) and 0 <= obj["seq"] <= 5
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", obj["ts"])
            assert re.fullmatch(r"[a-z0-9_-]+", obj["harness"])
            assert ":" not in obj["session_id"] and obj["turn_uuid"]
            assert obj["role"] == ("user" if obj["seq"] % 2 == 0 else "assistant")
            assert [set(b) for b in obj["blocks"]] == [{"block_type", "text"}]
            assert obj["blocks"][0]["block_type"] == "text" and obj["blocks"][0]["text"]
            sessions.add(obj["session_id"])
        sessions_per_file.append(len(sessions))
        assert len(read_file(path)) == 6 * len(sessions)  # ireneo's own reader accepts it
    assert sessions_per_file == [100, 100, 50]
    assert lines == len(h.turns) == 6 * 250


def test_rewriting_a_smaller_history_leaves_no_stale_files(tmp_path):
    write_funes_jsonl(generate(300), tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    paths = write_funes_jsonl(generate(120), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [p.name for p in paths] + ["notes.txt"]
    )


def test_questions_file(tmp_path):
    h = history("ru", "B")
    write_questions(h, tmp_path / "q.json")
    data = json.loads((tmp_path / "q.json").read_text(encoding="utf-8"))
    assert len(data) == 100
    assert set(data[0]) == {"id", "long", "short", "answer", "session_id", "kind", "names_id"}
    assert data[0]["long"] == h.questions[0].long


# --- the text -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("lang", "family"), VARIANTS)
def test_conversations_shape_dates_and_lengths(lang, family):
    h = history(lang, family)
    low, high = gen.load_language(lang).words
    by_session: dict[str, list] = defaultdict(list)
    for turn in h.turns:
        by_session[turn.session_id].append(turn)
        assert low <= len(turn.text.split()) <= high, turn.text
        assert turn.harness == "bench" and turn.ts.utcoffset() == timedelta(0)
    assert len(by_session) == N
    starts = []
    for turns in by_session.values():
        assert [t.seq for t in turns] == list(range(6))
        assert [t.role for t in turns] == ["user", "assistant"] * 3
        assert all(a.ts < b.ts for a, b in zip(turns, turns[1:], strict=False))
        starts.append(turns[0].ts)
    assert starts == sorted(starts)
    assert starts[0] >= EPOCH and starts[-1] < EPOCH + timedelta(days=366)
    assert starts[-1] - starts[0] > timedelta(days=300)
    lengths = [len(t.text.split()) for t in h.turns]
    assert max(lengths) >= 2 * sum(lengths) / len(lengths)  # not all alike


@pytest.mark.parametrize(("lang", "family"), VARIANTS)
def test_phrasing_varies(lang, family):
    h = history(lang, family)
    first_sentences = Counter(t.text.split(".")[0] for t in h.turns if t.seq == 2)
    assert len(first_sentences) > 100
    assert len({q.long.split()[0] for q in h.questions}) > 3


@pytest.mark.parametrize(("lang", "script"), [("ru", "Cyrillic"), ("ko", "Hangul")])
@pytest.mark.parametrize("family", FAMILIES)
def test_russian_and_korean_are_written_in_their_script(lang, script, family):
    in_script = {
        "Cyrillic": lambda ch: "\u0400" <= ch <= "\u04ff",
        "Hangul": lambda ch: "\uac00" <= ch <= "\ud7a3",
    }[script]
    h = history(lang, family)
    texts = [t.text for t in h.turns] + [q.long for q in h.questions]
    texts += [q.short for q in h.questions]
    letters = 0
    for text in texts:
        rest = ID.sub(" ", text)
        foreign = [ch for ch in rest if ch.isalpha() and not in_script(ch)]
        assert not foreign, (foreign, text)
        letters += sum(ch.isalpha() for ch in rest)
    assert letters > 100_000


@pytest.mark.parametrize(("one", "other"), [("A", "B"), ("A", "C"), ("B", "C")])
def test_families_differ(one, other):
    for lang in LANGS:
        a = {t.text for t in history(lang, one).turns}
        b = {t.text for t in history(lang, other).turns}
        assert not a & b
        qa = {q.long for q in history(lang, one).questions}
        qb = {q.long for q in history(lang, other).questions}
        assert not qa & qb


def test_korean_particles_follow_the_last_sound():
    modify = gen.load_language("ko").modify

    assert modify("CH-294", "의") == "CH-294의"
    assert modify("CH-294", "이/가") == "CH-294가"  # 사
    assert modify("P-003", "이/가") == "P-003이"  # 삼
    assert modify("K-031", "으로/로") == "K-031로"  # 일: ㄹ takes 로
    assert modify("MT-1040", "을/를") == "MT-1040을"  # 공
    assert modify("한상우", "은/는") == "한상우는"
    assert modify("울산 공장", "으로/로") == "울산 공장으로"
    assert modify("2.7%", "이에요/예요") == "2.7%예요"


# --- the template files --------------------------------------------------------------------------

_PARTS = (
    "greet",
    "small",
    "a_small",
    "a_offer",
    "chatter",
    "a_chatter",
    "late",
    "followup",
    "a_followup",
    "close",
    "a_close",
    "spare_ticket",
    "spare_decision",
    "target_id",
    "target_site",
    "short_id",
    "short_site",
)


def _templates(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _templates(v)
    else:
        for v in value:
            yield from _templates(v)


def _slots(template: str) -> set[str]:
    return {m.group(1).lower() for m in gen._SLOT.finditer(template)}


def _parts(fam: dict) -> list[str]:
    """The parts a family's shapes use, besides those every family has."""
    weights = fam.get("shapes", templates.DEFAULT_WEIGHTS)
    used = {
        spec.rstrip("?!")
        for name, weight in weights.items()
        if weight
        for message in templates.SHAPES[name]
        for spec in message
    }
    return sorted(used | set(_PARTS))


@pytest.mark.parametrize(("lang", "family"), VARIANTS)
def test_template_files_are_complete(lang, family):
    language = gen.load_language(lang)
    fam = gen.load_family(lang, family)
    for part in _parts(fam):
        assert fam[part], part
        if part in templates.KINDED_PARTS:
            assert set(fam[part]) == set(FACT_KINDS), part
    for kind in FACT_KINDS:
        for attr in ATTRIBUTES[kind]:
            entry = fam["vocab"][VOCAB_OF[kind]][attr]
            assert entry["fact"] and entry["q"] and entry["short"], (kind, attr)
        answer_slot = "owner" if kind == "owner" else "ans"
        for template in fam["fact"][kind]:
            assert {"eq", "kind", "site", "attr", answer_slot} <= _slots(template), template
        for template in fam["q_long"][kind]:
            assert {"target", "attr"} <= _slots(template), template
        for template in fam["q_short"][kind]:
            assert {"target_s", "attr_s"} <= _slots(template), template
    assert len(language.people) == gen.PEOPLE
    assert len({gen._plain(language.owner(i)) for i in range(gen.ROSTER)}) == gen.ROSTER
    assert len({gen._plain(language.site_name(c)) for c in range(5000)}) == 5000


@pytest.mark.parametrize(("lang", "family"), VARIANTS)
def test_every_template_fills(lang, family):
    """Every slot and grammatical form a template asks for exists (not only those drawn)."""
    language = gen.load_language(lang)
    fam = gen.load_family(lang, family)
    fill = gen._Filler(language)
    kinds = [language.kinds["pump"], *fam.get("question_kinds", {}).get("chiller", [])]
    slots = {
        "eq": "P-003",
        "kind": language.kinds["pump"],
        "site": language.site_name(0),
        "ans": "MT-1040",
        "owner": language.owner(1),
        "p1": language.people[0],
        "p2": language.people[1],
        "day": language.days[0],
        "site2": language.site_name(400),
        "mt": "MT-2000",
        "dr": "DR-3000",
        "oeq": "K-019",
        "okind": language.kinds["compressor"],
        "osite": language.site_name(7),
        "target_s": "P-003",
    }
    targets = [
        fill.forms(v, {**slots, "kind": kind})
        for kind in kinds
        for part in ("target_id", "target_site")
        for v in fam[part]
    ]
    kinded = [p for p in _parts(fam) if p in templates.KINDED_PARTS]
    for kind in FACT_KINDS:
        for attr in ATTRIBUTES[kind]:
            entry = fam["vocab"][VOCAB_OF[kind]][attr]
            for form in ("fact", "q", "short"):
                for value in entry[form]:
                    slots["attr"] = slots["attr_s"] = value
                    for target in targets:
                        slots["target"] = target
                        for part in kinded:
                            for template in _templates(fam[part][kind]):
                                assert "{" not in fill(template, slots), template
    for part in _parts(fam):
        if part not in templates.KINDED_PARTS:
            for kind in kinds:
                for template in _templates(fam[part]):
                    text = fill(template, {**slots, "kind": kind, "attr": "x"})
                    assert "{" not in text, template


def test_family_c_has_its_own_shapes():
    """The answer first and the machine only two turns later; the fact between other machines."""
    for lang in LANGS:
        h = history(lang, "C")
        texts = session_texts(h)
        turns: dict[str, list[str]] = defaultdict(list)
        for turn in h.turns:
            turns[turn.session_id].append(turn.text)
        answer_first = sum(
            f.answer in turns[f.session_id][0] and f.equipment not in turns[f.session_id][0]
            for f in h.facts
        )
        assert answer_first > N // 10, lang
        crowded = sum(
            len([e for e in set(ID.findall(turns[f.session_id][0])) if e in h.equipment]) >= 3
            for f in h.facts
        )
        assert crowded > N // 10, lang
        assert len(texts) == N


def test_family_c_questions_name_kinds_the_histories_never_use():
    for lang in LANGS:
        language = gen.load_language(lang)
        fam = gen.load_family(lang, "C")
        h = history(lang, "C")
        corpus = "\n".join(t.text for t in h.turns)
        asked = " ".join(q.long + " " + q.short for q in h.questions)
        new = 0
        for kind, names in fam["question_kinds"].items():
            for name in names:
                plain = gen._plain(name)
                if plain != gen._plain(language.kinds[kind]):
                    assert plain not in corpus, (lang, plain)
                    new += plain in asked
        assert new >= 4, lang


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def _family(lang: str = "en", family: str = "C") -> dict:
    return json.loads((templates.HERE / f"{lang}-{family}.json").read_text(encoding="utf-8"))


_VOCAB = dict(gen._VOCABULARY)
_KINDS = tuple(gen.EQUIPMENT_KINDS)


def test_a_good_file_reads(tmp_path):
    data = templates.read_family(_write(tmp_path / "en-X.json", _family()), _VOCAB, _KINDS)
    assert data == gen.load_family("en", "C")


@pytest.mark.parametrize(
    ("break_it", "field", "problem"),
    [
        (lambda d: d.pop("q_short"), "q_short", "missing"),
        (lambda d: d.pop("lead_answer"), "lead_answer", "missing"),
        (lambda d: d["fact"].pop("owner"), "fact", "keys ticket"),
        (lambda d: d.update(greet="Hi."), "greet", "non-empty list"),
        (lambda d: d.update(greet=[]), "greet", "non-empty list"),
        (
            lambda d: d["fact"]["ticket"].append("On {eq} at the {site}, {attr}."),
            "fact.ticket[3]",
            "needs {ans}",
        ),
        (
            lambda d: d["split_problem"]["ticket"].append("{kind} {eq}, {site}: {attr}, {ans}."),
            "split_problem.ticket[2]",
            "must not have {ans}",
        ),
        (lambda d: d["small"].append("Lunch with {p3}."), "small[19]", "unknown slot {p3}"),
        (lambda d: d["close"].append("Bye {owner}."), "close[3]", "unknown slot {owner}"),
        (lambda d: d["chatter"].append("All quiet at the {osite}."), "chatter[9]", "needs {oeq}"),
        (
            lambda d: d["q_long"]["owner"].append("Who has {attr}?"),
            "q_long.owner[3]",
            "needs {target}",
        ),
        (lambda d: d["vocab"]["task"].pop("alignment"), "vocab.task.alignment", "missing"),
        (
            lambda d: d["vocab"]["symptom"]["vibration"].update(q=[]),
            "vocab.symptom.vibration.q",
            "non-empty list",
        ),
        (lambda d: d["shapes"].update(spiral=5), "shapes.spiral", "no such shape"),
        (lambda d: d["question_kinds"].pop("fan"), "question_kinds.fan", "non-empty list"),
        (lambda d: d.update(grete=["Hi."]), "grete", "not a part"),
    ],
)
def test_a_malformed_family_file_is_refused_by_file_and_field(tmp_path, break_it, field, problem):
    data = _family()
    break_it(data)
    path = _write(tmp_path / "en-C.json", data)
    with pytest.raises(templates.TemplateError) as caught:
        templates.read_family(path, _VOCAB, _KINDS)
    message = str(caught.value)
    assert message.startswith(f"en-C.json: {field}: "), message
    assert problem in message, message
    assert caught.value.field == field


def test_a_family_without_shapes_needs_only_the_default_parts(tmp_path):
    data = _family("ru", "A")
    assert "shapes" not in data and "lead_answer" not in data
    templates.read_family(_write(tmp_path / "ru-A.json", data), _VOCAB, _KINDS)
    data["shapes"] = {"lead": 1}  # now it needs the parts that shape uses
    with pytest.raises(templates.TemplateError, match=r"^ru-A\.json: lead_answer: missing$"):
        templates.read_family(_write(tmp_path / "ru-A.json", data), _VOCAB, _KINDS)


def test_a_malformed_language_file_is_refused_by_file_and_field(tmp_path):
    data = json.loads((templates.HERE / "ko.json").read_text(encoding="utf-8"))
    del data["kinds"]["gearbox"]
    path = _write(tmp_path / "ko.json", data)
    with pytest.raises(templates.TemplateError, match=r"^ko\.json: kinds\.gearbox: "):
        templates.read_language(path, "ko", _KINDS)
    data = json.loads((templates.HERE / "ru.json").read_text(encoding="utf-8"))
    data["words"] = [80, 8]
    with pytest.raises(templates.TemplateError, match=r"^ru\.json: words: "):
        templates.read_language(_write(tmp_path / "ru.json", data), "ru", _KINDS)
    del data["names"]["women"]
    data["words"] = [8, 80]
    with pytest.raises(templates.TemplateError, match=r"^ru\.json: names\.women: missing$"):
        templates.read_language(_write(tmp_path / "ru.json", data), "ru", _KINDS)


def test_a_file_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "en-C.json"
    path.write_text('{"greet": ["Hi."],', encoding="utf-8")
    with pytest.raises(templates.TemplateError, match=r"^en-C\.json: \(file\): not JSON"):
        templates.read_family(path, _VOCAB, _KINDS)
    with pytest.raises(templates.TemplateError, match=r"^nowhere\.json: \(file\): cannot be read"):
        templates.read_family(tmp_path / "nowhere.json", _VOCAB, _KINDS)


def test_the_template_files_ship_with_the_package():
    """Every language and family has its files beside the loader (package data: benchmark/templates)."""
    names = {p.name for p in templates.HERE.glob("*.json")}
    assert names == {f"{lang}.json" for lang in LANGS} | {
        f"{lang}-{family}.json" for lang in LANGS for family in FAMILIES
    }


def test_generation_scales_linearly():
    """Not a benchmark: 1,000 conversations take well under a second; allow for a busy machine."""
    import time

    started = time.perf_counter()
    generate(1000, lang="ru", family="B", seed=99)
    assert time.perf_counter() - started < 10
