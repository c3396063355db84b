"""`ireneo bench --locomo`: reading a LoCoMo-shaped file, counting the evidence the tool's answer
shows, the baselines' turn budget, the report; and a run on the real file when it is there.

The small file here is invented in LoCoMo's shape; none of LoCoMo's text is in the repository.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from ireneo.benchmark import locomo
from ireneo.cli import main
from ireneo.model import ContextTurn, Hit
from ireneo.render import render_hits

REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo10.json"

# Two friends, two sessions, one shared photo; the questions point at turns by dia_id.
TINY = [
    {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Oskar",
            "speaker_b": "Wren",
            "session_1_date_time": "9:05 am on 3 March, 2021",
            "session_1": [
                {"speaker": "Oskar", "dia_id": "D1:1", "text": "Morning Wren! How was the trip?"},
                {
                    "speaker": "Wren",
                    "dia_id": "D1:2",
                    "text": "Lovely. We hiked up to the lighthouse at Varnholm on Saturday.",
                },
                {
                    "speaker": "Oskar",
                    "dia_id": "D1:3",
                    "text": "Look what I built this week.",
                    "img_url": ["https://example.invalid/kite.jpg"],
                    "blip_caption": "a photo of a red box kite on a lawn",
                },
                {"speaker": "Wren", "dia_id": "D1:4", "text": "Wow, did you sew the sail?"},
                {"speaker": "Oskar", "dia_id": "D1:5", "text": "Yes, from an old spinnaker."},
            ],
            "session_2_date_time": "7:40 pm on 12 April, 2021",
            "session_2": [
                {"speaker": "Wren", "dia_id": "D2:1", "text": "I started learning the cello."},
                {"speaker": "Oskar", "dia_id": "D2:2", "text": "Who teaches you?"},
                {"speaker": "Wren", "dia_id": "D2:3", "text": "Mrs Quillfeather, on Tuesdays."},
            ],
            "session_3_date_time": "1:00 pm on 1 May, 2021",
        },
        "qa": [
            {"question": "Where did Wren hike?", "answer": "Varnholm", "evidence": ["D1:2"],
             "category": 4},
            {"question": "What did Oskar sew the kite sail from?", "answer": "a spinnaker",
             "evidence": ["D:1:3", "D1:05"], "category": 1},
            {"question": "When does Wren have cello lessons?", "answer": "Tuesdays",
             "evidence": ["D2:1; D2:3"], "category": 2},
            {"question": "What is the kite's tail made of?", "answer": "n/a",
             "evidence": ["D9:9"], "category": 3},
            {"question": "Which lighthouse did Oskar paint?", "adversarial_answer": "Varnholm",
             "evidence": ["D1:2"], "category": 5},
        ],
    }
]  # fmt: skip


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


def test_sessions_become_conversations_with_dated_named_turns(tiny):
    [sample] = locomo.load(tiny)
    assert sample.sample_id == "tiny-1"
    assert [t.session_id for t in sample.turns] == ["locomo-tiny-1-s1"] * 5 + [
        "locomo-tiny-1-s2"
    ] * 3  # session 3 has a date and no turns: no conversation
    first, photo = sample.turns[0], sample.turns[2]
    assert (first.seq, first.role, first.ts) == (1, "Oskar", datetime(2021, 3, 3, 9, 5, tzinfo=UTC))
    assert photo.ts == datetime(2021, 3, 3, 9, 7, tzinfo=UTC)  # a minute per turn
    assert photo.text == (
        "Look what I built this week. [shares a photo: a photo of a red box kite on a lawn]"
    )
    assert sample.turns[5].ts == datetime(2021, 4, 12, 19, 40, tzinfo=UTC)


def test_evidence_maps_dia_ids_to_turns_and_unanswerable_is_kept_apart(tiny):
    [sample] = locomo.load(tiny)
    s1, s2 = "locomo-tiny-1-s1", "locomo-tiny-1-s2"
    assert [(q.category, q.evidence) for q in sample.questions] == [
        (4, ((s1, 2),)),
        (1, ((s1, 3), (s1, 5))),  # "D:1:3" and "D1:05" as the chat writes them
        (2, ((s2, 1), (s2, 3))),  # one entry naming two turns
    ]
    assert sample.dropped == 1  # its evidence names no turn of the chat
    assert [(q.category, q.evidence) for q in sample.unanswerable] == [(5, ())]
    assert locomo.evidence_ids(["D8:6; D9:17", "D", "D30:05"]) == ["D8:6", "D9:17", "D30:5"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d[0]["conversation"].update(session_1_date_time="March 3rd"), "session_1_date"),
        (lambda d: d[0]["qa"][0].update(category=9), "category 9"),
        (lambda d: d[0].pop("conversation"), "sample 0"),
        (lambda d: d[0]["conversation"].update(session_2="hello"), "session_2"),
    ],
)
def test_a_malformed_file_is_refused_naming_what_is_wrong(tmp_path, change, message):
    document = json.loads(json.dumps(TINY))
    change(document)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(locomo.LocomoError, match=message):
        locomo.load(path)
    path.write_text("{not json")
    with pytest.raises(locomo.LocomoError, match="not JSON"):
        locomo.load(path)


def _hit(session: str, seq: int, text: str = "x", around: tuple[int, ...] = ()) -> Hit:
    ts = datetime(2021, 1, 1, tzinfo=UTC)
    context = [ContextTurn(s, "Wren", ts, text) for s in around]
    return Hit(session, f"{session}-{seq}", seq, ts, "Oskar", text, 1.0, context)


def test_a_baseline_shows_its_ranked_windows_until_the_turn_budget():
    ranked = [_hit("a", 5, around=(4, 6)), _hit("a", 6, around=(5, 7)), _hit("b", 2, around=(1,))]
    # overlapping turns count once; a window is cut where the budget ends
    assert locomo.reading_order(ranked, 4) == [("a", 4), ("a", 5), ("a", 6), ("a", 7)]
    assert locomo.reading_order(ranked, 5) == [("a", 4), ("a", 5), ("a", 6), ("a", 7), ("b", 1)]
    assert len(locomo.reading_order(ranked)) == 6
    assert locomo.reading_order(ranked, 0) == []


def test_evidence_counts_only_the_turns_the_budget_lets_through():
    question = locomo.Question("s", 0, "?", 1, (("a", 5), ("b", 2)))
    hits = [_hit("a", 5, "y" * 300, around=(4, 6)), _hit("b", 2, "z" * 300, around=(1, 3))]
    whole = render_hits(hits, max_chars=10_000)
    assert locomo.shown_turns(hits, whole, {}) == [
        ("a", 4), ("a", 5), ("a", 6), ("b", 1), ("b", 2), ("b", 3)
    ]  # fmt: skip
    one = render_hits(hits, max_chars=1_500)  # the second passage does not fit
    shown = locomo.shown_turns(hits, one, {})
    assert shown == [("a", 4), ("a", 5), ("a", 6)]
    assert locomo.evidence_share(question, shown) == 0.5
    cut = render_hits(hits, max_chars=500)  # even the first is cut: the turns begun are shown
    assert locomo.shown_turns(hits, cut, {}) == [("a", 4), ("a", 5)]


def test_the_run_scores_every_question_and_reports_both_ways(tmp_path):
    path, out = tmp_path / "two.json", tmp_path / "results"
    path.write_text(json.dumps([TINY[0], {**TINY[0], "sample_id": "tiny-2"}]))
    result = CliRunner().invoke(main, ["bench", "--locomo", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    document = json.loads((out / "locomo" / "latest.json").read_text())
    assert document["samples"] == ["tiny-1", "tiny-2"] and document["turns"] == 16
    assert document["dropped_questions"] == 2
    overall = document["summary"]["overall"]
    assert overall["questions"] == 6
    for row in document["questions"]:
        # a baseline never shows more turns than ireneo did: the figures compare like with like
        assert 0 < row["shown"] <= 8 and row["hits"] <= locomo.K
        assert all(0.0 <= v <= 1.0 for v in [*row["answer"].values(), *row["top10"].values()])
    # eight turns in all: every answer of 3 hits with context shows most of the chat, and the
    # single-hop question's one evidence turn is among them
    single = next(r for r in document["questions"] if r["category"] == 4)
    assert single["answer"]["ireneo"] == 1.0
    each, together = document["nothing"], document["nothing_together"]
    assert each["passages"] == [8, 8] and together["passages"] == [16]  # the two samples in one
    for nothing, memories in ((each, 2), (together, 1)):
        assert nothing["answerable"] == 6 and nothing["unanswerable"] == 2
        assert nothing["unavailable"] == 0
        assert nothing["empty"] == memories * len(locomo.EMPTY_QUERIES)
        assert nothing["offtopic"] == {
            lang: memories * len(locomo.offtopic_queries(lang)) for lang in locomo.OFFTOPIC_LANGS
        }
        # the blank queries never reach search: the tool answers them with nothing
        assert nothing["empty_with_hit"] <= nothing["empty"] - 3 * memories
    text = (out / "locomo" / "latest.md").read_text()
    assert text in result.output
    assert "| overall | 6 |" in text and "| 4 single-hop | 2 |" in text
    assert "| each sample's memory | all in one memory |" in text
    assert "(≥ 0.85)" in text and "off-topic questions (ko) with no hit" in text
    assert (out / "locomo" / "latest.png").stat().st_size > 10_000
    named = out / "locomo" / f"{document['model']}.md"  # kept beside another model's run
    assert named.read_text() == text
    # no LoCoMo text in the results: they may be kept in the repository
    assert "Varnholm" not in json.dumps(document) and "Varnholm" not in text


def test_the_offtopic_questions_are_many_and_distinct():
    english = locomo.offtopic_queries("en")
    assert len(english) == 100 and len(set(english)) == 100
    for lang in ("ru", "ko"):
        assert len(set(locomo.offtopic_queries(lang))) >= 30


def test_a_missing_file_or_an_unknown_model_is_an_error_not_a_traceback(tiny, tmp_path):
    result = CliRunner().invoke(main, ["bench", "--locomo", str(tmp_path / "none.json")])
    assert result.exit_code == 2 and "does not exist" in result.output
    result = CliRunner().invoke(
        main, ["bench", "--locomo", str(tiny), "--model", "no-such-model", "--out", str(tmp_path)]
    )
    assert result.exit_code == 1 and "unknown embedding model 'no-such-model'" in result.output
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{**TINY[0], "qa": "none"}]))
    result = CliRunner().invoke(main, ["bench", "--locomo", str(path), "--out", str(tmp_path)])
    assert result.exit_code == 1 and "sample tiny-1: 'qa' is not a list" in result.output


@pytest.mark.skipif(not REAL.exists(), reason="the LoCoMo file is not downloaded")
def test_the_real_file_one_sample(tmp_path):
    raw = json.loads(REAL.read_text())[0]
    asked = [q for q in raw["qa"] if q["category"] in locomo.CATEGORIES]
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main, ["bench", "--locomo", str(REAL), "--samples", "1", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    document = json.loads((out / "locomo" / "latest.json").read_text())
    assert document["samples"] == [raw["sample_id"]]
    overall = document["summary"]["overall"]
    assert overall["questions"] + document["dropped_questions"] == len(asked)
    assert document["dropped_questions"] <= 5
    # the tool shows three hits, their context grown within its characters (LoCoMo's turns are
    # short: about 20 turns); BM25 alone at the same turns is the bar to pass
    assert 3 <= overall["shown"] <= 3 * (3 + 2 * 12)
    assert overall["answer_ireneo"] >= 0.4 and overall["top10_ireneo"] >= 0.4
