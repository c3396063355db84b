"""`ireneo bench --locomo PATH`: recall judged on LoCoMo's long conversations, by what the agent
is shown.

LoCoMo (Maharana et al., ACL 2024; CC BY-NC, downloaded by the user, never bundled) gives ten
long two-person chats with questions whose evidence is a list of turns ("D1:3"). Each sample
becomes one memory (SQLite, temporary), each session a conversation. For every question with
evidence (categories 1-4) the bench asks what `recall_my_conversations` answers (the same
function: k hits, their context, the character budget) and counts the evidence turns among the
turns that answer shows. The baselines of `benchmark.run` (BM25; BM25 top-30 + dense top-30, RRF
k=60) show their ranked turns with ±1 neighbours, in rank order, until they have shown as many
turns as ireneo did for that question. recall@10 is the share of evidence among the first 10
turns shown, each method asked for enough hits to show them.

"Nothing relevant" is measured both ways in the same run: answerable questions that got fewer
than k hits ("cut short"), queries without content that got any hit (must be none), and
questions about subjects absent from every memory (`data/offtopic_*.txt`) that got no hit.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

from ireneo.benchmark.run import METHODS, Stage
from ireneo.config import Settings
from ireneo.embed import load_embedder
from ireneo.memory import Memory
from ireneo.model import Block, Hit, Turn
from ireneo.render import render_hit
from ireneo.server.limits import Limits
from ireneo.server.tools import NO_MEMORY, NOTHING_RELEVANT, Recaller, recall_answer
from ireneo.server.tools import UNAVAILABLE as UNAVAILABLE_ANSWER

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5  # the answer is not in the chat: "unanswerable"
K = Settings.recall_k  # what the tool asks for and shows, as the server's defaults
MAX_CHARS = Settings.max_result_chars
TOP = 10  # recall@10: the first ten turns shown
BASELINES = ("bm25", "funes_rrf")
BASELINE_HITS = 12  # a baseline's hits read for its turns: 12 windows show 30 turns and more
MAX_FILE_BYTES = 256 * 2**20
MAX_TURN_CHARS = 20_000
# The targets printed beside the figures (issue 26).
TARGET_EVIDENCE = 0.85
TARGET_VS_BM25 = 1.35
TARGET_RECALL10 = 0.75
TARGET_OFFTOPIC = 0.90

# Queries that hold no content: the tool must find nothing for any of them.
EMPTY_QUERIES = (
    "",
    " ",
    "\t\n ",
    "?",
    "?!...,;",
    "...",
    "— ? —",
    "what is the",
    "what is it",
    "is it the",
    "what was that",
    "что это",
    "что это было",
    "и это",
    "그것은",
    "그것은 그",
)

Key = tuple[str, int]  # (session_id, seq): a turn


class LocomoError(ValueError):
    """The file is not LoCoMo-shaped; the message names what is wrong and where."""


@dataclass(frozen=True)
class Question:
    sample: str
    number: int  # its index among the sample's qa, for finding it again
    text: str
    category: int
    evidence: tuple[Key, ...]  # empty for an unanswerable one


@dataclass
class Sample:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]  # categories 1-4, with evidence found in the chat
    unanswerable: list[Question]  # category 5
    dropped: int = 0  # questions of categories 1-4 whose evidence names no turn of the chat


# -- reading the file -----------------------------------------------------------------------


def load(path: Path, samples: int | None = None) -> list[Sample]:
    """The first `samples` samples (all when None) of a LoCoMo file."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise LocomoError(f"cannot read the LoCoMo file {path}: {exc.strerror}") from exc
    if size > MAX_FILE_BYTES:
        raise LocomoError(f"{path} is {size:,} bytes: a LoCoMo file is at most {MAX_FILE_BYTES:,}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LocomoError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(raw, list) or not raw:
        raise LocomoError(f"{path}: expected a list of samples, as LoCoMo's locomo10.json")
    return [parse_sample(item, i) for i, item in enumerate(raw[:samples] if samples else raw)]


def parse_sample(raw: object, index: int) -> Sample:
    """One sample: its sessions as turns, its questions with evidence as turn keys."""
    if not isinstance(raw, dict) or not isinstance(raw.get("conversation"), dict):
        raise LocomoError(f"sample {index}: expected an object with a 'conversation'")
    sample_id = str(raw.get("sample_id") or f"sample-{index}")
    if not re.fullmatch(r"[\w.-]{1,64}", sample_id):
        raise LocomoError(f"sample {index}: sample_id {sample_id[:80]!r} is not a plain name")
    turns, where = sample_turns(raw["conversation"], sample_id)
    qa = raw.get("qa") or []
    if not isinstance(qa, list):
        raise LocomoError(f"sample {sample_id}: 'qa' is not a list")
    sample = Sample(sample_id, turns, [], [])
    for number, item in enumerate(qa):
        if not isinstance(item, dict) or not isinstance(item.get("question"), str):
            raise LocomoError(f"sample {sample_id}, question {number}: expected a 'question'")
        category = item.get("category")
        if category == ADVERSARIAL:
            sample.unanswerable.append(Question(sample_id, number, item["question"], category, ()))
            continue
        if category not in CATEGORIES:
            raise LocomoError(f"sample {sample_id}, question {number}: category {category!r}")
        keys = tuple(
            dict.fromkeys(where[d] for d in evidence_ids(item.get("evidence")) if d in where)
        )
        if keys:
            sample.questions.append(Question(sample_id, number, item["question"], category, keys))
        else:
            sample.dropped += 1
    return sample


def sample_turns(conversation: dict, sample_id: str) -> tuple[list[Turn], dict[str, Key]]:
    """Every session's turns, and where each `dia_id` went. Session N is the conversation
    `locomo-<sample>-s<N>`; its turns are numbered from 1 in order, dated from the session's
    date a minute apart, spoken by the speakers' names; a shared photo's caption is appended."""
    turns: list[Turn] = []
    where: dict[str, Key] = {}
    sessions = sorted(
        (int(m.group(1)), value)
        for key, value in conversation.items()
        if (m := re.fullmatch(r"session_(\d+)", key))
    )
    for number, session in sessions:
        if not isinstance(session, list):
            raise LocomoError(f"sample {sample_id}, session_{number}: expected a list of turns")
        if not session:
            continue
        session_id = f"locomo-{sample_id}-s{number}"
        started = parse_when(conversation.get(f"session_{number}_date_time"), sample_id, number)
        for seq, item in enumerate(session, 1):
            if not isinstance(item, dict) or not isinstance(item.get("text", ""), str):
                raise LocomoError(f"sample {sample_id}, session_{number}, turn {seq}: no text")
            text = turn_text(item)
            dia_id = str(item.get("dia_id") or f"D{number}:{seq}")
            where.setdefault(dia_id, (session_id, seq))
            turns.append(
                Turn(
                    session_id=session_id,
                    turn_uuid=f"{session_id}-{seq}",
                    seq=seq,
                    ts=started + timedelta(minutes=seq - 1),
                    role=str(item.get("speaker") or "unknown")[:64],
                    harness="locomo",
                    blocks=(Block("text", text),),
                )
            )
    if not turns:
        raise LocomoError(f"sample {sample_id}: no session holds a turn")
    return turns, where


def turn_text(item: dict) -> str:
    """A turn's words, with "[shares a photo: <caption>]" when it shared an image."""
    text = (item.get("text") or "").strip()
    caption = item.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [shares a photo: {caption.strip()}]".strip()
    return text[:MAX_TURN_CHARS]


def parse_when(value: object, sample_id: str, session: int) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023", as UTC."""
    if not isinstance(value, str):
        raise LocomoError(f"sample {sample_id}: session_{session}_date_time is missing")
    try:
        moment = datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError as exc:
        raise LocomoError(
            f"sample {sample_id}: session_{session}_date_time {value[:60]!r} is not like "
            "'1:56 pm on 8 May, 2023'"
        ) from exc
    return moment.replace(tzinfo=UTC)


def evidence_ids(value: object) -> list[str]:
    """The dia_ids a question's evidence names, as the chat writes them: entries that hold
    several ("D8:6; D9:17") are split, "D:11:26" and "D30:05" read as D11:26 and D30:5."""
    if not isinstance(value, list):
        return []
    found = []
    for entry in value:
        for match in re.finditer(r"D:?(\d+):0*(\d+)", str(entry)):
            found.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return found


# -- what each method shows ---------------------------------------------------------------------


def hit_turns(hit: Hit) -> list[Key]:
    """A hit's turns in reading order: its context and itself, by turn number."""
    return [(hit.session_id, seq) for seq in sorted({hit.seq, *(c.seq for c in hit.context)})]


def reading_order(hits: Iterable[Hit], limit: int | None = None) -> list[Key]:
    """The distinct turns hits show, in the order they are read, the first `limit`."""
    shown: dict[Key, None] = {}
    for hit in hits:
        for key in hit_turns(hit):
            if limit is not None and len(shown) >= limit:
                return list(shown)
            shown.setdefault(key)
    return list(shown)


def shown_turns(hits: list[Hit], text: str, refs: dict[str, str]) -> list[Key]:
    """The turns the tool's text shows, in reading order: the whole passages kept within the
    budget, or, when even the best one was cut, the turns whose line begins before the cut."""
    shown: dict[Key, None] = {}
    for number, hit in enumerate(hits, 1):
        block = render_hit(number, hit, refs.get(hit.session_id))
        if block.rstrip() in text:  # the answer is stripped at its end
            shown.update(dict.fromkeys(hit_turns(hit)))
            continue
        if number == 1:  # the best passage alone was too long: its beginning is shown
            kept = _common_prefix(block, text)
            offset = 0
            for key in hit_turns(hit):  # each turn's line starts "  > [seq] " or "    [seq] "
                found = [block.find(f"\n{lead}[{key[1]}] ", offset) for lead in ("  > ", "    ")]
                offset = min((at for at in found if at >= 0), default=len(block))
                if offset + 1 < kept:
                    shown.setdefault(key)
        break
    return list(shown)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def evidence_share(question: Question, shown: Iterable[Key]) -> float:
    """The share of the question's evidence turns among `shown`."""
    seen = set(shown)
    return sum(key in seen for key in question.evidence) / len(question.evidence)


@dataclass
class Scored:
    """One question's figures (no LoCoMo text: the results may be kept in the repository)."""

    sample: str
    number: int
    category: int
    evidence: int
    shown: int  # turns the tool's answer shows
    hits: int
    ms: float  # the tool's recall and rendering
    answer: dict[str, float] = field(default_factory=dict)  # method -> evidence share, same turns
    top10: dict[str, float] = field(default_factory=dict)  # method -> evidence share, first 10


def score(memory: Memory, question: Question) -> Scored:
    started = time.perf_counter()
    hits, text = recall_answer(memory, question.text, K, MAX_CHARS)
    ms = (time.perf_counter() - started) * 1000
    refs = {hit.session_id: memory.conversation_ref(hit.session_id) for hit in hits}
    shown = shown_turns(hits, text, refs)
    deep, _ = recall_answer(memory, question.text, TOP, None)
    result = Scored(
        question.sample,
        question.number,
        question.category,
        len(question.evidence),
        len(shown),
        len(hits),
        ms,
        {"ireneo": evidence_share(question, shown)},
        {"ireneo": evidence_share(question, reading_order(deep, TOP))},
    )
    for name in BASELINES:
        ranked = METHODS[name](memory, question.text, BASELINE_HITS)
        result.answer[name] = evidence_share(question, reading_order(ranked, len(shown)))
        result.top10[name] = evidence_share(question, reading_order(ranked, TOP))
    return result


# -- nothing relevant ---------------------------------------------------------------------------


def offtopic_queries(lang: str) -> list[str]:
    """The questions about subjects absent from every benchmark memory, in `lang`."""
    text = (
        resources.files("ireneo.benchmark").joinpath(f"data/offtopic_{lang}.txt").read_text("utf-8")
    )
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


OFFTOPIC_LANGS = ("en", "ru", "ko")


HIT, NOTHING, UNAVAILABLE = "hit", "nothing", "unavailable"


def tool_answers(memory: Memory, queries: list[str]) -> list[str]:
    """What the real tool (`Recaller.recall`, its query guard included) answered each query
    with: HIT (a passage), NOTHING ("nothing relevant") or UNAVAILABLE (its failure sentence).
    Its timeout is lifted to a minute: this measures relevance, and a busy machine's first
    Korean query (loading the morpheme analyser) can take the server's 10 s."""
    recaller = Recaller(Limits.from_settings(Settings()).with_(recall_timeout=60.0))
    lease = lambda: nullcontext(memory)  # noqa: E731 - the caller's memory, as the server leases it

    async def ask() -> list[str]:
        return [await recaller.recall(lambda: ("bench", lease), query) for query in queries]

    return [_outcome(answer) for answer in asyncio.run(ask())]


def _outcome(answer: str) -> str:
    if answer in (NOTHING_RELEVANT, NO_MEMORY):
        return NOTHING
    return UNAVAILABLE if answer == UNAVAILABLE_ANSWER else HIT


@dataclass
class Nothing:
    """Counts for "nothing relevant", both ways, summed over the samples."""

    answerable: int = 0
    cut_short: int = 0  # answerable questions with fewer than K hits
    unanswerable: int = 0
    unanswerable_silent: int = 0  # category 5 questions that got no hit
    empty: int = 0
    empty_with_hit: int = 0  # content-free queries that got a hit (must be 0)
    offtopic: dict[str, int] = field(default_factory=dict)  # lang -> queries asked
    offtopic_silent: dict[str, int] = field(default_factory=dict)  # lang -> no hit
    unavailable: int = 0  # answers of the tool's failure sentence, counted in none of the above
    passages: list[int] = field(default_factory=list)  # in each memory asked


def nothing_relevant(
    memory: Memory, unanswerable: list[Question], hits: list[int], into: Nothing
) -> None:
    """Add to `into` what the tool answers in `memory`: `hits` is the number of hits each
    answerable question got; the content-free and off-topic queries are asked here."""
    into.passages.append(memory.status().passages)
    into.answerable += len(hits)
    into.cut_short += sum(n < K for n in hits)
    answered = tool_answers(memory, [q.text for q in unanswerable])
    into.unavailable += answered.count(UNAVAILABLE)
    into.unanswerable += len(answered) - answered.count(UNAVAILABLE)
    into.unanswerable_silent += answered.count(NOTHING)
    answered = tool_answers(memory, list(EMPTY_QUERIES))
    into.unavailable += answered.count(UNAVAILABLE)
    into.empty += len(answered) - answered.count(UNAVAILABLE)
    into.empty_with_hit += answered.count(HIT)
    for lang in OFFTOPIC_LANGS:
        answered = tool_answers(memory, offtopic_queries(lang))
        into.unavailable += answered.count(UNAVAILABLE)
        asked = len(answered) - answered.count(UNAVAILABLE)
        into.offtopic[lang] = into.offtopic.get(lang, 0) + asked
        into.offtopic_silent[lang] = into.offtopic_silent.get(lang, 0) + answered.count(NOTHING)


# -- the run ------------------------------------------------------------------------------------


@dataclass
class LocomoConfig:
    path: Path
    samples: int | None = None  # the first N samples; None: all
    model: str | None = None
    out: Path = Path("bench/results")
    # also ask "nothing relevant" of one memory holding every sample: how relevance behaves in
    # a memory of 5,882 passages, not only of 369-689
    together: bool = True


def _unseen(label: str, steps: int | None) -> Callable[[], None]:
    return lambda: None


def run(config: LocomoConfig, stage: Stage = _unseen) -> dict:
    """Index each sample, score its questions, measure nothing-relevant; the report document."""
    samples = load(config.path, config.samples)
    settings = Settings.from_env()  # a door, as the CLI is: its memories read the environment
    load_embedder(config.model)  # an 8-bit build is made once, before anything is timed
    scored: list[Scored] = []
    nothing = Nothing()
    index_s: list[float] = []
    model = None
    with tempfile.TemporaryDirectory(prefix="ireneo-locomo-") as scratch:
        for sample in samples:
            home = Path(scratch) / sample.sample_id
            with Memory(home, settings=settings, model=config.model) as memory:
                stage(f"{sample.sample_id}: indexing {len(sample.turns):,} turns", None)
                started = time.perf_counter()
                memory.store_turns(sample.turns)
                memory.embed_pending()
                index_s.append(time.perf_counter() - started)
                model = memory.model_name
                advance = stage(
                    f"{sample.sample_id}: {len(sample.questions)} questions", len(sample.questions)
                )
                mine = []
                for question in sample.questions:
                    mine.append(score(memory, question))
                    advance()
                stage(f"{sample.sample_id}: nothing relevant, both ways", None)
                nothing_relevant(memory, sample.unanswerable, [s.hits for s in mine], nothing)
                scored += mine
        together = None
        if config.together and len(samples) > 1:
            together = nothing_together(
                Path(scratch) / "together", samples, settings, config.model, stage
            )
    return document(config, samples, scored, nothing, index_s, model, together)


def nothing_together(
    home: Path, samples: list[Sample], settings: Settings, model: str | None, stage: Stage
) -> Nothing:
    """ "Nothing relevant", both ways, in one memory holding every sample's sessions."""
    turns = [turn for sample in samples for turn in sample.turns]
    questions = [question for sample in samples for question in sample.questions]
    into = Nothing()
    with Memory(home, settings=settings, model=model) as memory:
        stage(f"all {len(samples)} samples in one memory: indexing {len(turns):,} turns", None)
        memory.store_turns(turns)
        memory.embed_pending()
        advance = stage("all samples in one memory: nothing relevant, both ways", len(questions))
        hits = []
        for question in questions:
            hits.append(len(recall_answer(memory, question.text, K, MAX_CHARS)[0]))
            advance()
        unanswerable = [question for sample in samples for question in sample.unanswerable]
        nothing_relevant(memory, unanswerable, hits, into)
    return into


def document(
    config: LocomoConfig,
    samples: list[Sample],
    scored: list[Scored],
    nothing: Nothing,
    index_s: list[float],
    model: str | None,
    together: Nothing | None = None,
) -> dict:
    times = sorted(s.ms for s in scored)
    return {
        "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "file": Path(config.path).name,
        "model": model,
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]},
        "samples": [s.sample_id for s in samples],
        "turns": sum(len(s.turns) for s in samples),
        "dropped_questions": sum(s.dropped for s in samples),
        "k": K,
        "max_chars": MAX_CHARS,
        "summary": summary(scored),
        "nothing": nothing.__dict__,
        "nothing_together": together.__dict__ if together else None,
        "time": {
            "question_p50_ms": statistics.median(times) if times else None,
            "question_p95_ms": times[int(0.95 * (len(times) - 1))] if times else None,
            "index_s_per_sample": statistics.median(index_s) if index_s else None,
        },
        "questions": [s.__dict__ for s in scored],
    }


