"""What a warm recall sends to PostgreSQL beyond its reads: the vectors' counters taken from the
statistics' read in flight, and an echo record that sends nothing when it has nothing to say."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.pq import Trace

from ireneo import Memory
from ireneo.store import postgres
from ireneo.store.postgres import PostgresStore, open_pool
from tests.conftest import conversation


def user() -> str:
    return f"cost-{uuid.uuid4().hex}"


@pytest.fixture
def one_connection(pg_database):
    pool = open_pool(pg_database.app_url, max_size=2)
    yield pool
    pool.close()


def indexed(pool, tmp_path: Path) -> str:
    name = user()
    conversation(tmp_path / "src", "pump-1", ["The pump on line 3 failed.", "Bearing replaced."])
    with Memory(database=pool, user=name) as memory:
        memory.index([tmp_path / "src"])
    return name


def round_trips(pool, work) -> int:
    """ReadyForQuery messages on every connection the pool holds while `work` runs."""
    traces = []
    with pool.connection() as first, pool.connection() as second:
        conns = [first, second]
    for n, conn in enumerate(conns):
        out = open(f"/tmp/ireneo-cost-trace-{uuid.uuid4().hex}-{n}", "w")  # noqa: SIM115
        conn.pgconn.trace(out.fileno())
        conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
        traces.append((conn, out))
    try:
        work()
    finally:
        for conn, _ in traces:
            conn.pgconn.untrace()
    count = 0
    for _, out in traces:
        out.close()
        path = Path(out.name)
        count += path.read_text().count("\tReadyForQuery")
        path.unlink()
    return count


def test_the_query_worker_takes_the_counters_the_statistics_are_reading(
    pg_database, one_connection, tmp_path
):
    """A recall's query worker asks for the vectors' counters while the recall reads them with
    the statistics: it waits for that read instead of sending its own, and gets the row's."""
    name = indexed(one_connection, tmp_path)
    store = PostgresStore(one_connection, name)
    expected = store._one("SELECT vectors, vector_deletes FROM corpus WHERE user_id = %s", (name,))
    assert expected is not None and expected[0] > 0
    reading, go = threading.Event(), threading.Event()
    read = store._read

    def slow_read(*queries, **kwargs):  # the statistics' read, held until the worker asks
        reading.set()
        go.wait(10)
        return read(*queries, **kwargs)

    store._read = slow_read  # type: ignore[method-assign]
    stats = threading.Thread(target=store.term_stats, args=(["pump"],))
    stats.start()
    assert reading.wait(10)
    store._read = read  # type: ignore[method-assign]
    counted: list[tuple[int, int]] = []

    def worker() -> None:
        counted.append(store._vector_counters())

    asker = threading.Thread(target=worker)
    sent = round_trips(
        one_connection, lambda: (asker.start(), go.set(), asker.join(10), stats.join(10))
    )
    assert counted == [tuple(expected)]
    assert sent == 1  # the statistics' read only
    assert store._vectors_counted is None  # used once: the next ask reads the row
    assert round_trips(one_connection, store._vector_counters) == 1


def test_an_echo_record_of_nothing_sends_nothing_and_old_records_still_go(
    pg_database, one_connection, tmp_path, monkeypatch
):
    """Records past the echo window are removed once a PRUNE_EVERY, with the next record: a
    recall that showed nothing meanwhile sends nothing, and nothing outside the window is read."""
    name = indexed(one_connection, tmp_path)
    store = PostgresStore(one_connection, name)
    now = datetime.now(UTC)
    old = now - timedelta(days=3)
    store.record_returned([("pump-1", 0)], old, old - timedelta(days=1))
    assert store.returned_texts(old) == ["The pump on line 3 failed."]
    assert round_trips(one_connection, lambda: store.record_returned([], now, now)) == 0
    assert store.returned_texts(old) == ["The pump on line 3 failed."]  # not yet removed
    assert store.returned_texts(now - timedelta(days=1)) == []  # and outside the window
    # a record with turns is sent, still without the removal
    assert (
        round_trips(one_connection, lambda: store.record_returned([("pump-1", 1)], now, now)) == 1
    )
    assert len(store.returned_texts(old)) == 2
    # PRUNE_EVERY later the next record removes what is past the window, even one of nothing
    monkeypatch.setattr(store, "_pruned", store._pruned - postgres.PRUNE_EVERY)
    keep_after = now - timedelta(days=1)
    assert round_trips(one_connection, lambda: store.record_returned([], now, keep_after)) == 1
    assert store.returned_texts(old) == ["Bearing replaced."]
    # a store opened anew removes them with its first record
    store.record_returned([("pump-1", 0)], old, old - timedelta(days=1))
    fresh = PostgresStore(one_connection, name)
    fresh.record_returned([], now, keep_after)
    assert fresh.returned_texts(old) == ["Bearing replaced."]


