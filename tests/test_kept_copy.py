"""A store's in-memory copy kept up to date from its counters (store/kept.py), on rows held in a
list as a store holds them: what a count off after a read of the newer rows leads to."""

from __future__ import annotations

import numpy as np

from ireneo.store.kept import KeptCopy, array_bytes


class Rows:
    """Row ids as a copy holds them (ascending)."""

    def __init__(self, ids: tuple[int, ...] = ()):
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def last_id(self) -> int:
        return self.ids[-1] if self.ids else 0


class Table:
    """The store's side: its rows, its two counters, and every read of rows it served."""

    def __init__(self) -> None:
        self.rows: set[int] = set()
        self.deletes = 0
        self.reads: list[int] = []  # the ids each grow read, in order

    def counters(self) -> tuple[int, int]:
        return len(self.rows), self.deletes

    def grow(self, copy: Rows) -> Rows:
        newer = sorted(i for i in self.rows if i > copy.last_id)
        self.reads.extend(newer)
        return Rows(copy.ids + tuple(newer))


def test_an_older_id_that_landed_late_has_the_copy_read_whole():
    table, kept = Table(), KeptCopy(Rows)
    table.rows = {1, 2, 4}
    assert kept.current(table.counters, table.grow).ids == (1, 2, 4)
    table.rows.add(3)  # committed after 4: beyond no id the copy holds
    table.reads.clear()
    assert kept.current(table.counters, table.grow).ids == (1, 2, 3, 4)
    assert table.reads == [1, 2, 3, 4]  # read whole, once the count was asked again


def test_rows_stored_after_the_counters_were_read_are_read_once():
    table, kept = Table(), KeptCopy(Rows)
    table.rows = {1, 2}
    kept.current(table.counters, table.grow)
    table.rows |= {3, 4}
    read_before = table.counters()  # as a store answers with counters read a moment before
    table.rows |= {5}
    answers = iter([read_before])
    copy = kept.current(lambda: next(answers, table.counters()), table.grow)
    assert copy.ids == (1, 2, 3, 4, 5) and table.reads == [1, 2, 3, 4, 5]


def test_a_deletion_seen_when_the_count_is_asked_again_reads_the_copy_anew():
    table, kept = Table(), KeptCopy(Rows)
    table.rows = {1, 2, 3}
    kept.current(table.counters, table.grow)
    read_before = (4, 0)  # rows 1-4 when the counters were read; then 5 stored, 2 deleted
    table.rows = {1, 3, 4, 5}
    table.deletes = 1
    answers = iter([read_before])
    copy = kept.current(lambda: next(answers, table.counters()), table.grow)
    assert copy.ids == (1, 3, 4, 5)  # nothing deleted stays


def test_a_copy_as_the_counters_were_read_drops_a_deletion_at_the_next_call():
    table, kept = Table(), KeptCopy(Rows)
    table.rows = {1, 2, 3}
    kept.current(table.counters, table.grow)
    read_before = (4, 0)  # rows 1-4 when the counters were read; then 2 deleted
    table.rows = {1, 3, 4}
    table.deletes = 1
    answers = iter([read_before])
    assert kept.current(lambda: next(answers, table.counters()), table.grow).ids == (1, 2, 3, 4)
    assert kept.current(table.counters, table.grow).ids == (1, 3, 4)


def test_counters_read_with_the_statistics_never_hide_a_write_of_the_store(home, tmp_path):
    """SQLite reads the copies' counters with BM25's statistics (one statement for four): a
    turn this store writes after them is in the next copy read."""
    from ireneo import Memory
    from ireneo.formats import funes_jsonl
    from tests.conftest import turn_line, write_jsonl

    first = write_jsonl(tmp_path / "a" / "a.funes.jsonl", [turn_line("a", 0, "pump one failed")])
    second = write_jsonl(tmp_path / "b.funes.jsonl", [turn_line("b", 0, "pump two failed")])
    with Memory(home) as memory:
        memory.index([first])
        store = memory.store
        assert store.term_stats(["pump"]).document_frequency == {"pump": 1}
        assert len(store.layout()) == 1 and len(store.vectors()) == 1  # from those counters
        store.term_stats(["pump"])
        memory.store_turns(funes_jsonl.read_file(second))  # written after they were read
        assert len(store.layout()) == 2


class Arrays(Rows):
    """A copy holding its ids as an array, and counting how often its parts were walked."""

    walks = 0

    def __init__(self, ids: tuple[int, ...] = ()):
        super().__init__(ids)
        self.array = np.array(ids, dtype=np.int64)

    def __getattribute__(self, name: str):
        if name == "__dict__":
            Arrays.walks += 1
        return super().__getattribute__(name)


def test_a_copys_bytes_are_measured_once_per_copy_and_again_after_it_grows():
    table, kept = Table(), KeptCopy(Arrays)
    grow = lambda copy: Arrays(table.grow(copy).ids)  # noqa: E731
    table.rows = {1, 2, 3}
    kept.current(table.counters, grow)
    assert kept.nbytes() == array_bytes(kept.state()[0]) == 3 * 8
    Arrays.walks = 0
    assert kept.nbytes() == 24 and Arrays.walks == 0  # the server asks after every lease
    table.rows |= {4, 5}
    kept.current(table.counters, grow)
    assert kept.nbytes() == 5 * 8
    table.rows, table.deletes = {1}, 1  # a deletion: the copy is read again whole
    kept.current(table.counters, grow)
    assert kept.nbytes() == 8
