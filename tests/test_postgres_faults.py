"""PostgreSQL failing under a server: a full disk, and the server itself restarted mid-run.

A real full disk is not provoked here (PostgreSQL would need a tiny filesystem for its data
directory); instead a trigger in a database of its own makes the server raise the very error a
full disk raises (SQLSTATE 53100, disk_full) on every turn written, so the error travels the
real path: PostgreSQL -> psycopg -> the store -> the ingest route."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from ireneo.errors import StorageFull
from ireneo.store.postgres import storage_errors
from tests import pg_cluster
from tests.conftest_server import RunningServer, conversation, make_settings

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
