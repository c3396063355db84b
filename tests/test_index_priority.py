"""The indexer's embedding and the posts' storing run at a lower CPU priority than recall, and
still complete.

Real Indexer, real memories, the packaged default model: the threads that did the inference
are found by their CPU time in /proc/self/task/<tid>/stat, and their nice read from there.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from ireneo.config import Settings, SettingsError
from ireneo.memory import Memory
from ireneo.server.indexer import Indexer
from ireneo.server.ingest import IngestRoute
from ireneo.server.memories import OpenMemories, user_key
from ireneo.store.sqlite import pending_in
from ireneo.workers import lower_priority, pool
from tests.conftest_server import conversation
from tests.test_indexer import turns

linux = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def threads_now() -> dict[int, tuple[str, int, int]]:
    """Each Python thread of this process: (name, nice, CPU ticks), by thread id."""
    out = {}
    for thread in threading.enumerate():
        try:
            stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        # fields[0] is the state (field 3): utime 14, stime 15, nice 19 are fields[11, 12, 16]
        out[thread.native_id] = (thread.name, int(fields[16]), int(fields[11]) + int(fields[12]))
    return out


@linux
def test_index_runs_embed_on_lowered_threads_and_complete(tmp_path):
    users = tmp_path / "users"
    keys = [user_key(f"user-{n}") for n in range(2)]
    for key in keys:
        with Memory(users / key) as memory:
            memory.store_turns(turns(key, 400))
    registry = OpenMemories(users, capacity=8)
    with Memory(tmp_path / "warm") as memory:  # the model loads outside the measured run
        memory.embedder.embed_passages(["warm", "up"])
    before = threads_now()
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())  # under `nice`: not 0
    low = min(19, base + 5)

    async def scenario() -> Indexer:
        indexer = Indexer(registry, debounce=0.01, nice=5)
        for key in keys:
            indexer.schedule(key)
        await indexer.wait_idle(300)
        await indexer.stop()
        return indexer

    try:
        indexer = asyncio.run(scenario())
    finally:
        registry.close_all()
    after = threads_now()

    assert indexer.failures == {} and sum(indexer.runs.values()) >= 2
    assert all(pending_in(users / key) == 0 for key in keys)  # indexing completed
    gained = {
        tid: (name, nice, ticks - before.get(tid, (name, nice, 0))[2])
        for tid, (name, nice, ticks) in after.items()
    }
    lowered = [g for g in gained.values() if g[1] == low]
    names = {g[0] for g in lowered}
    assert any(n.startswith("ireneo-index") for n in names), gained
    assert any(n.startswith("ireneo-background") for n in names), gained
    # 800 turns of inference: the lowered threads did it, the embedder's own threads none
    assert sum(g[2] for g in lowered) >= 10, gained
    assert sum(g[2] for g in gained.values() if g[0].startswith("ireneo-embed")) == 0, gained
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base  # as it was


@linux
def test_a_pool_without_nice_keeps_the_priority_it_had():
    done = pool("test-plain", 1).submit(
        lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    )
    assert done.result(30) == os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    lowered = pool("test-lowered", 1, nice=3).submit(
        lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    )
    assert lowered.result(30) == min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + 3)


@linux
def test_posts_are_stored_on_lowered_threads(tmp_path):
    """`POST /turns`'s store runs `nice` steps below the server, and stores: a recall keeps the
    cores first while the gateway posts (docs/reliability.md)."""
    registry = OpenMemories(tmp_path / "users", capacity=8)
    seen: list[int] = []

    class Seen(IngestRoute):
        def _store(self, key, turns):
            seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
            return super()._store(key, turns)

    body = json.dumps(conversation("lowered", ["A post stored below recall."], user="erin"))

    async def scenario():
        indexer = Indexer(registry, debounce=60)  # nothing indexed meanwhile
        route = Seen(
            registry=registry, indexer=indexer, ingest_key=None, max_body_bytes=1 << 20, nice=4
        )
        try:
            return await route._admitted(body.encode())
        finally:
            await indexer.stop()

    try:
        response, fields = asyncio.run(scenario())
    finally:
        registry.close_all()
    assert response.status_code == 202 and fields["added"] == 1, fields
    assert seen == [min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + 4)]
    with Memory(tmp_path / "users" / user_key("erin")) as memory:
        assert [t.text for t in memory.get("lowered")] == ["A post stored below recall."]


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no nice here")
def test_lower_priority_changes_nothing_for_nothing_asked():
    before = os.getpriority(os.PRIO_PROCESS, 0)
    assert lower_priority(0) is False
    assert os.getpriority(os.PRIO_PROCESS, 0) == before


@pytest.mark.parametrize("name", ["index_nice", "ingest_nice"])
def test_the_settings_have_a_default_and_refuse_what_is_not_a_nice(name):
    variable = f"IRENEO_{name.upper()}"
    assert getattr(Settings(), name) == 10
    assert getattr(Settings.from_env({variable: "0"}), name) == 0
    assert getattr(Settings.from_env({variable: "19"}), name) == 19
    for wrong in ("20", "-1", "low", "10.5"):
        with pytest.raises(SettingsError, match=variable):
            Settings.from_env({variable: wrong})
