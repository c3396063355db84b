"""kill -9 of one of two replicas sharing a PostgreSQL database, under load (real processes).

Posters (the gateway) and MCP clients (agents) talk to both replicas; one replica is killed
while it holds a user's index lock mid-run. Its clients move to the other replica when theirs
refuses connections; each of them fails once at most (the request it had in flight, or the next
one on the session the kill broke); every post answered 202
is stored; the dead replica's index job is taken over by the survivor (the job row stays, the
advisory lock goes with the dead connection), and every user ends up fully embedded.
The long figure is bench/many_users.py --store postgres --kill-at S (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from pathlib import Path

import httpx2
import psycopg
import pytest
from fastmcp import Client

from ireneo.benchmark.server_process import INGEST_KEY, ServerProcess
from ireneo.server.memories import user_key

pytestmark = pytest.mark.slow

USERS = ["ana", "bo", "cy"]
HEAVY = "heavy"  # the user whose index run the victim holds when it dies


def text(user: str, conversation: int, turn: int) -> str:
    return (
        f"Note {user}-{conversation}-{turn}: the pump P-{conversation:03d} at the "
        f"{user} site leaks under the housing; ticket MT-{1000 + turn} is open."
    )


def body(user: str, conversation: int, turns: int) -> dict:
    return {
        "user": user,
        "conversation_id": f"c{conversation}",
        "turns": [
            {
                "ts": f"2026-10-08T09:{k % 60:02d}:00Z",
                "role": "user" if k % 2 == 0 else "assistant",
                "text": text(user, conversation, k),
            }
            for k in range(turns)
        ],
    }


def index_lock_held(conn: psycopg.Connection, user: str) -> bool:
    """Whether some replica holds the user's index lock (shared_indexer's advisory lock)."""
    key = conn.execute(
        "SELECT hashtextextended('ireneo-index:' || %s, 0)", (user_key(user),)
    ).fetchone()[0]  # type: ignore[index]
    rows = conn.execute(
        "SELECT classid::bigint, objid::bigint FROM pg_locks "
        "WHERE locktype = 'advisory' AND granted AND objsubid = 1"
    ).fetchall()
    return ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF) in {tuple(r) for r in rows}


def index_runs(log: Path) -> list[str]:
    """The index runs a replica logged, for a failure's message."""
    return [line for line in log.read_text().splitlines() if '"index_run"' in line][-20:]


def queued(superuser_url: str) -> tuple[int, int]:
    """(index jobs queued, passages without a vector), over every user."""
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        jobs = conn.execute("SELECT count(*) FROM ireneo.index_jobs").fetchone()
        pending = conn.execute(
            "SELECT count(*) FROM ireneo.passages WHERE embedding IS NULL"
        ).fetchone()
    return int(jobs[0]), int(pending[0])  # type: ignore[index]


def stored(superuser_url: str, user: str, conversation: int) -> int:
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ireneo.turns WHERE user_id = %s AND session_id = %s",
            (user_key(user), f"c{conversation}"),
        ).fetchone()
    return int(row[0]) if row else 0


class Load:
    """Posters and recallers over two replicas; counts what was in flight and what failed."""

    def __init__(self, servers: list[ServerProcess]):
        self.servers = servers
        self.inflight: Counter[int] = Counter()
        self.errors: list[str] = []
        self.moved = 0  # calls refused by the dead replica and made on the other one
        self.acked: dict[tuple[str, int], int] = {}  # (user, conversation) -> turns answered 202
        self.recalls = 0
        self.stop = False
        self.on: dict[str, int] = {}  # each client's replica: where its requests go
        self.failed: Counter[str] = Counter()  # failures per client

    def replica(self, preferred: int, refused: set[int]) -> int:
        return next(i for i in (preferred, 1 - preferred) if i not in refused)

    async def poster(self, n: int) -> None:
        refused: set[int] = set()
        async with httpx2.AsyncClient(timeout=60, headers={"x-ingest-key": INGEST_KEY}) as http:
            conversation, turns = 100 * n, 0
            while not self.stop:
                user = USERS[n % len(USERS)]
                turns += 1
                if turns > 8:
                    conversation, turns = conversation + 1, 1
                while True:  # the gateway resends until it gets a 202
                    i = self.on[f"poster {n}"] = self.replica(n % 2, refused)
                    self.inflight[i] += 1
                    try:
                        response = await http.post(
                            f"{self.servers[i].url}/turns", json=body(user, conversation, turns)
                        )
                    except httpx2.ConnectError:  # nothing sent: go to the other replica
                        refused.add(i)
                        self.moved += 1
                        continue
                    except httpx2.HTTPError as exc:  # sent, and lost with the replica
                        self.errors.append(f"post: {type(exc).__name__}")
                        self.failed[f"poster {n}"] += 1
                        continue
                    finally:
                        self.inflight[i] -= 1
                    assert response.status_code == 202, response.text
                    self.acked[(user, conversation)] = turns
                    break
                await asyncio.sleep(0.05)

    async def recaller(self, n: int) -> None:
        refused: set[int] = set()
        user = USERS[n % len(USERS)]
        token = self.servers[0].token(user)
        clients: dict[int, Client] = {}
        try:
            while not self.stop:
                i = self.on[f"recaller {n}"] = self.replica(n % 2, refused)
                if i not in clients:
                    client = Client(f"{self.servers[i].url}/mcp", auth=token, timeout=30)
                    try:
                        await client.__aenter__()
                    except Exception:  # noqa: BLE001 - refused: the other replica
                        refused.add(i)
                        self.moved += 1
                        continue
                    clients[i] = client
                self.inflight[i] += 1
                try:
                    result = await clients[i].call_tool(
                        "recall_my_conversations", {"query": f"{user} site pump"}
                    )
                    assert not result.is_error
                    self.recalls += 1
                except Exception as exc:  # noqa: BLE001 - the connection died with the replica
                    self.errors.append(f"recall: {type(exc).__name__}")
                    self.failed[f"recaller {n}"] += 1
                    del clients[i]  # the next call connects again (and is refused)
                finally:
                    self.inflight[i] -= 1
                await asyncio.sleep(0.05)
        finally:
            for client in clients.values():
                with contextlib.suppress(Exception):  # a dead replica's session
                    await client.__aexit__(None, None, None)


