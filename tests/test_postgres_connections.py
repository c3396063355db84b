"""The PostgreSQL store's round trips: connections found dead are dropped or retried, only where
that is safe, and what a recall reads without a round trip is what the rows say."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from datetime import UTC, datetime

import psycopg
import pytest

from ireneo.store import postgres
from ireneo.store.postgres import PostgresStore, open_pool
from ireneo.store.rows import conversation_ref
from tests.conftest import conversation


def user() -> str:
    return f"conn-{uuid.uuid4().hex}"


def backend_pid(pool) -> int:
    """The backend of the pool's one idle connection."""
    with pool.connection() as conn:
        return conn.info.backend_pid


def kill(superuser_url: str, pid: int) -> None:
    """End a backend as a restart of PostgreSQL would, and wait until it is gone."""
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(200):
            gone = conn.execute(
                "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)", (pid,)
            ).fetchone()
            if gone == (True,):
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {pid} did not end")


def meta_value(superuser_url: str, name: str, key: str) -> str | None:
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT value FROM ireneo.meta WHERE user_id = %s AND key = %s", (name, key)
        ).fetchone()
    return row[0] if row else None


@pytest.fixture
def one_connection(pg_database):
    pool = open_pool(pg_database.app_url, max_size=1)
    yield pool
    pool.close()


@pytest.fixture
def unchecked(pg_database, monkeypatch):
    """A pool that hands its connection out unchecked, as if it died just after the check."""
    monkeypatch.setattr(postgres, "check_quietly", lambda conn: None)
    pool = open_pool(pg_database.app_url, max_size=1)
    yield pool
    pool.close()


def test_a_connection_that_died_idle_is_not_handed_out(pg_database, one_connection, caplog):
    store = PostgresStore(one_connection, user())
    assert store.is_empty()
    dead = backend_pid(one_connection)
    kill(pg_database.superuser_url, dead)
    with caplog.at_level(logging.WARNING, logger="ireneo.store.postgres"):
        assert store.is_empty()  # the check saw the socket closed: another connection
    assert backend_pid(one_connection) != dead
    assert not [r for r in caplog.records if "found dead" in r.message]  # nothing retried


def test_a_read_on_a_connection_found_dead_is_retried_once(pg_database, unchecked, caplog):
    store = PostgresStore(unchecked, user())
    store.set_meta("colour", "green")
    kill(pg_database.superuser_url, backend_pid(unchecked))
    with caplog.at_level(logging.WARNING, logger="ireneo.store.postgres"):
        assert store.get_meta("colour") == "green"
    assert [r for r in caplog.records if "found dead" in r.message]


def test_a_write_whose_connection_is_found_dead_as_it_begins_is_applied_once(
    pg_database, unchecked
):
    name = user()
    store = PostgresStore(unchecked, name)
    kill(pg_database.superuser_url, backend_pid(unchecked))
    runs = 0
    with store._transaction() as tx:  # the opening round trip failed, then began on another
        runs += 1
        tx.execute("INSERT INTO meta VALUES (%s, 'probe', '1')", (name,))
    assert runs == 1
    assert meta_value(pg_database.superuser_url, name, "probe") == "1"


def test_a_transaction_whose_connection_dies_once_begun_is_not_retried(pg_database, unchecked):
    name = user()
    store = PostgresStore(unchecked, name)
    runs = 0
    with pytest.raises(psycopg.OperationalError), store._transaction() as tx:
        runs += 1
        kill(pg_database.superuser_url, tx.connection.info.backend_pid)
        tx.execute("INSERT INTO meta VALUES (%s, 'probe', '1')", (name,))
    assert runs == 1  # what was sent may or may not have been applied: not sent again
    assert meta_value(pg_database.superuser_url, name, "probe") is None  # never committed
    assert store.get_meta("probe") is None  # and the pool serves the next one


def test_a_stream_on_a_connection_found_dead_is_read_whole(pg_database, unchecked, tmp_path):
    from ireneo import Memory

    name = user()
    conversation(tmp_path / "src", "pump-1", ["The pump on line 3 failed.", "Bearing replaced."])
    with Memory(database=unchecked, user=name) as memory:
        memory.index([tmp_path / "src"])
    store = PostgresStore(unchecked, name)
    kill(pg_database.superuser_url, backend_pid(unchecked))
    assert len(store.layout()) == 2  # the layout's rows, from the cursor begun on another


def test_a_conversation_just_read_is_named_as_its_row(pg_pool, tmp_path):
    from ireneo import Memory

    name = user()
    conversation(tmp_path / "src", "pump-1", ["The pump on line 3 failed.", "Bearing replaced."])
    with Memory(database=pg_pool, user=name) as memory:
        memory.index([tmp_path / "src"])
    store = PostgresStore(pg_pool, name)
    from_row = store.conversation_ref("pump-1")
    assert from_row and store.conversation_ref("nothing-1") is None
    store.get_turns("pump-1", None, None)  # now seen: named from the salt
    assert "pump-1" in store._seen
    assert store.conversation_ref("pump-1") == from_row
    assert conversation_ref(store._salt_read, "pump-1") == from_row
    forgotten = store.forget_conversation("pump-1", actor="test", now=datetime.now(UTC))
    assert forgotten.turns == 2
    assert store.conversation_ref("pump-1") is None  # read again: gone


