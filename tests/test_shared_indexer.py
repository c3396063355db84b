"""The replicas' indexer on a real PostgreSQL: a long backfill takes turns with other users."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time

import pytest

from ireneo.memory import Memory
from ireneo.server.memories import OpenMemories, user_key
from ireneo.server.shared_indexer import SharedIndexer
from ireneo.store.postgres import open_pool
from tests import pg_cluster
from tests.test_indexer import turns


@pytest.fixture
def pool(pg_database):
    """A database of its own, so no other test's queued index jobs are in it."""
    database = pg_cluster.prepare(pg_database.superuser_url)
    pool = open_pool(database.app_url, max_size=6)
    yield pool
    pool.close()


def store(pool, key: str, count: int) -> None:
    with Memory(database=pool, user=key) as memory:
        memory.store_turns(turns(key, count))


def pending(pool, key: str) -> int:
    with Memory(database=pool, user=key) as memory:
        return memory.pending()


def test_a_long_backfill_lets_a_user_queued_later_go_first(pool, tmp_path):
    big, small = user_key("big"), user_key("small")
    store(pool, big, 1200)  # five batches of 256
    time.sleep(0.2)
    store(pool, small, 4)  # queued after the big user's job
    registry = OpenMemories(tmp_path, database=pool)

    async def scenario() -> SharedIndexer:
        indexer = SharedIndexer(registry, pool, debounce=0.05, slice_seconds=0.0)
        await indexer.catch_up()
        await indexer.wait_idle(300)
        await indexer.stop()
        return indexer

    try:
        indexer = asyncio.run(scenario())
    finally:
        registry.close_all()
    ends = {
        key: max(at for k, event, at in indexer.events if k == key and event == "end")
        for key in (big, small)
    }
    assert ends[small] < ends[big]  # the small user did not wait for the whole backfill
    assert indexer.yielded >= 1 and indexer.runs[big] >= 2 and indexer.overlaps == 0
    assert pending(pool, big) == 0 and pending(pool, small) == 0


def test_a_replica_starts_the_next_due_job_when_a_run_ends_not_at_the_next_poll(pool, tmp_path):
    keys = [user_key(f"user-{n}") for n in range(3)]
    for key in keys:
        store(pool, key, 4)
    registry = OpenMemories(tmp_path, database=pool)

    async def scenario() -> tuple[SharedIndexer, int]:
        # one run at a time and a poll far longer than the test waits: only the end of a run
        # can start the next one in time
        indexer = SharedIndexer(registry, pool, debounce=0.0, poll=600.0)
        indexer.schedule("")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (queued := await asyncio.to_thread(indexer._queued)):
            await asyncio.sleep(0.1)
        await indexer.stop()
        return indexer, queued

    try:
        indexer, queued = asyncio.run(scenario())
    finally:
        registry.close_all()
    assert queued == 0 and sum(indexer.runs.values()) == 3
    assert all(pending(pool, key) == 0 for key in keys)


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")
def test_a_replica_indexes_on_threads_below_the_server(pool, tmp_path):
    """As the embedded store's indexer: runs go to threads `nice` steps below the server, so
    recall keeps the CPU first (tests/test_index_priority.py has the embedded store's case)."""
    key = user_key("lowered")
    store(pool, key, 40)
    registry = OpenMemories(tmp_path, database=pool)
    seen: list[int] = []
    real = SharedIndexer._run_locked

    def run_locked(self, key, held):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return real(self, key, held)

    async def scenario() -> SharedIndexer:
        indexer = SharedIndexer(registry, pool, debounce=0.0, nice=4)
        indexer._run_locked = run_locked.__get__(indexer)
        indexer.schedule(key)
        await indexer.wait_idle(300)
        await indexer.stop()
        return indexer

    try:
        indexer = asyncio.run(scenario())
    finally:
        registry.close_all()
    assert indexer.failures == {} and pending(pool, key) == 0
    assert seen and set(seen) == {min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + 4)}


def test_a_replica_indexes_the_next_due_user_while_another_replica_holds_the_oldest(pool, tmp_path):
    """The oldest due job is another replica's run: this one, idle, takes the next due user
    instead of asking again for the one it cannot have."""
    held, free = user_key("held"), user_key("free")
    store(pool, held, 4)
    time.sleep(0.2)
    store(pool, free, 4)  # queued after the held user's job
    registry = OpenMemories(tmp_path, database=pool)
    other_replica = pool.getconn()  # a session of its own holds the held user's lock
    try:
        other_replica.execute(
            "SELECT pg_advisory_lock(hashtextextended('ireneo-index:' || %s, 0))", (held,)
        )

        async def scenario() -> SharedIndexer:
            indexer = SharedIndexer(registry, pool, debounce=0.0, poll=0.05)
            indexer.schedule("")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not indexer.runs[free]:
                await asyncio.sleep(0.05)
            await indexer.stop()
            return indexer

        indexer = asyncio.run(scenario())
    finally:
        registry.close_all()
        other_replica.execute("SELECT pg_advisory_unlock_all()")
        pool.putconn(other_replica)
    assert indexer.runs[free] == 1 and indexer.runs[held] == 0 and indexer.skipped >= 1
    assert pending(pool, free) == 0 and pending(pool, held) > 0
