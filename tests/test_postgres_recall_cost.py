"""What a warm recall sends to PostgreSQL beyond its reads: the vectors' counters taken from the
statistics' read in flight, and an echo record that sends nothing when it has nothing to say."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