def test_meta_written_through_a_store_is_read_back(pg_pool):
    store = PostgresStore(pg_pool, user())
    assert store.get_meta("model") is None  # as read when the store opened
    store.set_meta("model", "minilm")
    assert store.get_meta("model") == "minilm"
    other = PostgresStore(pg_pool, store.user)
    assert other.get_meta("model") == "minilm"


def test_the_vectors_counters_come_with_the_layouts(pg_pool):
    store = PostgresStore(pg_pool, user())
    store.layout()
    assert store._vectors_counted is not None
    store.vectors()  # used, once
    assert store._vectors_counted is None


def scope_left(pool) -> tuple:
    """What the pool's one connection holds between transactions: its transaction status and
    the settings a transaction sets for itself (each must end with it)."""
    with pool.connection() as conn:
        status = conn.info.transaction_status
        scope, path = conn.execute(
            "SELECT current_setting('app.user_id', true), current_setting('search_path')"
        ).fetchone()  # type: ignore[misc]
    return status, scope or None, path  # '' once a transaction has set it and ended


def test_no_users_scope_outlives_its_transaction_on_any_path(pg_database, one_connection):
    """Every way a store uses a pooled connection, ending well or failing, leaves it idle with
    no user's scope: the next user's transaction starts from nothing of the last one's."""
    before = scope_left(one_connection)
    assert before[0] == psycopg.pq.TransactionStatus.IDLE and before[1] is None
    name = user()
    store = PostgresStore(one_connection, name)
    store.set_meta("colour", "green")
    store.record_returned([], datetime.now(UTC), datetime.now(UTC))

    def fail_in_transaction() -> None:
        with store._transaction() as tx:
            tx.execute("SELECT 1")
            raise RuntimeError("the caller's own failure")

    def abandon_a_stream() -> None:
        rows = store._stream("SELECT g FROM generate_series(1, 10000) AS g WHERE %s <> ''", (name,))
        next(rows)
        rows.close()

    paths = [
        lambda: store.get_meta("colour"),
        lambda: store._read(("SELECT 1/0", ())),  # a read that fails
        lambda: store._binary("SELECT 1/0 WHERE %s <> ''", (name,)),  # a binary read that fails
        lambda: store._stream("SELECT 1/0 WHERE %s <> ''", (name,)).__next__(),
        fail_in_transaction,
        abandon_a_stream,
        lambda: store._saved_data("layout", 0),
        lambda: store.layout(),
        lambda: store.record_returned([("a", 1)], datetime.now(UTC), datetime.now(UTC)),
        # sent whole from BEGIN to COMMIT, and failing in it (a seq past int)
        lambda: store.record_returned([("a", 2**40)], datetime.now(UTC), datetime.now(UTC)),
    ]
    for n, path in enumerate(paths):
        with contextlib.suppress(psycopg.Error, RuntimeError):
            path()
        assert scope_left(one_connection) == before, f"path {n}"


def test_vectors_stored_after_the_counters_were_read_are_not_read_twice(pg_pool, tmp_path):
    """A recall reads the vectors' counters with the layout's, then its vectors on the query
    worker (up to COUNTED_FOR later). Vectors stored in between, behind a copy already behind
    the count, are read beyond the count: what the copy lacked, not a sign that it is wrong.
    Reading every vector again whole for it cost a large memory's whole read on recalls made
    while it was being indexed."""
    from ireneo import Memory

    name = user()
    conversation(tmp_path / "one", "pump-1", ["The pump on line 3 failed.", "Bearing replaced."])
    conversation(tmp_path / "two", "fan-2", ["The fan on line 4 hums.", "Belt changed.", "Ok."])
    conversation(tmp_path / "three", "valve-3", ["Valve V-9 sticks.", "Greased it."])
    with Memory(database=pg_pool, user=name) as memory:
        memory.index([tmp_path / "one"])
        reader = PostgresStore(pg_pool, name)
        assert len(reader.vectors()) == 2
        memory.index([tmp_path / "two"])
        read: list[int] = []
        rows = reader._vector_rows
        reader._vector_rows = lambda after: (read.append(pid) or (pid, v) for pid, v in rows(after))
        reader._passage_counters()  # a recall's layout: the vectors' counters (5) come with it
        memory.index([tmp_path / "three"])  # stored meanwhile, through another connection
        assert len(reader.vectors()) == 7
    assert len(read) == 5  # the five the copy lacked, once each


