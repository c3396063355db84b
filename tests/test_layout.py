"""The in-memory layout of passages recall scores windows from: neighbourhoods, filters, and
staying true to the store as turns are added, edited and forgotten (both stores)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from ireneo.formats import funes_jsonl
from ireneo.store import Filters
from ireneo.store.layout import PassageLayout, PassageRow, ranges
from tests.conftest import conversation, turn_line, write_jsonl

NOON = int(datetime(2026, 10, 1, 12, tzinfo=UTC).timestamp())


def row(
    pid: int,
    session: str,
    seq: int,
    terms: str,
    *,
    ts: int | None = None,
    role: str = "user",
    block_type: str = "text",
    echo: bool = False,
) -> PassageRow:
    return PassageRow(
        pid, session, seq, NOON + seq if ts is None else ts, role, block_type, terms, echo
    )


def test_ranges_is_the_concatenation_of_aranges() -> None:
    starts, ends = np.array([3, 0, 7, 7]), np.array([5, 0, 10, 8])
    assert ranges(starts, ends).tolist() == [3, 4, 7, 8, 9, 7]
    assert ranges(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).tolist() == []


def test_a_neighbourhood_stays_in_its_conversation_and_reach() -> None:
    rows = [row(i + 1, "a", i, f"a{i}") for i in range(6)]
    rows += [row(10 + i, "b", i, f"b{i}") for i in range(3)]
    rows.append(row(20, "a", 3, "second passage of a3", block_type="code"))
    layout = PassageLayout().extended(rows)

    def near(pid: int, reach: int) -> set[int]:
        return set(layout.ids[layout.near(layout.positions([pid]), reach)].tolist())

    assert near(4, 1) == {3, 4, 5, 20}  # a2, a3 (both passages), a4
    assert near(1, 2) == {1, 2, 3}  # a0 has no turn before it
    assert near(11, 5) == {10, 11, 12}  # never into conversation a
    assert layout.turns_of([20, 12, 99]) == {20: ("a", 3), 12: ("b", 2)}


def test_extending_leaves_the_layout_a_search_already_holds() -> None:
    first = PassageLayout().extended([row(1, "a", 0, "pump seal")])
    second = first.extended([row(2, "a", 1, "seal leak"), row(3, "b", 0, "lunch")])
    assert len(first) == 1 and first.last_id == 1
    assert len(second) == 3 and second.last_id == 3
    assert first.near(first.positions([1]), 1).tolist() == [0]
    assert second.near(second.positions([1]), 1).tolist() == [0, 1]
    tokens, owner, followed = second.tokens_of(np.array([0, 1]))
    names = second.vocabulary.names
    assert [names[t] for t in tokens] == ["pump", "seal", "seal", "leak"]
    assert owner.tolist() == [0, 0, 1, 1] and followed.tolist() == [True, False, True, False]


def test_filters_on_the_layout() -> None:
    layout = PassageLayout().extended(
        [
            row(1, "a", 0, "x", role="user"),
            row(2, "a", 1, "x", role="assistant", echo=True),
            row(3, "b", 0, "x", role="user", block_type="code", ts=NOON + 3600),
        ]
    )
    every = np.arange(3)
    assert layout.visible(every, Filters()).tolist() == [0, 2]
    assert layout.visible(every, Filters(include_echoes=True)).tolist() == [0, 1, 2]
    assert layout.visible(every, Filters(block_types=("code",))).tolist() == [2]
    admitted = layout.admitted
    assert admitted(every, Filters(role="assistant")).tolist() == [False, True, False]
    assert admitted(every, Filters(session_id="b")).tolist() == [False, False, True]
    assert admitted(every, Filters(session_id="nowhere")).tolist() == [False, False, False]
    later = datetime.fromtimestamp(NOON + 1800.5, UTC)
    assert admitted(every, Filters(since=later)).tolist() == [False, False, True]
    assert admitted(every, Filters(until=later)).tolist() == [True, True, False]
    # a bound is compared to the second, as timestamps are stored
    exact = datetime.fromtimestamp(NOON + 3600.9, UTC)
    assert admitted(every, Filters(since=exact)).tolist() == [False, False, True]


def vocabulary(memory) -> set[str]:
    layout = memory.store.layout()
    tokens = layout.tokens_of(np.arange(len(layout)))[0]
    return {layout.vocabulary.names[t] for t in tokens.tolist()}


def test_the_layout_follows_appends_edits_and_forgets(memory, tmp_path):
    conversation(tmp_path / "one", "pumps", ["the seal on pump P-003 leaks", "ticket MT-4471"])
    memory.index([tmp_path / "one"])
    assert {"seal", "mt4471"} <= vocabulary(memory)

    # an appended conversation is in the next recall's layout
    conversation(tmp_path / "two", "lunch", ["lunch on Friday at the canteen"])
    memory.index([tmp_path / "two"])
    assert "canteen" in vocabulary(memory)
    assert memory.recall("canteen", k=1)[0].session_id == "lunch"

    # an edited turn's old words leave it (the passage is deleted and written again)
    edited = turn_line("pumps", 1, "ticket MT-5000", uuid="pumps-1")
    memory.store_turns(funes_jsonl.read_file(write_jsonl(tmp_path / "e.funes.jsonl", [edited])))
    assert "mt4471" not in vocabulary(memory) and "mt5000" in vocabulary(memory)

    # a forgotten conversation leaves nothing behind, its conversation id included
    memory.forget("lunch")
    layout = memory.store.layout()
    assert "canteen" not in vocabulary(memory) and "lunch" not in layout.sessions.code
    assert len(layout) == 2
    assert all(hit.session_id == "pumps" for hit in memory.recall("lunch canteen"))


def test_a_memory_larger_than_a_read_chunk_is_read_whole(memory, tmp_path):
    """The layout and the vectors are read a few thousand rows at a time (a server-side cursor
    on PostgreSQL): every row arrives, in order, whatever the chunk boundaries."""
    count = 4096 + 50
    lines = [turn_line(f"c{i // 2}", i % 2, f"note {i} about pump P-{i:05d}") for i in range(count)]
    memory.store_turns(funes_jsonl.read_file(write_jsonl(tmp_path / "many.funes.jsonl", lines)))
    pending = memory.store.pending_passages(count + 1)
    assert len(pending) == count
    vectors = np.random.default_rng(0).standard_normal((count, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    memory.store.put_vectors([pid for pid, _ in pending], vectors)

    layout = memory.store.layout()
    assert len(layout) == count and (np.diff(layout.ids) > 0).all()
    assert layout.turns_of([pending[-1][0]])[pending[-1][0]] == (f"c{(count - 1) // 2}", 1)
    for i in (0, 4095, 4096, count - 1):  # each side of the first chunk's end
        found = memory.store.dense_search(vectors[i], 1, Filters())
        assert found[0][0] == pending[i][0]


def bm25_by_hand(layout: PassageLayout, words: list[str], weights: list[float]) -> dict[int, float]:
    average = layout.lengths.mean()
    scores = {}
    for position in range(len(layout)):
        terms = layout.vocabulary.names
        held = [terms[t] for t in layout.tokens_of(np.array([position]))[0]]
        score = 0.0
        for word, weight in zip(words, weights, strict=True):
            tf = held.count(word)
            if tf:
                norm = 1.2 * (1 - 0.75 + 0.75 * len(held) / average)
                score += weight * tf * 2.2 / (tf + norm)
        if score:
            scores[int(layout.ids[position])] = score
    return scores


def test_keyword_candidates_are_bm25s_best_and_follow_appends() -> None:
    texts = ["pump seal leak", "pump pump pump", "seal", "lunch menu", "leak report pump seal"]
    layout = PassageLayout().extended([row(i + 1, f"c{i}", 0, t) for i, t in enumerate(texts)])
    words, weights = ["pump", "seal"], [1.0, 2.0]

    def best(layout: PassageLayout, limit: int = 10, filters: Filters | None = None) -> list[int]:
        found = layout.bm25(
            layout.term_ids(words),
            np.array(weights),
            layout.lengths.mean(),
            limit,
            filters or Filters(),
        )
        return layout.ids[found].tolist()

    expected = bm25_by_hand(layout, words, weights)
    assert best(layout) == sorted(expected, key=lambda pid: (-expected[pid], pid))
    assert best(layout, limit=2) == best(layout)[:2]
    assert 4 not in best(layout)  # holds neither word
    assert best(layout, filters=Filters(session_id="c2")) == [3]

    # passages appended after the postings were built are found too, rebuilt or not
    grown = layout.extended([row(6, "c5", 0, "seal seal seal")])
    assert 6 in best(grown)
    many = grown.extended([row(100 + i, f"d{i}", 0, "pump seal") for i in range(20)])
    assert set(range(100, 120)) <= set(best(many, limit=30))
    assert best(layout) == sorted(expected, key=lambda pid: (-expected[pid], pid))
    assert PassageLayout().bm25([0], np.ones(1), 1.0, 10, Filters()).tolist() == []


def test_the_passages_holding_every_term_of_a_name() -> None:
    texts = [
        "caps from carrow depot 8",
        "caps from carrow terminal 8 depot",  # every word, not as one name: still held
        "carrow terminal 8",
        "depot 8 depot 8",
        "lunch at carrow",
    ]
    layout = PassageLayout().extended([row(i + 1, f"c{i}", 0, t) for i, t in enumerate(texts)])

    def holding(layout: PassageLayout, words: list[str], limit: int = 10, **filters) -> list[int]:
        found = layout.holding(layout.term_ids(words), limit, Filters(**filters))
        return layout.ids[found].tolist()

    assert holding(layout, ["carrow", "depot", "8"]) == [1, 2]
    assert holding(layout, ["carrow", "depot", "8"], limit=1) == [2]  # the latest
    assert holding(layout, ["carrow", "depot", "8"], session_id="c1") == [2]
    assert holding(layout, ["carrow", "noodles"]) == []  # a word no passage holds
    assert holding(layout, []) == []
    # a word said twice in a passage, or asked twice, counts once
    assert holding(layout, ["depot", "8", "depot"]) == [1, 2, 4]
    assert holding(layout, ["8", "8"]) == [1, 2, 3, 4]
    grown = layout.extended([row(6, "c5", 0, "carrow depot 8 again")])  # after the postings
    assert holding(grown, ["carrow", "depot", "8"]) == [1, 2, 6]


def test_holding_reads_a_long_posting_list_from_its_newest_end() -> None:
    """A common word's postings are read newest first, a chunk at a time; what is found is the
    same as reading them all: the latest passages holding every term, filters applied."""
    texts = {pid: f"carrow depot {pid % 7}" for pid in range(1, 2001)}
    layout = PassageLayout().extended(
        [row(pid, f"c{pid % 3}", pid, text) for pid, text in texts.items()]
    )
    for limit, session in [(3, None), (40, None), (500, None), (40, "c1"), (2000, "c2")]:
        filters = Filters(session_id=session)
        found = layout.holding(layout.term_ids(["depot", "carrow", "5"]), limit, filters)
        expected = [
            pid
            for pid, text in texts.items()
            if text.endswith(" 5") and (session is None or f"c{pid % 3}" == session)
        ]
        assert layout.ids[found].tolist() == expected[-limit:]