def test_a_killed_replica_loses_no_acknowledged_post_and_its_indexing_is_taken_over(
    pg_database, tmp_path: Path
):
    env = {"IRENEO_RECALL_TIMEOUT": "60"}
    # the survivor leaves jobs younger than 3 s alone, so the victim is the one indexing HEAVY
    victim = ServerProcess(
        tmp_path / "a",
        pg_database.app_url,
        env_extra={**env, "IRENEO_INDEX_DEBOUNCE": "0.1"},
        log_path=tmp_path / "victim.log",
    )
    survivor = ServerProcess(
        tmp_path / "b",
        pg_database.app_url,
        env_extra={**env, "IRENEO_INDEX_DEBOUNCE": "3"},
        log_path=tmp_path / "survivor.log",
    )
    servers = [survivor, victim]
    load = Load(servers)
    kill: dict = {}
    try:
        for server in servers:
            server.start(timeout=120)

        async def run() -> None:
            tasks = [asyncio.create_task(load.poster(n)) for n in range(4)]
            tasks += [asyncio.create_task(load.recaller(n)) for n in range(4)]
            await asyncio.sleep(1.0)
            assert not load.errors, load.errors
            # a long conversation for HEAVY, on the victim: its index run takes a while
            async with httpx2.AsyncClient(timeout=60) as http:
                response = await http.post(
                    f"{victim.url}/turns",
                    json=body(HEAVY, 0, 300),
                    headers={"x-ingest-key": INGEST_KEY},
                )
            assert response.status_code == 202
            load.acked[(HEAVY, 0)] = 300
            deadline = time.monotonic() + 60
            with psycopg.connect(pg_database.superuser_url, autocommit=True) as conn:
                while not await asyncio.to_thread(index_lock_held, conn, HEAVY):
                    assert time.monotonic() < deadline, (
                        "no replica took the heavy user's index lock",
                        user_key(HEAVY),
                        index_runs(tmp_path / "victim.log"),
                        index_runs(tmp_path / "survivor.log"),
                    )
                    await asyncio.sleep(0.02)
            kill["in_flight"] = load.inflight[1]
            kill["clients"] = sum(replica == 1 for replica in load.on.values())
            kill["errors_before"] = len(load.errors)
            victim.kill()
            await asyncio.sleep(3.0)  # the load goes on against the survivor
            load.stop = True
            await asyncio.gather(*tasks)

        asyncio.run(run())
        # the survivor takes the dead replica's job over: every passage gets its vector
        deadline = time.monotonic() + 180
        while queued(pg_database.superuser_url) != (0, 0):
            assert time.monotonic() < deadline, queued(pg_database.superuser_url)
            time.sleep(0.2)
    finally:
        for server in servers:
            server.stop()

    failed = len(load.errors) - kill["errors_before"]
    assert kill["errors_before"] == 0
    # a client fails once at most: the request it had in flight, or, when it was between two,
    # the next one on the session the kill broke; then it moves to the survivor
    assert failed <= kill["clients"], (load.errors, kill)
    assert max(load.failed.values(), default=0) <= 1, load.failed
    assert load.moved >= 1, "no client moved to the surviving replica"
    assert load.recalls > 0
    for (user, conversation), turns in load.acked.items():
        assert stored(pg_database.superuser_url, user, conversation) >= turns, (user, turns)
    survivor_runs = [
        line
        for line in (tmp_path / "survivor.log").read_text().splitlines()
        if '"index_run"' in line and user_key(HEAVY) in line and '"ok"' in line
    ]
    assert survivor_runs, "the survivor never indexed the dead replica's user"