def summary(scored: list[Scored]) -> dict[str, dict[str, float]]:
    """Per category and overall: questions, turns shown, each method's two measures."""
    groups: dict[str, list[Scored]] = {"overall": scored}
    for number, name in CATEGORIES.items():
        groups[f"{number} {name}"] = [s for s in scored if s.category == number]
    table = {}
    for name, group in groups.items():
        if not group:
            continue
        row: dict[str, float] = {
            "questions": len(group),
            "shown": statistics.mean(s.shown for s in group),
        }
        for method in ("ireneo", *BASELINES):
            row[f"answer_{method}"] = statistics.mean(s.answer[method] for s in group)
            row[f"top10_{method}"] = statistics.mean(s.top10[method] for s in group)
        table[name] = row
    return table


def save(doc: dict, out: Path) -> Path:
    """The report as JSON, markdown and a plot under `out`/locomo, as `latest.*` and again
    named by the model (runs of two models side by side); returns the latest markdown."""
    folder = Path(out) / "locomo"
    folder.mkdir(parents=True, exist_ok=True)
    stems = ["latest"]
    if doc["model"] and re.fullmatch(r"[\w.-]{1,64}", doc["model"]):
        stems.append(doc["model"])
    for stem in stems:
        (folder / f"{stem}.json").write_text(json.dumps(doc, indent=1))
        (folder / f"{stem}.md").write_text(markdown(doc))
        plot(doc, folder / f"{stem}.png")
    return folder / "latest.md"


