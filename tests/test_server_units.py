"""Server parts without a server: the memory registry, the tool texts, the indexer's rules."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from ireneo.memory import Memory
from ireneo.server import tools
from ireneo.server.indexer import Indexer
from ireneo.server.memories import OpenMemories, user_key
from ireneo.server.returned import MAX_QUEUED_TURNS, ReturnedLog


class FakeMemory:
    def __init__(self, home, *, model=None, rerank=None):
        self.home = home
        self.closed = False

    def close(self):
        self.closed = True


def registry(tmp_path, capacity=2):
    return OpenMemories(tmp_path / "users", capacity=capacity, opener=FakeMemory)


def test_user_keys_are_stable_hashes_not_names():
    assert user_key("alice") == user_key("alice") != user_key("bob")
    assert len(user_key("alice")) == 24 and "alice" not in user_key("alice")


def test_registry_creates_only_when_asked(tmp_path):
    reg = registry(tmp_path)
    key = user_key("alice")
    with reg.lease(key, create=False) as memory:
        assert memory is None
    assert not reg.path(key).exists()
    with reg.lease(key, create=True) as memory:
        assert memory is not None
    assert reg.path(key).is_dir()
    with pytest.raises(ValueError):
        reg.path("../../etc")


def test_registry_keeps_a_bounded_number_open_and_closes_the_oldest(tmp_path):
    reg = registry(tmp_path, capacity=2)
    keys = [user_key(name) for name in ("a", "b", "c")]
    opened = []
    for key in keys:
        with reg.lease(key, create=True) as memory:
            opened.append(memory)
    assert reg.open_count() == 2
    assert opened[0].closed and not opened[1].closed and not opened[2].closed
    with reg.lease(keys[0], create=False) as again:
        assert again is not opened[0] and not again.closed
    assert reg.opened == 4 and reg.closed == 2


def test_an_evicted_memory_in_use_is_closed_after_its_last_lease_and_never_opened_twice(tmp_path):
    reg = registry(tmp_path, capacity=1)
    a, b = user_key("a"), user_key("b")
    with reg.lease(a, create=True) as first:
        with reg.lease(b, create=True):
            pass  # evicts a while it is in use
        assert not first.closed
        with reg.lease(a, create=False) as same:
            assert same is first  # revived, not opened again
    assert not first.closed  # a is the open one again
    with reg.lease(b, create=False):
        pass
    assert first.closed


def test_close_all_waits_for_leases(tmp_path):
    reg = registry(tmp_path)
    with reg.lease(user_key("a"), create=True) as busy:
        with reg.lease(user_key("b"), create=True) as idle:
            pass
        reg.close_all()
        assert idle.closed and not busy.closed
    assert busy.closed


def test_the_fail_soft_sentences_are_the_seeds():
    assert tools.NO_MEMORY == "No earlier conversations are stored for this user yet."
    assert tools.NOTHING_RELEVANT == "Nothing relevant found in earlier conversations."
    assert tools.UNAVAILABLE == "Conversation memory is unavailable right now; continue without it."


def test_the_recall_description_is_the_seeds():
    seed = (
        "Search the current user's own earlier conversations with this assistant.\n"
        'Use it when the user refers to something discussed before ("last time", "earlier",\n'
        '"what did we decide", "the numbers we used"). Use short queries built around identifiers\n'
        'and key nouns ("K-2 machine ticket"); search again with other words if needed.\n'
        "Returns dated passages from past chats. Quote them; do not invent details."
    )
    assert tools.RECALL_DESCRIPTION.startswith(seed)


def test_indexer_runs_once_per_burst_and_once_more_for_writes_during_a_run(tmp_path):
    async def scenario():
        indexer = Indexer(registry(tmp_path), debounce=0.05)
        started, release = threading.Event(), threading.Event()
        calls = []

        def embed(key):
            calls.append(key)
            started.set()
            release.wait(5)
            return 0

        indexer.embed = embed
        for _ in range(5):  # a burst
            indexer.schedule("k")
        await asyncio.to_thread(started.wait, 5)
        for _ in range(3):  # during the run
            indexer.schedule("k")
        release.set()
        await indexer.wait_idle(10)
        return indexer, calls

    indexer, calls = asyncio.run(scenario())
    assert calls == ["k", "k"]
    assert indexer.overlaps == 0


def test_indexer_keeps_going_after_a_failed_run(tmp_path):
    async def scenario():
        indexer = Indexer(registry(tmp_path), debounce=0.01)
        outcomes = iter([RuntimeError("disk full"), 3])

        def embed(key):
            outcome = next(outcomes)
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        indexer.embed = embed
        indexer.schedule("k")
        await indexer.wait_idle(10)
        indexer.schedule("k")
        await indexer.wait_idle(10)
        return indexer

    indexer = asyncio.run(scenario())
    assert indexer.runs["k"] == 2 and indexer.failures["k"] == 1


def test_indexer_runs_one_user_at_a_time_over_all_users_by_default(tmp_path):
    async def scenario():
        indexer = Indexer(registry(tmp_path), debounce=0.01)
        active, peak = [0], [0]
        lock = threading.Lock()

        def embed(key):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.05)
            with lock:
                active[0] -= 1
            return 0

        indexer.embed = embed
        for key in ("a", "b", "c"):
            indexer.schedule(key)
        await indexer.wait_idle(10)
        return indexer, peak[0]

    indexer, peak = asyncio.run(scenario())
    assert peak == 1 and sum(indexer.runs.values()) == 3


def test_a_record_past_the_queue_bound_is_dropped_with_a_warning(tmp_path, caplog):
    memory = Memory(tmp_path / "memory")
    queue = ReturnedLog()
    try:
        with caplog.at_level(logging.WARNING, logger="ireneo.server.returned"):
            queue.note(memory, [("c-1", seq) for seq in range(MAX_QUEUED_TURNS + 1)])
            queue.note(memory, [("c-1", 1)])
            assert queue.wait_idle(10)
        # ireneo's records only: a task another test left behind may be collected meanwhile,
        # and asyncio logs its unretrieved exception here too
        ours = [record.msg for record in caplog.records if record.name.startswith("ireneo")]
        assert ours == ["returned_not_recorded"]
    finally:
        memory.close()


@pytest.mark.parametrize("created", [[1.0, 1.5, 2.25, 0.999], [1.8e9 + 0.0015, 1.8e9 + 61.9]])
def test_log_lines_stamp_each_records_own_time(created):
    import json

    from ireneo.server.logs import JsonFormatter

    formatter = JsonFormatter()
    for at in created:  # the seconds' text is kept between records: each still gets its own
        record = logging.LogRecord("ireneo.server", logging.INFO, __file__, 1, "x", (), None)
        record.created, record.msecs = at, (at - int(at)) * 1000
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at))
        assert json.loads(formatter.format(record))["ts"] == f"{stamp}.{int(record.msecs):03d}Z"
