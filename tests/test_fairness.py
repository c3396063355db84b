"""Fair recall slots: one user cannot take more than their share of recall capacity.

Over a real server: one user floods slow calls (read_conversation of a conversation of 5,000
turns, posted through /turns: a real slow input) while another user's recall is answered before
the flood drains, and the flooding user never holds more than half the slots. On the slots
themselves, with real worker threads blocked on an event: calls past their deadline keep their
user's share but give the total back, so other users run meanwhile; a user with too many calls
waiting is refused with Busy; slots go to waiting users in turn.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from fastmcp import Client

from ireneo.server.memories import user_key
from ireneo.server.slots import BUSY, Busy, FairSlots
from ireneo.server.tools import UNAVAILABLE
from tests.conftest_server import RunningServer, conversation, make_settings, wait_for

LONG_TURNS = 5000


def long_conversation(user: str, cid: str, turns: int) -> dict:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    return {
        "user": user,
        "conversation_id": cid,
        "turns": [
            {
                "ts": (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "role": "user" if i % 2 == 0 else "assistant",
                "text": f"Line {i}: pump P-{i % 97} pressure log, reading {i * 7 % 1000}.",
            }
            for i in range(turns)
        ],
    }


# -- over a real server -------------------------------------------------------------------------


def test_one_users_flood_of_slow_calls_leaves_another_users_recall_answering(tmp_path):
    srv = RunningServer(make_settings(tmp_path, recall_concurrency=4, recall_timeout=60))
    try:
        assert srv.post(long_conversation("hog", "c-long", LONG_TURNS)).status_code == 202
        victim_turn = "Chiller CH-77 was serviced by Ana on Monday."
        assert srv.post(conversation("c-v", [victim_turn], user="vic")).status_code == 202
        with srv.state.registry.lease(user_key("hog"), create=False) as memory:
            ref = memory.conversation_ref("c-long")
        slots = srv.state.calls.slots
        hog_key = user_key("hog")
        floods = 12
        most_held = [0]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                most_held[0] = max(most_held[0], slots.held(hog_key))
                time.sleep(0.005)

        async def hog_call(client: Client) -> tuple[float, str]:
            result = await client.call_tool("read_conversation", {"ref": ref})
            return time.monotonic(), result.content[0].text

        async def run() -> tuple[list[tuple[float, str]], float, str]:
            async with (
                Client(f"{srv.url}/mcp", auth=srv.token("hog"), timeout=120) as hog,
                Client(f"{srv.url}/mcp", auth=srv.token("vic"), timeout=120) as vic,
            ):
                await vic.list_tools()
                flood = [asyncio.create_task(hog_call(hog)) for _ in range(floods)]
                # the flood is in: two of hog's calls run, the rest wait in hog's queue
                while slots.held(hog_key) < 2 or len(slots._queues.get(hog_key, ())) < 6:
                    await asyncio.sleep(0.01)
                result = await vic.call_tool("recall_my_conversations", {"query": "CH-77"})
                answered = time.monotonic()
                return await asyncio.gather(*flood), answered, result.content[0].text

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            flood, answered, victim_text = asyncio.run(run())
        finally:
            sampling.set()
            sampler.join()

        assert "CH-77" in victim_text  # answered, not the fail-soft sentence
        done_before = sum(at < answered for at, _ in flood)
        # the victim did not wait behind the flood: a first-come queue would have run 10 of
        # hog's calls before it
        assert done_before <= 2, done_before
        assert most_held[0] == 2  # half of the four slots, never more
        assert all("Line 0:" in text for _, text in flood)  # hog's calls are served too
    finally:
        srv.close()


def test_a_user_with_too_many_calls_waiting_is_told_so(tmp_path):
    srv = RunningServer(make_settings(tmp_path, recall_concurrency=2, recall_timeout=60))
    try:
        assert srv.post(long_conversation("hog", "c-long", LONG_TURNS)).status_code == 202
        with srv.state.registry.lease(user_key("hog"), create=False) as memory:
            ref = memory.conversation_ref("c-long")
        slots = srv.state.calls.slots
        excess = 20
        calls = slots.per_user + slots.waiting + excess  # 1 running, 8 waiting, the rest refused

        async def run() -> list[str]:
            async with Client(f"{srv.url}/mcp", auth=srv.token("hog"), timeout=300) as hog:
                results = await asyncio.gather(
                    *(hog.call_tool("read_conversation", {"ref": ref}) for _ in range(calls))
                )
            return [r.content[0].text for r in results]

        texts = asyncio.run(run())
        # How many arrive while the first still runs depends on the machine's speed: at most
        # the excess is refused, with the sentence, and every other call is answered.
        refused = texts.count(BUSY)
        assert 1 <= refused <= excess
        assert sum("Line 0:" in t for t in texts) == calls - refused
        assert slots.busy == refused
        wait_for(lambda: slots.active == 0)
    finally:
        srv.close()


# -- the slots, with real threads ---------------------------------------------------------------


def blocked(gate: threading.Event, result: str = "done") -> str:
    gate.wait(30)
    return result


def test_calls_past_their_deadline_keep_their_users_share_and_give_the_total_back():
    async def run() -> None:
        slots = FairSlots(4)
        gate = threading.Event()
        try:
            hog = [slots.run("hog", lambda: blocked(gate), 0.2) for _ in range(2)]
            for outcome in await asyncio.gather(*hog, return_exceptions=True):
                assert isinstance(outcome, TimeoutError)
            assert slots.overdue == 2 and slots.running == 0  # threads still blocked
            assert slots.held("hog") == 2
            # hog cannot start more while its overdue calls run ...
            with pytest.raises(TimeoutError):
                await slots.run("hog", lambda: "more", 0.2)
            # ... but four calls of other users run at once meanwhile
            others = [slots.run(f"user-{n}", lambda: "ok", 5) for n in range(4)]
            assert await asyncio.gather(*others) == ["ok"] * 4
        finally:
            gate.set()
        while slots.active:
            await asyncio.sleep(0.01)
        assert slots.held("hog") == 0 and slots.overdue == 0
        assert await slots.run("hog", lambda: "again", 5) == "again"

    asyncio.run(run())


def test_overdue_calls_give_back_at_most_the_total():
    async def run() -> None:
        slots = FairSlots(2, per_user=2)
        gate = threading.Event()
        try:
            for user in ("a", "b"):  # a's two calls go overdue, then b's two
                calls = [slots.run(user, lambda: blocked(gate), 0.2) for _ in range(2)]
                await asyncio.gather(*calls, return_exceptions=True)
            assert slots.overdue == 2 and slots.running == 2  # the budget of two is spent
            with pytest.raises(TimeoutError):  # so c waits, and times out
                await slots.run("c", lambda: "c", 0.2)
        finally:
            gate.set()
        while slots.active:
            await asyncio.sleep(0.01)
        assert await slots.run("c", lambda: "c", 5) == "c"

    asyncio.run(run())


def test_a_full_queue_refuses_with_busy_and_slots_go_round_in_turn():
    """b's second call, queued after three of a's, starts as soon as b's first ends: a slot goes
    to the next user in turn, not to the longest queue. Each call ends when the test says, so
    the order is the slots' own, never the threads' (one gate for all raced them)."""

    async def run() -> None:
        slots = FairSlots(2, per_user=1, waiting=3)
        gates = {name: threading.Event() for name in ("a0", "a1", "a2", "a3", "b0", "b1")}
        started: list[str] = []

        def work(name: str) -> str:
            started.append(name)
            gates[name].wait(30)
            return name

        async def until_started(name: str) -> None:
            for _ in range(1000):
                if name in started:
                    return
                await asyncio.sleep(0.01)
            raise AssertionError(f"{name} never started: {started}")

        try:
            a = [
                asyncio.create_task(slots.run("a", lambda n=n: work(f"a{n}"), 30)) for n in range(4)
            ]
            await until_started("a0")
            with pytest.raises(Busy):
                await slots.run("a", lambda: "a-extra", 30)
            b = [
                asyncio.create_task(slots.run("b", lambda n=n: work(f"b{n}"), 30)) for n in range(2)
            ]
            await until_started("b0")
            assert slots.running == 2 and slots.held("a") == 1 and slots.held("b") == 1
            gates["b0"].set()
            await until_started("b1")
            assert started == ["a0", "b0", "b1"]  # a's three waiting calls did not go first
            gates["a0"].set()
            await until_started("a1")
            assert started == ["a0", "b0", "b1", "a1"]
        finally:
            for gate in gates.values():
                gate.set()
        assert sorted(await asyncio.gather(*a, *b)) == ["a0", "a1", "a2", "a3", "b0", "b1"]
        assert started == ["a0", "b0", "b1", "a1", "a2", "a3"]
        assert slots.busy == 1 and slots.active == 0

    asyncio.run(run())


def test_an_unavailable_answer_is_still_the_sentence_past_the_deadline(tmp_path):
    """A recall that times out waiting behind its own user's calls answers the fail-soft sentence."""
    # a deadline shorter than any read: three of the four calls wait behind the first, on a
    # quiet machine as on a busy one (0.5 s passed only while reads were slow)
    srv = RunningServer(make_settings(tmp_path, recall_concurrency=2, recall_timeout=0.001))
    try:
        assert srv.post(long_conversation("hog", "c-long", LONG_TURNS)).status_code == 202
        with srv.state.registry.lease(user_key("hog"), create=False) as memory:
            ref = memory.conversation_ref("c-long")

        async def run() -> list[str]:
            async with Client(f"{srv.url}/mcp", auth=srv.token("hog"), timeout=120) as hog:
                results = await asyncio.gather(
                    *(hog.call_tool("read_conversation", {"ref": ref}) for _ in range(4))
                )
            return [r.content[0].text for r in results]

        texts = asyncio.run(run())
        assert UNAVAILABLE in texts
        wait_for(lambda: srv.state.calls.active == 0, timeout=120)
    finally:
        srv.close()