def markdown(doc: dict) -> str:
    overall = doc["summary"].get("overall", {})
    lines = [
        f"# ireneo bench --locomo, {doc['started']}",
        "",
        f"Model {doc['model']}; {len(doc['samples'])} samples ({', '.join(doc['samples'])}), "
        f"{doc['turns']:,} turns; the tool's answer: {doc['k']} hits with context within "
        f"{doc['max_chars']:,} characters. Baselines show their ranked turns with ±1 "
        "neighbours until they show as many turns as ireneo did for the question. "
        f"{doc['dropped_questions']} questions left out (their evidence names no turn).",
        "",
        "| category | questions | turns shown | evidence in answer: ireneo | bm25 | funes_rrf "
        "| ireneo ÷ bm25 | recall@10: ireneo | bm25 | funes_rrf |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in doc["summary"].items():
        lines.append(
            f"| {name} | {row['questions']} | {row['shown']:.1f} "
            f"| {row['answer_ireneo']:.3f} | {row['answer_bm25']:.3f} "
            f"| {row['answer_funes_rrf']:.3f} "
            f"| {row['answer_ireneo'] / max(row['answer_bm25'], 1e-9):.2f}× "
            f"| {row['top10_ireneo']:.3f} | {row['top10_bm25']:.3f} "
            f"| {row['top10_funes_rrf']:.3f} |"
        )
    if overall:
        ratio = overall["answer_ireneo"] / max(overall["answer_bm25"], 1e-9)
        lines += [
            "",
            "Targets: evidence in the answer "
            f"{overall['answer_ireneo']:.3f} (≥ {TARGET_EVIDENCE}) "
            f"{_mark(overall['answer_ireneo'] >= TARGET_EVIDENCE)}, "
            f"{ratio:.2f}× BM25 at the same turns (≥ {TARGET_VS_BM25}×) "
            f"{_mark(ratio >= TARGET_VS_BM25)}; recall@10 {overall['top10_ireneo']:.3f} "
            f"(≥ {TARGET_RECALL10}) {_mark(overall['top10_ireneo'] >= TARGET_RECALL10)}.",
        ]
    lines += ["", "## Nothing relevant, both ways (the tool's answer)", ""]
    lines += _nothing_table(doc["nothing"], doc.get("nothing_together"), doc["k"])
    lines += [
        "",
        f"Time per question (the tool's recall and text): p50 {_ms(doc['time']['question_p50_ms'])}"
        f", p95 {_ms(doc['time']['question_p95_ms'])}; indexing a sample: median "
        f"{doc['time']['index_s_per_sample'] or 0:.1f} s.",
    ]
    return "\n".join(lines) + "\n"


def _nothing_table(each: dict, together: dict | None, k: int) -> list[str]:
    """Each sample's memory, summed; and, when measured, one memory holding them all."""
    columns = [each] + ([together] if together else [])
    rows = [
        (f"answerable questions cut short (< {k} hits)", "answerable", "cut_short", "0%"),
        (
            "queries without content (empty, punctuation, stop words) with a hit",
            "empty",
            "empty_with_hit",
            "0%",
        ),
    ]
    lines = [
        "| measure | each sample's memory | "
        + ("all in one memory | " if together else "")
        + "target |",
        "|---|---:|" + ("---:|" if together else "") + "---|",
    ]

    def cell(whole: int, part: int) -> str:
        return f"{_share(part, whole)} of {whole:,}"

    for label, whole, part, target in rows:
        cells = " | ".join(cell(c[whole], c[part]) for c in columns)
        lines.append(f"| {label} | {cells} | {target} |")
    for lang in each["offtopic"]:
        cells = " | ".join(
            cell(c["offtopic"].get(lang, 0), c["offtopic_silent"].get(lang, 0)) for c in columns
        )
        lines.append(
            f"| off-topic questions ({lang}) with no hit | {cells} | ≥ {TARGET_OFFTOPIC:.0%} |"
        )
    cells = " | ".join(cell(c["unanswerable"], c["unanswerable_silent"]) for c in columns)
    lines += [
        f"| unanswerable questions (category 5) with no hit | {cells} | (information) |",
        "",
        "The tool answered "
        + " and ".join(str(c["unavailable"]) for c in columns)
        + " of these queries with its failure sentence (left out of the counts above)."
        + f" Passages in a memory: {_span(each['passages'])} each sample"
        + (f", {_span(together['passages'])} all in one" if together else "")
        + ".",
    ]
    return lines


def _span(values: list[int]) -> str:
    if not values:
        return "n/a"
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def _mark(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "n/a"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def plot(doc: dict, path: Path) -> Path:
    """Each method's two measures by category, with the targets as dotted lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["summary"]
    names = list(rows)
    methods = ("ireneo", *BASELINES)
    width = 0.8 / len(methods)
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    panels = (
        ("answer", f"evidence in the tool's answer (k={doc['k']}; baselines: same turns)"),
        ("top10", "recall@10 over the turns shown"),
    )
    for ax, (measure, title) in zip(axes, panels, strict=True):
        for i, method in enumerate(methods):
            ax.bar(
                [x + (i - 1) * width for x in range(len(names))],
                [rows[name][f"{measure}_{method}"] for name in names],
                width,
                label=method,
            )
        target = TARGET_EVIDENCE if measure == "answer" else TARGET_RECALL10
        ax.axhline(target, color="grey", lw=0.8, ls=":", label="target")
        ax.set_xticks(range(len(names)), names, fontsize=8)
        ax.set(title=title, ylim=(0, 1.02))
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=8, loc="lower left")
    fig.suptitle(f"LoCoMo, {len(doc['samples'])} samples, model {doc['model']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