def test_the_layouts_counters_come_with_the_term_statistics_of_the_same_thread(pg_pool, tmp_path):
    """A recall asks for the term statistics, then the layout: the corpus row read with the
    statistics answers the layout's counters, once, on the thread that read it. Another
    thread's layout reads the row itself (it may come after a write the first read missed),
    and so does the next layout of the same thread."""
    import threading

    from ireneo import Memory

    name = user()
    conversation(tmp_path / "one", "pump-1", ["The pump on line 3 failed.", "Bearing replaced."])
    conversation(tmp_path / "two", "fan-2", ["The fan on line 4 hums.", "Belt changed.", "Ok."])
    with Memory(database=pg_pool, user=name) as memory:
        memory.index([tmp_path / "one"])
        reader = PostgresStore(pg_pool, name)
        reads: list[str] = []
        read = reader._read
        reader._read = lambda *q, **kw: reads.append(q[0][0]) or read(*q, **kw)
        assert reader.term_stats(["pump"]).passages == 2
        memory.index([tmp_path / "two"])  # acknowledged after the statistics were read
        other: list[int] = []
        worker = threading.Thread(target=lambda: other.append(len(reader.layout())))
        worker.start()
        worker.join()
        assert other == [5]  # its own read of the row: the write is there
        reads.clear()
        assert len(reader.layout()) == 5  # this thread's counters said 2: read again, as behind
        assert reader.term_stats(["pump"]).passages == 5
        reads.clear()
        assert len(reader.layout()) == 5
        assert reads == []  # the counters read with the statistics: no round trip
        assert len(reader.layout()) == 5
        assert len(reads) == 1  # used once


def test_a_first_recall_reads_both_saved_copies_in_one_round_trip(pg_pool, tmp_path, monkeypatch):
    """A memory's first recall reads its vectors' saved copy, then its layout's (or its query
    worker asks for the vectors first): the two copies come in one round trip, whichever
    thread asks, and the recall finds what the memory that built them finds."""
    import threading

    from ireneo import Memory
    from ireneo.store import base as store_base

    monkeypatch.setattr(store_base, "SAVE_AFTER", 1)
    name = user()
    conversation(tmp_path / "one", "pump-1", ["The pump on line 3 failed.", "Bearing replaced."])
    conversation(tmp_path / "two", "fan-2", ["The fan on line 4 hums.", "Belt changed."])
    with Memory(database=pg_pool, user=name) as memory:
        memory.index([tmp_path])
        built = [(hit.session_id, hit.seq) for hit in memory.recall("pump failed", k=2)]
    reader = PostgresStore(pg_pool, name)
    reads: list[str] = []
    binary = reader._binary
    reader._binary = lambda *a: reads.append(a[0]) or binary(*a)
    worker = threading.Thread(target=reader.vectors)  # the query worker's ask
    worker.start()
    worker.join()
    assert reader.term_stats(["pump"]).passages == 4
    assert len(reader.vectors()) == 4
    assert len(reader.layout()) == 4
    assert len(reads) == 1 and reader._saved_ahead is None
    with Memory(database=pg_pool, user=name) as fresh:
        fresh_binary = fresh.store._binary
        fresh.store._binary = lambda *a: reads.append(a[0]) or fresh_binary(*a)
        assert [(hit.session_id, hit.seq) for hit in fresh.recall("pump failed", k=2)] == built
    assert len(reads) == 2
    # a deletion drops both saved copies (the passages_unsaved trigger): built from the rows
    memory = Memory(database=pg_pool, user=name)
    memory.forget("fan-2")
    memory.close()
    other = PostgresStore(pg_pool, name)
    other.term_stats(["pump"])
    assert len(other.vectors()) == 2 and len(other.layout()) == 2
    assert other._saved_ahead is None


def test_the_echo_record_is_one_round_trip_and_a_failed_one_applies_nothing(
    pg_database, one_connection, tmp_path
):
    """record_returned is sent whole, BEGIN to COMMIT, in one round trip; one that fails in it
    applies nothing and leaves the connection idle for the next."""
    from psycopg.pq import Trace

    from ireneo import Memory

    name = user()
    conversation(tmp_path / "src", "pump-1", ["The pump on line 3 failed.", "Bearing replaced."])
    with Memory(database=one_connection, user=name) as memory:
        memory.index([tmp_path / "src"])
    store = PostgresStore(one_connection, name)
    now = datetime.now(UTC)
    trace = tmp_path / "trace"
    with trace.open("w") as out:
        with one_connection.connection() as conn:  # the pool's one: traced, handed back
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
        try:
            store.record_returned([("pump-1", 0), ("pump-1", 1)], now, now)
        finally:
            conn.pgconn.untrace()
    assert trace.read_text().count("\tReadyForQuery") == 1
    assert len(store.returned_texts(now)) == 2
    with pytest.raises(psycopg.Error):
        store.record_returned([("pump-1", 0), ("pump-1", 2**40)], now, now)
    assert len(store.returned_texts(now)) == 2  # neither the deletion nor the rows applied
    assert scope_left(one_connection)[:2] == (psycopg.pq.TransactionStatus.IDLE, None)
