"""The memory registry's bounds and opens: a budget in bytes beside the count, and cold opens
that never hold up other users' leases."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ireneo import Memory
from ireneo.server.memories import OpenMemories, user_key
from ireneo.server.trim import Trim
from ireneo.store.sqlite import OPEN_BYTES, PAGE_CACHE_BYTES


def test_the_byte_budget_closes_the_least_recently_used_memories(tmp_path):
    probe = Memory(tmp_path / "probe")
    one = probe.store.resident_bytes()
    probe.close()
    assert one > 0
    reg = OpenMemories(tmp_path / "users", capacity=100, budget_bytes=int(2.5 * one))
    keys = [user_key(name) for name in ("a", "b", "c", "d")]
    opened = []
    for key in keys:
        with reg.lease(key, create=True) as memory:
            opened.append(memory)
    assert reg.open_count() == 2
    assert reg.held_bytes() <= 2.5 * one
    assert [_closed(m) for m in opened] == [True, True, False, False]
    with reg.lease(keys[0], create=False) as again:
        assert again is not opened[0]  # it was closed, and is opened again
    reg.close_all()
    assert reg.held_bytes() == 0


def test_a_large_memory_counts_for_more_than_a_small_one(tmp_path):
    small, large = Memory(tmp_path / "small"), Memory(tmp_path / "large")
    try:
        large.store_turns(_turns(300))
        large.embed_pending()
        large.recall("pump P-7 seal leak", k=3)  # reads search's copies into RAM
        small.recall("pump", k=3)
        assert large.store.resident_bytes() > small.store.resident_bytes()
    finally:
        small.close()
        large.close()


def test_a_slow_open_does_not_hold_up_other_users_and_one_key_opens_once(tmp_path):
    gate, opening = threading.Event(), threading.Event()
    slow = user_key("slow")

    def opener(path, **options):
        if path.name == slow:
            opening.set()
            assert gate.wait(30)
        return Memory(path, **options)

    reg = OpenMemories(tmp_path / "users", capacity=10, opener=opener)
    fast = user_key("fast")
    with reg.lease(fast, create=True):
        pass
    with ThreadPoolExecutor(2) as pool:

        def lease_slow():
            with reg.lease(slow, create=True) as memory:
                return memory

        first, second = pool.submit(lease_slow), pool.submit(lease_slow)
        assert opening.wait(30)
        with reg.lease(fast, create=False) as memory:  # while `slow` is being opened
            assert memory is not None
        assert not first.done() and not second.done()
        gate.set()
        assert first.result(30) is second.result(30)  # opened once, leased twice
    assert reg.opened == 2
    reg.close_all()


def _turns(count: int):
    from datetime import UTC, datetime, timedelta

    from ireneo.model import Block, Turn

    start = datetime(2026, 10, 8, tzinfo=UTC)
    return [
        Turn(
            session_id=f"c{i // 6}",
            turn_uuid=f"t{i}",
            seq=i % 6,
            ts=start + timedelta(minutes=i),
            role="user" if i % 2 == 0 else "assistant",
            harness="test",
            blocks=(Block("text", f"The pump P-{i} at site {i % 7} has a seal leak, ticket {i}."),),
        )
        for i in range(count)
    ]


def _closed(memory: Memory) -> bool:
    try:
        memory.store.get_meta("model")
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return True
    return False


def test_a_new_memory_counts_the_pages_its_write_ahead_log_holds(tmp_path):
    """A new memory writes into its write-ahead log until it is closed: its file stays a page
    or two, and the budget must not take it for an empty memory (it held 1,600 open memories
    within a 256 MB budget that way, about twice the RAM it meant)."""
    memory = Memory(tmp_path / "new")
    try:
        memory.store_turns(_turns(120))
        wal = (tmp_path / "new" / "memory.db-wal").stat().st_size
        assert (tmp_path / "new" / "memory.db").stat().st_size < wal / 10
        assert wal > PAGE_CACHE_BYTES  # the cache is full of them
        assert memory.store.resident_bytes() >= OPEN_BYTES + PAGE_CACHE_BYTES
    finally:
        memory.close()


def test_a_memory_whose_file_fills_the_cache_is_not_measured_again(tmp_path, monkeypatch):
    """The registry asks after every lease; a file never shrinks, so once it holds the page
    cache's limit no stat is made again (each gave the interpreter's lock away under load)."""
    with Memory(tmp_path / "m") as memory:
        memory.store_turns(_turns(600))
    memory = Memory(tmp_path / "m")  # closing checkpointed the log into the file
    try:
        assert (tmp_path / "m" / "memory.db").stat().st_size >= PAGE_CACHE_BYTES
        counted = memory.store.resident_bytes()
        assert counted >= OPEN_BYTES + PAGE_CACHE_BYTES

        def no_stat(self, **kwargs):
            raise AssertionError(f"stat of {self}")

        monkeypatch.setattr(Path, "stat", no_stat)
        assert memory.store.resident_bytes() == counted
    finally:
        monkeypatch.undo()
        memory.close()


def test_the_registry_trims_the_heap_after_closing_memories(tmp_path):
    trim = Trim(interval=0.0)
    if not trim.available:
        pytest.skip("malloc_trim is glibc's")
    reg = OpenMemories(tmp_path / "users", capacity=2, trim=trim)
    for name in ("a", "b"):
        with reg.lease(user_key(name), create=True):
            pass
    assert trim.trims == 0  # nothing closed yet
    with reg.lease(user_key("c"), create=True):
        pass
    assert reg.closed == 1 and trim.trims == 1
    reg.close_all()
