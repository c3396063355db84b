"""The server's indexer with real memories: what start-up opens, and turns between users."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest

from ireneo.memory import Memory
from ireneo.model import Block, Turn
from ireneo.server.indexer import Indexer, IndexStopped, IndexYielded, Slice
from ireneo.server.memories import OpenMemories, user_key
from ireneo.store.sqlite import pending_in

START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
WORDS = [
    "boiler",
    "pressure",
    "valve",
    "ticket",
    "invoice",
    "garden",
    "recipe",
    "flight",
    "budget",
    "sensor",
]


def turns(conversation: str, count: int, seed: int = 0) -> list[Turn]:
    rng = random.Random(f"{conversation}/{seed}")
    return [
        Turn(
            conversation,
            f"{conversation}-{seq}",
            seq,
            START + timedelta(minutes=seq),
            "user" if seq % 2 == 0 else "assistant",
            "test",
            (Block("text", f"{' '.join(rng.choices(WORDS, k=8))} number {seq}"),),
        )
        for seq in range(count)
    ]


def stored(home, count: int, *, embed: bool) -> None:
    with Memory(home) as memory:
        memory.store_turns(turns(home.name, count))
        if embed:
            memory.embed_pending()


def test_pending_in_reads_the_count_a_memory_has_without_opening_it(tmp_path):
    home = tmp_path / "m"
    assert pending_in(home) == 0  # no memory file
    with Memory(home) as memory:
        assert pending_in(home) == memory.pending() == 0
        memory.store_turns(turns("c-1", 7))
        assert pending_in(home) == memory.pending() == 7
        memory.embed_pending()
        memory.store_turns(turns("c-2", 3))
        assert pending_in(home) == memory.pending() == 3


def test_catch_up_opens_only_the_memories_with_work(tmp_path):
    users = tmp_path / "users"
    keys = [user_key(f"user-{n}") for n in range(24)]
    with_work = set(keys[::8])  # 3 of 24
    for key in keys:
        stored(users / key, 4, embed=key not in with_work)
    registry = OpenMemories(users, capacity=64)

    async def scenario() -> tuple[int, int]:
        indexer = Indexer(registry, debounce=0.01)
        scheduled = await indexer.catch_up()
        opened_at_catch_up = registry.opened
        await indexer.wait_idle(120)
        await indexer.stop()
        return scheduled, opened_at_catch_up

    try:
        scheduled, opened_at_catch_up = asyncio.run(scenario())
    finally:
        registry.close_all()
    assert scheduled == 3
    assert opened_at_catch_up == 0  # finding the work opened nothing
    assert registry.opened == 3  # each memory with work, for its run
    assert all(pending_in(users / key) == 0 for key in keys)


def test_a_long_backfill_lets_a_user_who_posted_later_go_first(tmp_path):
    users = tmp_path / "users"
    big, small = user_key("big"), user_key("small")
    stored(users / big, 1200, embed=False)  # five batches of 256
    stored(users / small, 4, embed=False)
    registry = OpenMemories(users, capacity=64)

    async def scenario() -> Indexer:
        indexer = Indexer(registry, debounce=0.01, slice_seconds=0.0)
        indexer.schedule(big)
        while (big, "start") not in {(key, event) for key, event, _ in indexer.events}:
            await asyncio.sleep(0.01)
        indexer.schedule(small)  # arrives while the big run goes on
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
    assert pending_in(users / big) == 0 and pending_in(users / small) == 0


def test_a_run_past_its_starting_count_still_takes_turns():
    # a run also embeds what is stored while it goes, so `done` reaches `total` and passes it
    waiting = [False]
    turn = Slice(0.0, lambda: waiting[0], lambda: False)
    turn(600, 600)  # nobody waits: go on
    waiting[0] = True
    with pytest.raises(IndexYielded) as yielded:
        turn(600, 600)
    assert yielded.value.done == 600
    with pytest.raises(IndexStopped):
        Slice(60.0, lambda: True, lambda: True)(1, 10)
