"""Servers on one PostgreSQL database: replicas that share every memory, one index run per user
at a time across them, and a crashed replica's work picked up by another."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx2
import psycopg
import pytest
from fastmcp import Client

from ireneo.server.auth import mint_token
from ireneo.server.memories import user_key
from tests.conftest_server import (
    INGEST_KEY,
    POSTGRES_SERVER_ENV,
    RunningServer,
    conversation,
    json_events,
    make_settings,
    pending,
    start_server,
    stop_server,
    subprocess_env,
    wait_for,
    wait_ready,
)

pytestmark = pytest.mark.slow


def test_a_server_on_postgres_ingests_indexes_and_recalls_per_user(pg_database, tmp_path):
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    server = RunningServer(make_settings(tmp_path / "home", database_url=pg_database.app_url))
    try:
        text = "The kiln KL-7 overheated; the thermocouple was replaced."
        assert server.post(conversation("kiln-1", [text], user=alice)).status_code == 202
        assert server.post(conversation("kiln-2", [text], user=bob)).status_code == 202
        server.wait_indexed()
        assert pending(pg_database.app_url, alice) == 0
        assert "KL-7" in server.recall(alice, "kiln KL-7 thermocouple")
        assert "kiln-2" not in server.recall(alice, "kiln KL-7 thermocouple")
        assert not (tmp_path / "home" / "users").exists()  # nothing on disk
        assert server.state.indexer.overlaps == 0
    finally:
        server.close()


def test_a_held_user_is_not_indexed_until_its_holder_goes_away(pg_database, tmp_path):
    """Another replica indexing the user holds its advisory lock; when that replica dies (its
    connection closes), this one picks the job up."""
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    key = user_key(alice)
    holder = psycopg.connect(pg_database.app_url, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(hashtextextended('ireneo-index:' || %s, 0))", (key,))
    server = RunningServer(make_settings(tmp_path / "home", database_url=pg_database.app_url))
    try:
        body = conversation("held-1", ["The press PR-2 leaks hydraulic oil."], user=alice)
        assert server.post(body).status_code == 202
        wait_for(lambda: server.state.indexer.skipped >= 3, 60, "the server to find it held")
        assert pending(pg_database.app_url, alice) > 0
        assert server.state.indexer.runs[key] == 0
        holder.close()  # the replica holding it crashed
        # the run is counted once it returns, just after its vectors are committed
        wait_for(lambda: server.state.indexer.runs[key] >= 1, 60, "the job picked up")
        assert pending(pg_database.app_url, alice) == 0
    finally:
        if not holder.closed:
            holder.close()
        server.close()


def test_two_server_processes_share_one_database(pg_database, tmp_path):
    """Ingest on one replica, recall on the other; index runs of one user never overlap."""
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    env = subprocess_env(
        IRENEO_HOME=str(tmp_path / "unused-home"),
        IRENEO_DATABASE_URL=pg_database.app_url,
        **POSTGRES_SERVER_ENV,
    )
    (one, one_url), (two, two_url) = start_server(env), start_server(env)
    events: list[dict] = []
    try:
        wait_ready(one, one_url)
        wait_ready(two, two_url)
        # bursts on both replicas, so both find the same user's job due
        for i in range(12):
            url = one_url if i % 2 == 0 else two_url
            texts = [f"Batch {i}: the conveyor CV-{400 + i} jammed at station {i}."] * 6
            response = httpx2.post(
                f"{url}/turns",
                json=conversation(f"line-{i}", texts, user=alice),
                headers={"x-ingest-key": INGEST_KEY},
                timeout=30,
            )
            assert response.status_code == 202
            time.sleep(0.15)
        wait_for(lambda: pending(pg_database.app_url, alice) == 0, 120, "everything embedded")
        token = mint_token(make_settings(tmp_path), alice)

        async def recall(url: str) -> str:
            async with Client(f"{url}/mcp", auth=token, timeout=30) as client:
                result = await client.call_tool("recall_my_conversations", {"query": "CV-407"})
                return result.content[0].text

        answers = [asyncio.run(recall(two_url)), asyncio.run(recall(one_url))]
    finally:
        events = json_events(stop_server(one)) + json_events(stop_server(two))
    recalls = [e for e in events if e.get("event") == "recall"]
    assert all("CV-407" in answer for answer in answers), (answers, recalls)
    runs = sorted(
        (e["started"], e["ended"])
        for e in events
        if e.get("event") == "index_run" and e.get("user_key") == user_key(alice)
    )
    assert runs, "no index run was logged"
    for (_, ended), (started, _) in zip(runs, runs[1:], strict=False):
        assert ended <= started, f"two index runs of one user overlapped: {runs}"
    starts = {e.get("store") for e in events if e.get("event") == "server_start"}
    assert starts == {"postgresql"}
