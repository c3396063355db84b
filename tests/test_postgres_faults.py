"""PostgreSQL failing under a server: a full disk, and the server itself restarted mid-run.

A real full disk is not provoked here (PostgreSQL would need a tiny filesystem for its data
directory); instead a trigger in a database of its own makes the server raise the very error a
full disk raises (SQLSTATE 53100, disk_full) on every turn written, so the error travels the
real path: PostgreSQL -> psycopg -> the store -> the ingest route."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import httpx2
import psycopg
import pytest

from ireneo.errors import StorageFull
from ireneo.server.auth import mint_token
from ireneo.server.tools import UNAVAILABLE
from ireneo.store.postgres import POOL_TIMEOUT, storage_errors
from tests import pg_cluster
from tests.conftest_server import (
    INGEST_KEY,
    POSTGRES_SERVER_ENV,
    RunningServer,
    call_tool,
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

DISK_FULL_TRIGGER = """
CREATE FUNCTION ireneo.fail_as_a_full_disk() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';
END $$;
CREATE TRIGGER full_disk BEFORE INSERT ON ireneo.turns
  FOR EACH ROW EXECUTE FUNCTION ireneo.fail_as_a_full_disk();
"""


@pytest.fixture
def full_database(pg_database):
    """A database of its own whose turns table fails every insert as a full disk does."""
    database = pg_cluster.prepare(pg_database.superuser_url)
    with psycopg.connect(database.owner_url, autocommit=True) as conn:
        conn.execute(DISK_FULL_TRIGGER)
    return database


def test_disk_full_is_storage_full_and_nothing_else_is():
    with pytest.raises(StorageFull, match="disk is full"), storage_errors():
        raise psycopg.errors.DiskFull("could not extend file")
    with pytest.raises(psycopg.errors.OutOfMemory), storage_errors():
        raise psycopg.errors.OutOfMemory("out of memory")


def test_ingest_on_a_full_postgres_answers_507_and_stores_nothing(full_database, tmp_path):
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    server = RunningServer(make_settings(tmp_path / "home", database_url=full_database.app_url))
    try:
        body = conversation("full-1", ["The boiler BX-3 lost pressure overnight."], user=alice)
        response = server.post(body)
        assert response.status_code == 507, response.text
        assert "storage full" in response.json()["error"]
        assert server.stored_turns(alice, "full-1") == []
    finally:
        server.close()
    with psycopg.connect(full_database.superuser_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM ireneo.turns").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM ireneo.sessions").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM ireneo.passages").fetchone() == (0,)


def test_postgres_restarted_under_a_running_server(tmp_path):
    """While PostgreSQL is down, recall answers its fail-soft sentence and ingest 503 with
    nothing stored; once it is back, both work again without restarting ireneo."""
    missing = pg_cluster.available()
    if missing or os.environ.get("IRENEO_TEST_DATABASE_URL"):
        if os.environ.get("IRENEO_REQUIRE_ALL") == "1" and missing:
            pytest.fail(f"{missing}; it is required when IRENEO_REQUIRE_ALL=1")
        pytest.skip(missing or "needs a cluster of its own to restart")
    cluster = pg_cluster.Cluster()  # its own: the session's cluster stays up for other tests
    try:
        database = pg_cluster.prepare(cluster.url)
        _restart_under_a_server(cluster, database, tmp_path)
    finally:
        cluster.stop()


def _restart_under_a_server(cluster, database, tmp_path) -> None:
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    env = subprocess_env(
        IRENEO_HOME=str(tmp_path / "unused-home"),
        IRENEO_DATABASE_URL=database.app_url,
        **POSTGRES_SERVER_ENV,
    )
    process, url = start_server(env)
    token = mint_token(make_settings(tmp_path), alice)

    def ingest(cid: str, text: str) -> httpx2.Response:
        body = conversation(cid, [text], user=alice)
        headers = {"x-ingest-key": INGEST_KEY}
        return httpx2.post(f"{url}/turns", json=body, headers=headers, timeout=60)

    def recall(query: str) -> str:
        return asyncio.run(
            call_tool(f"{url}/mcp", token, "recall_my_conversations", {"query": query})
        )

    events: list[dict] = []
    try:
        wait_ready(process, url)
        assert ingest("before", "The chiller CH-9 tripped on low flow.").status_code == 202
        wait_for(lambda: pending(database.app_url, alice) == 0, 120, "the first turn embedded")
        assert "CH-9" in recall("chiller CH-9")  # loads the model while PostgreSQL is up

        cluster.halt()
        started = time.monotonic()
        down = ingest("during", "The compressor CP-4 was replaced during the outage.")
        assert down.status_code == 503, down.text
        assert "nothing was stored" in down.json()["error"]
        assert recall("chiller CH-9") == UNAVAILABLE
        assert time.monotonic() - started < 2 * (POOL_TIMEOUT + 5)  # no hang

        cluster.start()
        # the pool reconnects by itself: the first request after the restart already works
        assert ingest("after", "The dryer DR-2 was serviced after the outage.").status_code == 202
        assert "CH-9" in recall("chiller CH-9")
        wait_for(lambda: pending(database.app_url, alice) == 0, 60, "the new turn embedded")
        assert "DR-2" in recall("dryer DR-2")

        # a quick restart with no request in between: the pool's idle connections are all
        # dead, and the first request must not be handed one of them
        cluster.halt()
        cluster.start()
        assert ingest("later", "The kiln KL-5 was relined.").status_code == 202
        assert "DR-2" in recall("dryer DR-2")
    finally:
        events = json_events(stop_server(process))
    with psycopg.connect(database.superuser_url, autocommit=True) as conn:
        sessions = conn.execute("SELECT session_id FROM ireneo.sessions ORDER BY 1").fetchall()
    assert sessions == [("after",), ("before",), ("later",)]  # nothing of "during", not even half
    failed = [e for e in events if e.get("event") == "store_failed"]
    assert failed and failed[0]["error"] in ("PoolTimeout", "OperationalError"), events