def scope_left(pool) -> tuple:
    with pool.connection() as conn:
        status = conn.info.transaction_status
        scope, path = conn.execute(
            "SELECT current_setting('app.user_id', true), current_setting('search_path')"
        ).fetchone()  # type: ignore[misc]
    return status, scope or None, path


def test_prepared_reads_keep_each_user_to_their_rows(pg_database, tmp_path):
    """A warm recall's reads are prepared statements, planned once for every user of the
    connection (a generic plan after a few uses): the policies still admit only the scope's
    user, whatever user the statement names, and no scope outlives its read, failing or not."""
    pool = open_pool(pg_database.app_url, max_size=1)  # every user on the one connection
    try:
        owner = indexed(pool, tmp_path)
        other = PostgresStore(pool, user())
        mine = PostgresStore(pool, owner)
        before = scope_left(pool)
        window = [("pump-1", 0, 1)]
        for _ in range(12):  # past the uses after which PostgreSQL may keep a generic plan
            assert [t.text for t in mine.turn_windows(window)[0]] == [
                "The pump on line 3 failed.",
                "Bearing replaced.",
            ]
            assert other.turn_windows(window) == [[]]
            assert mine.term_stats(["pump"]).document_frequency == {"pump": 1}
            assert other.term_stats(["pump"]).document_frequency == {}
        # the other user's scope with the owner's name in the statement: the policy decides
        forged = json.dumps([{"i": 0, "s": "pump-1", "l": 0, "h": 1}])
        assert other._prepared((postgres._WINDOWS, (forged, owner))) == [[]]
        assert scope_left(pool) == before
        with pytest.raises(psycopg.Error):
            other._prepared((postgres._WINDOWS, ("not json", owner)))
        assert scope_left(pool) == before
        with pool.connection() as conn:
            prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        assert prepared is not None and prepared[0] >= 2  # the scope and the reads
    finally:
        pool.close()


def test_a_prepared_read_on_a_connection_found_dead_is_retried_once(
    pg_database, tmp_path, monkeypatch, caplog
):
    """A connection that died after the pool's check (PostgreSQL restarted) fails the prepared
    read's round trip; the read runs again on a fresh connection, which prepares anew."""
    from tests.test_postgres_connections import backend_pid, kill

    monkeypatch.setattr(postgres, "check_quietly", lambda conn: None)  # handed out unchecked
    pool = open_pool(pg_database.app_url, max_size=1)
    try:
        store = PostgresStore(pool, indexed(pool, tmp_path))
        window = [("pump-1", 0, 0)]
        for _ in range(3):  # prepared on this connection
            assert [t.text for t in store.turn_windows(window)[0]] == ["The pump on line 3 failed."]
        kill(pg_database.superuser_url, backend_pid(pool))
        with caplog.at_level(logging.WARNING, logger="ireneo.store.postgres"):
            assert [t.text for t in store.turn_windows(window)[0]] == ["The pump on line 3 failed."]
        assert [r for r in caplog.records if "found dead" in r.message]
        assert scope_left(pool)[:2] == (psycopg.pq.TransactionStatus.IDLE, None)
    finally:
        pool.close()
