"""A recall's turns read (search.Reads): the same turns, in the same order, as the store's own
read of each window, with each turn's row read from the store once."""

from __future__ import annotations

import random

from ireneo import Memory
from ireneo.formats import funes_jsonl
from ireneo.search import Reads
from tests.conftest import turn_line, write_jsonl


def test_windows_read_through_a_recall_are_the_stores_and_read_once(home, tmp_path):
    lines = [turn_line(f"c{c}", seq, f"turn {seq} of c{c}") for c in range(3) for seq in range(30)]
    lines += [turn_line("c1", 7, "a second turn at seq 7", uuid="again")]  # two turns, one seq
    lines += [turn_line("c2", seq, f"late {seq}") for seq in (40, 41, 45)]  # gaps in the seqs
    with Memory(home) as memory:
        memory.store_turns(funes_jsonl.read_file(write_jsonl(tmp_path / "a.funes.jsonl", lines)))
        store = memory.store
        read = store.turn_windows
        calls: list[list[tuple[str, int, int]]] = []
        store.turn_windows = lambda windows: calls.append(windows) or read(windows)
        pick = random.Random(7)
        for _ in range(40):
            calls.clear()
            reads = Reads(store)
            for step in range(1, 5):  # a recall's steps, each a batch of windows, some overlapping
                batch = []
                for _ in range(pick.randint(1, 6)):
                    first = pick.randint(-5, 48)
                    batch.append((f"c{pick.randint(0, 3)}", first, first + pick.randint(-1, 14)))
                assert reads.windows(batch) == read(batch)
                assert len(calls) <= step  # one read a step at most
            seqs = [
                (sid, seq) for call in calls for sid, lo, hi in call for seq in range(lo, hi + 1)
            ]
            assert len(seqs) == len(set(seqs))  # no seq asked of the store twice


def test_a_recall_asks_the_store_for_no_turn_twice(home, tmp_path):
    """The tool's recall (k 3, grown within 4,000 characters) reads the hits' windows and the
    sides `widen` grows into in one read, and then only turns it has not read."""
    from ireneo.render import within

    lines = [
        turn_line(f"c{c}", seq, f"pump {c} bearing noise, reading {seq} of line {c}")
        for c in range(6)
        for seq in range(40)
    ]
    with Memory(home) as memory:
        memory.index([write_jsonl(tmp_path / "src" / "a.funes.jsonl", lines)])
        store = memory.store
        read = store.turn_windows
        calls: list[list[tuple[str, int, int]]] = []
        store.turn_windows = lambda windows: calls.append(windows) or read(windows)
        hits = memory.recall("pump bearing noise line 3", k=3, fits=within(4000))
        assert len(hits) >= 3 and any(len(hit.context) > 2 for hit in hits)  # grown
        seqs = [(sid, seq) for call in calls for sid, lo, hi in call for seq in range(lo, hi + 1)]
        assert len(seqs) == len(set(seqs))
        assert len(calls) <= 2 + len(hits) // 4  # the hits with their sides, then AHEAD a read
