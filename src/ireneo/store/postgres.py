"""The PostgreSQL store: every user's memory in one database, isolated by Row-Level Security.

A `PostgresStore` is one user's memory, like a SQLite file; many of them share one connection
pool. Each method is one transaction that first sets `app.user_id` (with `set_config(..., true)`,
so it ends with the transaction and is safe behind a transaction pooler), and every statement
also names the user, so a distributed PostgreSQL can route it to the user's shard. The schema and
its policies are in pg_schema.py.

Search reads, as in the embedded store, a copy kept in memory of where each passage sits and
its terms (store/layout.py: BM25 candidates from its postings, with the per-user statistics
that triggers keep in `term_df` and `corpus`) and of the user's vectors (store/vectors.py: exact
dense search, far faster than pgvector's exact scan; an approximate index over every user's
vectors loses rows under a user filter: docs/postgres.md). Both are brought up to date from
counters in `corpus`, and saved in `saved_copies` after indexing, so a replica's first recall of
a user reads two values instead of every row (Store.save_copies). Vectors are pgvector
`vector`s, normalised (inner product = cosine).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import secrets
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TypeVar

import numpy as np

from ireneo.errors import StorageFull
from ireneo.extras import missing

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg.types import TypeInfo
    from psycopg_pool import ConnectionPool
except ImportError as exc:
    raise missing("postgres", "a PostgreSQL memory", exc) from None
from ireneo.model import ConversationSummary, Turn
from ireneo.store import pg_schema
from ireneo.store.base import (
    PRUNE_EVERY,
    READ_ROWS,
    AuditEntry,
    Filters,
    Forgotten,
    MemoryDraft,
    MemoryFilter,
    MemoryRecord,
    SourceState,
    Status,
    Store,
    StoredMemory,
    TermStats,
    TurnWrite,
    id_matrix,
)
from ireneo.store.layout import PassageRow
from ireneo.store.rows import (
    blocks,
    blocks_json,
    conversation_ref,
    first_words,
    kept,
    turn_text,
)

# Set first in every transaction: the user the policies admit, and where the tables are.
_SCOPE = (
    "SELECT set_config('app.user_id', %s, true), "
    f"set_config('search_path', '{pg_schema.SCHEMA}, public', true), "
    "set_config('TimeZone', 'UTC', true)"
)


class SchemaOutdated(RuntimeError):
    """The database's schema is older (or newer) than this ireneo."""


POOL_TIMEOUT = 10.0  # seconds
SEEN_KEPT = 4096  # conversations named without a round trip (conversation_ref), at most
COUNTED_FOR = 0.5  # seconds counters read with other values stand for a new read
# The corpus row: the statistics BM25 reads (passages, terms) and the counters that keep
# search's copies up to date (store/kept.py).
_COUNTERS = (
    "SELECT passages, terms, passage_deletes, vectors, vector_deletes FROM corpus "
    "WHERE user_id = %s"
)
_SAVED = (
    "SELECT name, deletes, data FROM saved_copies WHERE user_id = %s AND name = %s AND deletes = %s"
)
_SAVED_WITH_LAYOUT = (  # and the layout's copy, if saved at the corpus row's count
    "SELECT s.name, s.deletes, s.data FROM saved_copies s JOIN corpus c "
    "ON c.user_id = s.user_id WHERE s.user_id = %s AND (s.name = %s AND s.deletes = %s "
    "OR s.name = 'layout' AND s.deletes = c.passage_deletes)"
)
_TERM_DF = (
    "SELECT term, docs FROM term_df WHERE user_id = %s AND term = ANY(%s::text[]) AND docs > 0"
)


def open_pool(url: str, *, max_size: int = 8) -> ConnectionPool:
    """A pool of connections to `url`, checked to hold the schema this ireneo expects."""
    pool = ConnectionPool(
        url,
        min_size=1,
        max_size=max(1, max_size),
        # no server-side prepared statements: a generic plan cannot know whose rows it reads,
        # and transaction-mode poolers do not keep them
        kwargs={"autocommit": True, "prepare_threshold": None},
        configure=_configure,
        # a connection handed out is checked first, without a round trip unless PostgreSQL
        # has closed it or said something since (after a restart the idle ones are dead); one
        # that dies later fails its first round trip, which the store retries once where that
        # is safe (_on_connection)
        check=check_quietly,
        # while PostgreSQL is down a request waits at most this long for a connection, then
        # fails (ingest 503, recall's fail-soft sentence) instead of hanging
        timeout=POOL_TIMEOUT,
        # a connection attempt backs off exponentially (1, 2, 4 s...); ending it after 10 s
        # lets the next request start a fresh one, so the pool is back within seconds of
        # PostgreSQL, however long it was down
        reconnect_timeout=10.0,
        open=False,
        name="ireneo",
    )
    pool.open(wait=True, timeout=30)
    try:
        with pool.connection() as conn:
            version = pg_schema.current_version(conn)
    except BaseException:
        pool.close()
        raise
    if version != pg_schema.latest_version():
        pool.close()
        raise SchemaOutdated(
            f"the database's ireneo schema is version {version}, this ireneo needs "
            f"{pg_schema.latest_version()}: run `ireneo db upgrade` as the tables' owner"
        )
    return pool


def check_quietly(conn: psycopg.Connection) -> None:
    """The pool's check of a connection it hands out: a round trip only when its socket has
    something to read. An idle connection is sent nothing, so anything there (the end of the
    stream, or PostgreSQL's last word before it closed the connection) means it is dying, and
    the full check (an empty query) tells; else it is handed out as it is. The check every
    connection used to get was a round trip per read: half of those a warm recall waited for
    (docs/scaling.md, item 10)."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        ConnectionPool.check_connection(conn)


def _dead(exc: BaseException, conn: psycopg.Connection) -> bool:
    """Whether `exc` is `conn` found dead (PostgreSQL restarted, or the connection cut)."""
    return isinstance(exc, psycopg.OperationalError) and (conn.broken or conn.closed)


def _configure(conn: psycopg.Connection) -> None:
    """pgvector's types on a new connection; a database without the extension is reported by
    the schema check, not by a pool that cannot connect."""
    if TypeInfo.fetch(conn, "vector") is not None:
        register_vector(conn)


def users(pool: ConnectionPool) -> list[str]:
    """Every user that has a memory in the database."""
    query = f"SELECT user_id FROM {pg_schema.SCHEMA}.users ORDER BY 1"
    rows = _on_connection(pool, lambda conn: conn.execute(query).fetchall())
    return [user for (user,) in rows]


def has_memory(pool: ConnectionPool, user: str) -> bool:
    query = f"SELECT 1 FROM {pg_schema.SCHEMA}.users WHERE user_id = %s"
    return _on_connection(pool, lambda conn: conn.execute(query, (user,)).fetchone()) is not None


EXPIRY_BATCH = 250  # users asked in one round trip by `expirable`


def expirable(pool: ConnectionPool, users: list[str], updated_before: datetime) -> list[str]:
    """The users among `users` who have a low-importance explicit memory not updated since
    `updated_before` (what `memory_expire` removes), found without opening their memories.

    Each user's question runs in that user's own scope, as every per-user read does (the
    policies admit no other user's rows), EXPIRY_BATCH users to a message: one transaction in
    which the scope is set again before each question."""
    question = (
        "SELECT EXISTS (SELECT 1 FROM memories "
        "WHERE user_id = %s AND importance = 0 AND updated_at < %s)"
    )
    cutoff = _second(updated_before)
    found = []
    for start in range(0, len(users), EXPIRY_BATCH):
        batch = users[start : start + EXPIRY_BATCH]
        text = "; ".join(f"{_SCOPE}; {question}" for _ in batch)
        params = tuple(value for user in batch for value in (user, user, cutoff))
        with storage_errors():
            found += _on_connection(
                pool, functools.partial(_expirable_of, batch=batch, text=text, params=params)
            )
    return found


def _expirable_of(
    conn: psycopg.Connection, *, batch: list[str], text: str, params: tuple
) -> list[str]:
    found = []
    with psycopg.ClientCursor(conn) as cur:
        cur.execute(text, params)  # positioned on the first user's scope
        for n, user in enumerate(batch):
            cur.nextset()
            row = cur.fetchone()
            if row and row[0]:
                found.append(user)
            if n + 1 < len(batch):
                cur.nextset()
    return found


T = TypeVar("T")
log = logging.getLogger("ireneo.store.postgres")


def _on_connection(
    pool: ConnectionPool, work: Callable[[psycopg.Connection], T], keep: bool = False
) -> T:
    """`work` done on a pooled connection, and once more on another when the first is found
    dead during it (PostgreSQL restarted, or the connection cut since the pool's check): call
    it only with work that may run twice, a read or statements that are idempotent, or work
    that is the first round trip of a transaction (nothing of it is applied unless it
    commits). `keep`: the connection is handed to the caller, who gives it back (putconn)."""
    for attempt in (1, 2):
        conn = pool.getconn()
        try:
            done = work(conn)
        except BaseException as exc:
            pool.putconn(conn)
            if attempt == 2 or not _dead(exc, conn):
                raise
            log.warning("a pooled connection was found dead; trying another once")
            continue
        if not keep:
            pool.putconn(conn)
        return done
    raise AssertionError("unreachable")


def _execute(conn: psycopg.Connection, text: str, params: tuple) -> psycopg.Connection:
    with psycopg.ClientCursor(conn) as cur:
        cur.execute(text, params)
    return conn


FULL = "the database's disk is full; nothing of the write was stored"


@contextmanager
def storage_errors() -> Iterator[None]:
    """PostgreSQL's disk_full (SQLSTATE 53100) as StorageFull, so ingest answers 507 as on
    SQLite; the transaction it ended was rolled back by the server."""
    try:
        yield
    except psycopg.errors.DiskFull as exc:
        raise StorageFull(FULL) from exc


class PostgresStore(Store[psycopg.Cursor]):
    """One user's memory in a shared PostgreSQL database.

    `database`: a `postgresql://` URL (the store opens and closes its own pool) or a pool shared
    with other stores (left open on close). `user`: the key every row of this memory carries.
    """

    def __init__(self, database: str | ConnectionPool, user: str):
        if not user:
            raise ValueError("a PostgreSQL memory needs a user")
        self.user = user
        self._owns_pool = isinstance(database, str)
        self._pool = open_pool(database, max_size=2) if isinstance(database, str) else database
        self._keep_copies()
        self._vectors_counted: tuple[float, tuple[int, int]] | None = None  # _passage_counters
        self._counted = threading.local()  # the corpus row as each thread's term_stats read it
        self._counting = threading.Event()  # the last term_stats' read: set once it is done
        self._counting.set()
        self._pruned = -PRUNE_EVERY  # when record_returned last removed records past their window
        self._saved_ahead: tuple[str, int, float, bytes] | None = None  # _saved_data
        self._seen: set[str] = set()  # conversations whose turns were just read (turn_windows)
        # One round trip: the user's rows made if new (both idempotent), then every meta row,
        # which answers the first get_meta of each key (a memory asks a few as it opens).
        [meta] = self._read(
            ("INSERT INTO users VALUES (%s) ON CONFLICT DO NOTHING", (self.user,)),
            (
                "INSERT INTO meta VALUES (%s, 'ref_salt', %s) ON CONFLICT DO NOTHING",
                (self.user, secrets.token_hex(16)),
            ),
            ("SELECT key, value FROM meta WHERE user_id = %s", (self.user,)),
            results=1,
        )
        self._opened_meta: dict[str, str] = dict(meta)
        self._meta_asked: set[str] = set()
        self._salt_read = self._opened_meta.get("ref_salt")  # never changes once written

    @contextmanager
    def _begun(self, opening: str = "", params: tuple = ()) -> Iterator[psycopg.Connection]:
        """A pooled connection in a transaction begun with the user's scope and `opening`
        (statements sent with them, values bound here): one round trip, retried once on another
        connection if this one is found dead there, when nothing of the caller's has been sent
        (see `_on_connection`). Committed when the block ends, unless the block did; rolled
        back on an exception."""
        text = f"BEGIN; {_SCOPE}" + (f"; {opening}" if opening else "")
        conn = _on_connection(self._pool, lambda c: _execute(c, text, (self.user, *params)), True)
        try:
            yield conn
        except BaseException:
            if not (conn.broken or conn.closed):
                # failing, the pool discards a connection it gets back in a transaction
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
            raise
        else:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("COMMIT")
        finally:
            self._pool.putconn(conn)

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor]:
        with storage_errors(), self._begun() as conn, conn.cursor() as cur:
            yield cur

    def _read(
        self, *queries: tuple[str, tuple | dict], results: int | None = None
    ) -> list[list[tuple]]:
        """The rows of each query, read in one round trip: the scope and the queries go as one
        message, which PostgreSQL runs as one transaction (a read in `_transaction` waited for
        three: BEGIN with the scope, the query, COMMIT). Values are bound here, quoted by
        psycopg; results come as text, so keep binary reads (bytes) in `_binary`. A query with
        named values is read alone. Only the last `results` queries' rows are returned (all by
        default). Retried once on another connection if this one is found dead: a read, or
        idempotent statements before it, may run twice."""
        params: tuple | dict
        if any(isinstance(values, dict) for _, values in queries):
            if len(queries) != 1:
                raise ValueError("a query with named values is read alone")
            query, named = queries[0]
            text = f"{_SCOPE.replace('%s', '%(scope)s')}; {query}"
            params = {"scope": self.user, **named}  # type: ignore[dict-item]
        else:
            text = "; ".join([_SCOPE, *(query for query, _ in queries)])
            params = (self.user, *(value for _, values in queries for value in values))
        wanted = len(queries) if results is None else results

        def read(conn: psycopg.Connection) -> list[list[tuple]]:
            with psycopg.ClientCursor(conn) as cur:
                cur.execute(text, params)
                for _ in range(len(queries) - wanted):
                    cur.nextset()
                rows = []
                for _ in range(wanted):
                    cur.nextset()
                    rows.append(cur.fetchall())
                return rows

        with storage_errors():
            return _on_connection(self._pool, read)

    def _one(self, query: str, params: tuple | dict) -> tuple | None:
        rows = self._read((query, params))[0]
        return rows[0] if rows else None

    def _all(self, query: str, params: tuple | dict) -> list[tuple]:
        return self._read((query, params))[0]

    def _binary(self, query: str, params: tuple) -> list[tuple]:
        """The rows of a read whose values are bytes (binary, not text's hex), in one round
        trip: the transaction, the scope and the query sent as a pipeline. Retried once on
        another connection if this one is found dead."""

        def read(conn: psycopg.Connection) -> list[tuple]:
            try:
                with conn.cursor(binary=True) as cur:
                    with conn.pipeline():
                        conn.execute("BEGIN")
                        conn.execute(_SCOPE, (self.user,))
                        cur.execute(query, params)
                        conn.execute("COMMIT")
                    return cur.fetchall()  # the pipeline's results came as it ended
            except BaseException:
                if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                    conn.execute("ROLLBACK")
                raise

        with storage_errors():
            return _on_connection(self._pool, read)

    def _stream(self, query: str, params: tuple) -> Iterator[tuple]:
        """The rows of a long read (a memory's whole layout or vectors), fetched a chunk at a
        time through a cursor, so they are never all held as Python objects: the cursor is
        declared in the round trip that begins the transaction, then each chunk is one (a
        memory of a few thousand passages: three round trips in all, where psycopg's named
        cursor took eight).

        Nested loops are off: such a read takes all of a user's rows, which a hash join reads
        once, where a nested loop planned from too low an estimate (right after a bulk import)
        compares every passage with every turn (docs/postgres.md, "Planner traps")."""
        opening = (
            f"SET LOCAL enable_nestloop = off; DECLARE ireneo_stream NO SCROLL CURSOR FOR {query}"
        )
        with (
            storage_errors(),
            self._begun(opening, params) as conn,
            conn.cursor(binary=True) as cur,
        ):
            while True:
                rows = cur.execute(f"FETCH FORWARD {READ_ROWS} FROM ireneo_stream").fetchall()
                yield from rows
                if len(rows) < READ_ROWS:
                    break

    def close(self) -> None:
        if self._owns_pool:
            self._pool.close()

    # -- metadata -------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """The first ask of each key after the store opened is answered by the rows read then
        (as fresh as the open: a memory asks a few as it opens); later ones read the row."""
        if key not in self._meta_asked:
            self._meta_asked.add(key)
            return self._opened_meta.get(key)
        row = self._one("SELECT value FROM meta WHERE user_id = %s AND key = %s", (self.user, key))
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as tx:
            self._put_meta(tx, key, value)

    def add_meta(self, key: str, value: str) -> str:
        self._meta_asked.add(key)  # read from the row from now on
        with self._transaction() as tx:
            tx.execute(
                "INSERT INTO meta VALUES (%s, %s, %s) ON CONFLICT (user_id, key) DO NOTHING",
                (self.user, key, value),
            )
            row = tx.execute(
                "SELECT value FROM meta WHERE user_id = %s AND key = %s", (self.user, key)
            ).fetchone()
        return row[0]

    # -- writes -----------------------------------------------------------------------------------
    def turn_hashes(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        if not keys:
            return {}
        rows = self._all(
            "SELECT t.session_id, t.turn_uuid, t.content_hash FROM turns t "
            "JOIN unnest(%s::text[], %s::text[]) AS k(session_id, turn_uuid) "
            "ON t.session_id = k.session_id AND t.turn_uuid = k.turn_uuid WHERE t.user_id = %s",
            ([k[0] for k in keys], [k[1] for k in keys], self.user),
        )
        return {(sid, uuid): digest for sid, uuid, digest in rows}

    # (write_turns is Store's: what each write does is decided there)
    def _stored_turns(
        self, tx: psycopg.Cursor, keys: list[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[int, str]]:
        """One writer of a user's turns at a time (as in SQLite): two replicas storing the same
        new turn would otherwise both insert it."""
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('ireneo-turns:' || %s, 0))",
            (self.user,),
        )
        return {
            (sid, uuid): (turn_id, digest)
            for sid, uuid, turn_id, digest in tx.execute(
                "SELECT t.session_id, t.turn_uuid, t.id, t.content_hash FROM turns t "
                "JOIN unnest(%s::text[], %s::text[]) AS k(session_id, turn_uuid) "
                "ON t.session_id = k.session_id AND t.turn_uuid = k.turn_uuid "
                "WHERE t.user_id = %s FOR UPDATE OF t",
                ([sid for sid, _ in keys], [uuid for _, uuid in keys], self.user),
            )
        }

    def _write_changes(
        self,
        tx: psycopg.Cursor,
        turns: list[TurnWrite],
        changes: list[str],
        stored: dict[tuple[str, str], tuple[int, str]],
        echoes: frozenset[tuple[str, str]],
    ) -> None:
        """A few statements for the whole batch, each turn written once as it ends."""
        new: dict[tuple[str, str], TurnWrite] = {}
        changed: dict[tuple[str, str], TurnWrite] = {}
        for write, change in zip(turns, changes, strict=True):
            key = (write[0].session_id, write[0].turn_uuid)
            if change == "added":
                new[key] = write
            elif change == "replaced":
                (new if key in new else changed)[key] = write
        if new:
            salt = self._salt(tx)
            sessions = sorted({t.session_id for t, _, _ in new.values()})
            tx.execute(
                "INSERT INTO sessions SELECT %s, s, r FROM unnest(%s::text[], %s::text[]) "
                "AS x(s, r) ON CONFLICT DO NOTHING",
                (self.user, sessions, [conversation_ref(salt, s) for s in sessions]),
            )
            tx.execute(
                "INSERT INTO turns (user_id, session_id, turn_uuid, seq, ts, role, harness, "
                "blocks, content_hash, echo) SELECT %s, x.* FROM unnest(%s::text[], "
                "%s::text[], %s::int[], %s::timestamptz[], %s::text[], %s::text[], %s::text[], "
                "%s::text[], %s::boolean[]) AS x",
                (self.user, *_turn_columns(list(new.values()), echoes, with_key=True)),
            )
        if changed:
            tx.execute(
                "DELETE FROM passages WHERE user_id = %s AND turn_id = ANY(%s::bigint[])",
                (self.user, [stored[key][0] for key in changed]),
            )
            tx.execute(
                "UPDATE turns t SET seq = x.seq, ts = x.ts, role = x.role, harness = x.harness, "
                "blocks = x.blocks, content_hash = x.content_hash, echo = x.echo "
                "FROM unnest(%s::bigint[], %s::int[], %s::timestamptz[], %s::text[], "
                "%s::text[], %s::text[], %s::text[], %s::boolean[]) "
                "AS x(id, seq, ts, role, harness, blocks, content_hash, echo) "
                "WHERE t.user_id = %s AND t.id = x.id",
                (
                    [stored[key][0] for key in changed],
                    *_turn_columns(list(changed.values()), echoes, with_key=False),
                    self.user,
                ),
            )
        drafts = [
            (turn.session_id, turn.turn_uuid, p.block_type, p.text, p.terms)
            for turn, _, passages in [*new.values(), *changed.values()]
            for p in passages
        ]
        if drafts:
            tx.execute(
                "INSERT INTO passages (user_id, turn_id, block_type, text, terms) "
                "SELECT %s, t.id, x.block_type, x.text, x.terms FROM unnest(%s::text[], "
                "%s::text[], %s::text[], %s::text[], %s::text[]) WITH ORDINALITY "
                "AS x(session_id, turn_uuid, block_type, text, terms, n) "
                "JOIN turns t ON t.user_id = %s AND t.session_id = x.session_id "
                "AND t.turn_uuid = x.turn_uuid ORDER BY x.n",
                (self.user, *map(list, zip(*drafts, strict=True)), self.user),
            )

    def _put_source(self, tx: psycopg.Cursor, source: SourceState) -> None:
        tx.execute(
            "INSERT INTO sources VALUES (%s, %s, %s, %s, %s, now()) "
            "ON CONFLICT (user_id, path) DO UPDATE SET size = excluded.size, "
            "mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, indexed_at = now()",
            (self.user, source.path, source.size, source.mtime_ns, source.sha256),
        )

    def _put_meta(self, tx: psycopg.Cursor, key: str, value: str) -> None:
        self._meta_asked.add(key)  # read from the row from now on
        tx.execute(
            "INSERT INTO meta VALUES (%s, %s, %s) "
            "ON CONFLICT (user_id, key) DO UPDATE SET value = excluded.value",
            (self.user, key, value),
        )

    def _salt(self, tx: psycopg.Cursor) -> str:
        row = tx.execute(
            "SELECT value FROM meta WHERE user_id = %s AND key = 'ref_salt'", (self.user,)
        ).fetchone()
        return row[0] if row else ""

    def source_state(self, path: str) -> SourceState | None:
        row = self._one(
            "SELECT path, size, mtime_ns, sha256 FROM sources WHERE user_id = %s AND path = %s",
            (self.user, path),
        )
        return SourceState(*row) if row else None

    def pending_passages(self, limit: int, after: int = 0) -> list[tuple[int, str]]:
        return self._all(
            "SELECT id, text FROM passages WHERE user_id = %s AND id > %s AND embedding IS NULL "
            "ORDER BY id LIMIT %s",
            (self.user, after, limit),
        )

    def count_pending(self) -> int:
        row = self._one(
            "SELECT count(*) FROM passages WHERE user_id = %s AND embedding IS NULL", (self.user,)
        )
        return int(row[0]) if row else 0

    def put_vectors(self, passage_ids: list[int], vectors: np.ndarray) -> None:
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._transaction() as cur:
            # A passage's text never changes (an edit makes new passages), nor its vector.
            cur.executemany(
                "UPDATE passages SET embedding = %s "
                "WHERE user_id = %s AND id = %s AND embedding IS NULL",
                [(matrix[i], self.user, pid) for i, pid in enumerate(passage_ids)],
            )
            cur.execute(
                "UPDATE corpus SET vectors = vectors + %s WHERE user_id = %s",
                (max(cur.rowcount, 0), self.user),
            )

    def drop_vectors(self) -> None:
        with self._transaction() as cur:
            cur.execute("UPDATE passages SET embedding = NULL WHERE user_id = %s", (self.user,))
            cur.execute(
                "UPDATE corpus SET vectors = 0, vector_deletes = vector_deletes + 1 "
                "WHERE user_id = %s",
                (self.user,),
            )
            cur.execute(
                "DELETE FROM saved_copies WHERE user_id = %s AND name = 'vectors'", (self.user,)
            )

    def _saved_rows(self, name: str) -> int:
        row = self._one(
            "SELECT rows FROM saved_copies WHERE user_id = %s AND name = %s", (self.user, name)
        )
        return row[0] if row else 0

    def _deletes_held(self, tx: psycopg.Cursor, name: str) -> int | None:
        """The corpus row locked, as every writer takes it: a deletion running meanwhile either
        counted itself before this reads the count, or waits for this commit and then drops the
        copy (the passages_unsaved trigger)."""
        row = tx.execute(
            "SELECT passage_deletes, vector_deletes FROM corpus WHERE user_id = %s FOR UPDATE",
            (self.user,),
        ).fetchone()
        return None if row is None else row[0 if name == "layout" else 1]

    def _put_saved(
        self, tx: psycopg.Cursor, name: str, rows: int, deletes: int, data: memoryview
    ) -> None:
        tx.execute(
            "INSERT INTO saved_copies VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (user_id, name) DO UPDATE "
            "SET rows = excluded.rows, deletes = excluded.deletes, data = excluded.data",
            (self.user, name, rows, deletes, data),
        )

    def _saved_data(self, name: str, deletes: int) -> bytes | None:
        """The bytes as they are (text would send them as hex, twice the size). A memory's first
        recall reads its vectors' copy, then its layout's: asked for the vectors while the
        layout is unread, this reads the layout's too (at the count of deletions the corpus row
        holds meanwhile), in the same round trip, and keeps it COUNTED_FOR seconds for its ask."""
        ahead, self._saved_ahead = self._saved_ahead, None
        if ahead is not None and ahead[:2] == (name, deletes) and time.monotonic() < ahead[2]:
            return ahead[3]
        query = _SAVED_WITH_LAYOUT if name == "vectors" and not self._layout.read else _SAVED
        rows = self._binary(query, (self.user, name, deletes))
        found = {copy: (held, data) for copy, held, data in rows}
        if "layout" in found and name != "layout":
            held, data = found["layout"]
            self._saved_ahead = ("layout", held, time.monotonic() + COUNTED_FOR, data)
        return found[name][1] if name in found else None

    def _drop_saved(self, name: str) -> None:
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM saved_copies WHERE user_id = %s AND name = %s", (self.user, name)
            )

    # -- search candidates ---------------------------------------------------------------------------
    def term_stats(self, terms: list[str]) -> TermStats:
        """Read with every counter of the corpus row: the layout's answer this thread's next
        `_passage_counters`, the vectors' the next `_vector_counters`, each within COUNTED_FOR
        seconds and once. A recall asks for the statistics, then for both copies (the vectors
        on its query worker): one read of the row for the three is two round trips less."""
        self._counting = counting = threading.Event()
        try:
            corpus, found = self._read((_COUNTERS, (self.user,)), (_TERM_DF, (self.user, terms)))
            passages, total, passage_deletes, vectors, vector_deletes = (
                corpus[0] if corpus else (0, 0, 0, 0, 0)
            )
            now = time.monotonic()
            self._counted.row = (now, (passages, passage_deletes))
            self._vectors_counted = (now, (vectors, vector_deletes))
        finally:
            counting.set()
        return TermStats.counted(passages, total, dict(found))

    def _passage_counters(self) -> tuple[int, int]:
        """The counters this thread's `term_stats` read within COUNTED_FOR seconds (used once:
        a second ask reads the row, and a thread never takes another's, which may have read it
        before a write this thread has seen acknowledged), else the row read now, whose
        vectors' counters then answer the next `_vector_counters` as term_stats' do."""
        counted, self._counted.row = getattr(self._counted, "row", None), None
        if counted is not None and time.monotonic() - counted[0] < COUNTED_FOR:
            return counted[1]
        row = self._one(_COUNTERS, (self.user,))
        passages, _, passage_deletes, vectors, vector_deletes = row if row else (0,) * 5
        self._vectors_counted = (time.monotonic(), (vectors, vector_deletes))
        return passages, passage_deletes

    def _passage_rows(self, after: int) -> Iterator[PassageRow]:
        rows = self._stream(
            "SELECT p.id, t.session_id, t.seq, floor(extract(epoch FROM t.ts))::bigint, t.role, "
            "p.block_type, p.terms, t.echo FROM passages p JOIN turns t "
            "ON t.user_id = p.user_id AND t.id = p.turn_id "
            "WHERE p.user_id = %s AND p.id > %s ORDER BY p.id",
            (self.user, after),
        )
        return (PassageRow(*row) for row in rows)

    def _vector_counters(self) -> tuple[int, int]:
        """The counters the last `term_stats` read within COUNTED_FOR seconds (used once),
        waiting for it if it is being read: a recall's query worker asks for them while the
        recall reads them with the statistics, and its own read was a round trip more in half
        the recalls (docs/scaling.md, item 14). Else the row's counters read now."""
        if not self._vectors_fresh():
            self._counting.wait(COUNTED_FOR)
        counted, self._vectors_counted = self._vectors_counted, None  # used once
        if counted is not None and time.monotonic() - counted[0] < COUNTED_FOR:
            return counted[1]
        row = self._one(
            "SELECT vectors, vector_deletes FROM corpus WHERE user_id = %s", (self.user,)
        )
        return row if row else (0, 0)

    def _vectors_fresh(self) -> bool:
        counted = self._vectors_counted
        return counted is not None and time.monotonic() - counted[0] < COUNTED_FOR

    def _vector_rows(self, after: int) -> Iterator[tuple[int, np.ndarray]]:
        return (
            (pid, vector.to_numpy())
            for pid, vector in self._stream(
                "SELECT id, embedding FROM passages WHERE user_id = %s AND id > %s "
                "AND embedding IS NOT NULL ORDER BY id",
                (self.user, after),
            )
        )

    def _filtered_passage_ids(self, filters: Filters) -> np.ndarray:
        where, params = _filter_sql(filters)
        rows = self._all(
            "SELECT p.id FROM passages p JOIN turns t ON t.user_id = p.user_id "
            f"AND t.id = p.turn_id WHERE p.user_id = %(u)s AND {where}",
            {"u": self.user, **params},
        )
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    # -- reads ------------------------------------------------------------------------------------------
    def turn_windows(self, windows: list[tuple[str, int | None, int | None]]) -> list[list[Turn]]:
        if not windows:
            return []
        low, high = -(2**31), 2**31 - 1  # seq is an integer column
        # each window looked up on its own (OFFSET 0 keeps the planner from flattening it): an
        # index range whatever the planner believes about a user it has no statistics for yet.
        # The windows are one JSON value: four arrays were quoted element by element in
        # Python, and a VALUES list (a placeholder a value) is parsed anew by psycopg past 50
        # placeholders (docs/scaling.md, item 12).
        bounded = [
            {
                "i": i,
                "s": sid,
                "l": low if lo is None else min(max(lo, low), high),
                "h": high if hi is None else min(max(hi, low), high),
            }
            for i, (sid, lo, hi) in enumerate(windows)
        ]
        rows = self._all(
            "SELECT w.i, t.session_id, t.turn_uuid, t.seq, t.ts, t.role, t.harness, t.blocks, "
            "t.echo FROM json_to_recordset(%s::json) AS w(i int, s text, l int, h int) "
            "CROSS JOIN LATERAL (SELECT * FROM turns WHERE user_id = %s AND session_id = w.s "
            "AND seq BETWEEN w.l AND w.h OFFSET 0) t ORDER BY w.i, t.seq, t.id",
            (json.dumps(bounded, ensure_ascii=False), self.user),
        )
        turns: list[list[Turn]] = [[] for _ in windows]
        for i, *row in rows:
            turns[i].append(_turn(tuple(row)))
        if len(self._seen) > SEEN_KEPT:
            self._seen.clear()
        self._seen.update(turn.session_id for window in turns for turn in window)
        return turns

    def sessions(self, since: datetime | None, until: datetime | None) -> list[ConversationSummary]:
        where, params = _filter_sql(Filters(since=since, until=until))
        rows = self._all(
            "SELECT t.session_id, min(t.ts), max(t.ts), count(*), "
            "(SELECT f.blocks FROM turns f WHERE f.user_id = %(u)s "
            "AND f.session_id = t.session_id ORDER BY f.seq LIMIT 1) "
            "FROM turns t WHERE t.user_id = %(u)s "
            + (f"AND {where} " if where else "")
            + "GROUP BY t.session_id ORDER BY min(t.ts), t.session_id",
            {"u": self.user, **params},
        )
        return [
            ConversationSummary(sid, _utc(first), _utc(last), count, first_words(value))
            for sid, first, last, count, value in rows
        ]

    def conversation_ref(self, session_id: str) -> str | None:
        """A conversation whose turns this store has just read (a recall names its hits'
        conversations right after reading their turns) is named from the memory's salt, as its
        row was (rows.conversation_ref), without a round trip; any other is read."""
        if session_id in self._seen and self._salt_read:
            return conversation_ref(self._salt_read, session_id)
        row = self._one(
            "SELECT ref FROM sessions WHERE user_id = %s AND session_id = %s",
            (self.user, session_id),
        )
        return row[0] if row else None

    def resolve_ref(self, ref: str) -> str | None:
        row = self._one(
            "SELECT session_id FROM sessions WHERE user_id = %s AND ref = %s", (self.user, ref)
        )
        return row[0] if row else None

    def is_empty(self) -> bool:
        return self._one("SELECT 1 FROM turns WHERE user_id = %s LIMIT 1", (self.user,)) is None

    # -- recall echoes ----------------------------------------------------------------------------
    def record_returned(
        self, turns: list[tuple[str, int]], now: datetime, keep_after: datetime
    ) -> None:
        # A hint for telling echoes, written after every recall: not waited for on disk, and
        # sent whole in one round trip (BEGIN to COMMIT). Not retried: a connection found dead
        # there may have applied it; the hint is lost, never the answer it followed. Records
        # past their window are removed once a PRUNE_EVERY (nothing reads them: returned_keys
        # asks for the window's), so a recall that showed nothing sends nothing.
        prune = time.monotonic() - self._pruned >= PRUNE_EVERY
        if not turns and not prune:
            return
        writes = [f"BEGIN; {_SCOPE}; SET LOCAL synchronous_commit = off"]
        params: list = [self.user]
        if prune:
            writes.append("DELETE FROM returned WHERE user_id = %s AND at < %s")
            params += [self.user, keep_after]
        if turns:
            # arrays, not JSON: their length is the planner's estimate, so it looks each turn
            # up (json_to_recordset's 100 rows made it hash all of a user's turns)
            # each turn's record updated to its latest return (DISTINCT: an upsert may not
            # touch one row twice)
            writes.append(
                "INSERT INTO returned AS r (user_id, turn_id, at) SELECT DISTINCT %s, t.id, %s "
                "FROM unnest(%s::text[], %s::int[]) AS k(session_id, seq) "
                "JOIN turns t ON t.user_id = %s AND t.session_id = k.session_id "
                "AND t.seq = k.seq "
                "ON CONFLICT (user_id, turn_id) DO UPDATE SET at = greatest(r.at, excluded.at)"
            )
            params += [self.user, now, [s for s, _ in turns], [q for _, q in turns], self.user]
        conn = self._pool.getconn()
        try:
            with storage_errors():
                _execute(conn, "; ".join([*writes, "COMMIT"]), tuple(params))
            if prune:
                self._pruned = time.monotonic()
        except BaseException:
            if not (conn.broken or conn.closed):
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")  # the transaction the failed message began
            raise
        finally:
            self._pool.putconn(conn)

    def returned_keys(self, since: datetime) -> set[tuple[int, str]]:
        rows = self._all(
            "SELECT t.id, t.content_hash FROM returned r JOIN turns t "
            "ON t.user_id = r.user_id AND t.id = r.turn_id WHERE r.user_id = %s AND r.at >= %s",
            (self.user, since),
        )
        return {(turn_id, digest) for turn_id, digest in rows}

    def turn_texts(self, ids: list[int]) -> list[tuple[int, str, str]]:
        rows = self._all(
            "SELECT id, content_hash, blocks FROM turns WHERE user_id = %s AND id = ANY(%s)",
            (self.user, ids),
        )
        return [(turn_id, digest, turn_text(value)) for turn_id, digest, value in rows]

    # -- forgetting (the flow is Store's) ----------------------------------------------------------
    # The rows and their index entries go in one transaction; the space they held is reused,
    # and VACUUM (docs/privacy.md) is what scrubs it from the files.
    def _conversation_ids(self, tx: psycopg.Cursor) -> list[str]:
        rows = tx.execute("SELECT session_id FROM sessions WHERE user_id = %s", (self.user,))
        return [row[0] for row in rows]

    def _conversation_ids_before(self, tx: psycopg.Cursor, before: datetime) -> list[str]:
        rows = tx.execute(
            "SELECT session_id FROM turns WHERE user_id = %s GROUP BY session_id "
            "HAVING max(ts) < %s",
            (self.user, before),
        )
        return [row[0] for row in rows]

    def _delete_conversations(self, tx: psycopg.Cursor, session_ids: list[str]) -> Forgotten:
        """Their passages (their terms, counters and saved copies go by trigger), turns (and
        the record of their being returned) and sessions."""
        self._seen.clear()  # named from their rows again (conversation_ref)
        if not session_ids:
            return Forgotten()
        vectors, passages = tx.execute(
            "SELECT count(p.embedding), count(*) FROM passages p JOIN turns t "
            "ON t.user_id = p.user_id AND t.id = p.turn_id "
            "WHERE p.user_id = %s AND t.session_id = ANY(%s::text[])",
            (self.user, session_ids),
        ).fetchone()  # type: ignore[misc]
        tx.execute(
            "DELETE FROM passages p USING turns t WHERE p.user_id = %s AND t.user_id = p.user_id "
            "AND t.id = p.turn_id AND t.session_id = ANY(%s::text[])",
            (self.user, session_ids),
        )
        turns = tx.execute(
            "DELETE FROM turns WHERE user_id = %s AND session_id = ANY(%s::text[])",
            (self.user, session_ids),
        ).rowcount
        conversations = tx.execute(
            "DELETE FROM sessions WHERE user_id = %s AND session_id = ANY(%s::text[])",
            (self.user, session_ids),
        ).rowcount
        return Forgotten(conversations, turns, passages, vectors)

    def _delete_the_rest(self, tx: psycopg.Cursor) -> int:
        memories = tx.execute("DELETE FROM memories WHERE user_id = %s", (self.user,)).rowcount
        tx.execute("DELETE FROM sources WHERE user_id = %s", (self.user,))
        tx.execute("DELETE FROM meta WHERE user_id = %s AND key = 'last_written'", (self.user,))
        return memories

    def _write_audit(self, tx: psycopg.Cursor, entry: AuditEntry) -> None:
        tx.execute(
            "INSERT INTO forget_log (user_id, at, action, actor, conversation, before, "
            "conversations, turns, passages, vectors, memories) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                self.user,
                entry.at,
                entry.action,
                entry.actor,
                entry.conversation,
                entry.before,
                *entry.forgotten.to_dict().values(),
            ),
        )

    def _audit_rows(self) -> list[tuple]:
        rows = self._all(
            "SELECT at, action, actor, conversation, before, conversations, turns, passages, "
            "vectors, memories FROM forget_log WHERE user_id = %s ORDER BY id",
            (self.user,),
        )
        return [
            (_second(at), action, actor, conversation, _second(before) if before else None, *n)
            for at, action, actor, conversation, before, *n in rows
        ]

    def _scrub(self) -> None:
        """Nothing to do at once: VACUUM, run by autovacuum or an operator, scrubs the space."""

    def status(self) -> Status:
        with self._transaction() as cur:
            turns, sessions, turn_bytes = cur.execute(
                "SELECT count(*), count(DISTINCT session_id), coalesce(sum(pg_column_size(t.*)), 0) "
                "FROM turns t WHERE user_id = %s",
                (self.user,),
            ).fetchone()  # type: ignore[misc]
            passages, embedded, passage_bytes = cur.execute(
                "SELECT count(*), count(embedding), coalesce(sum(pg_column_size(p.*)), 0) "
                "FROM passages p WHERE user_id = %s",
                (self.user,),
            ).fetchone()  # type: ignore[misc]
            (copy_bytes,) = cur.execute(
                "SELECT coalesce(sum(pg_column_size(data)), 0) FROM saved_copies "
                "WHERE user_id = %s",
                (self.user,),
            ).fetchone()  # type: ignore[misc]
            meta = dict(
                cur.execute(
                    "SELECT key, value FROM meta WHERE user_id = %s "
                    "AND key IN ('model', 'last_written')",
                    (self.user,),
                ).fetchall()
            )
        return Status(
            turns,
            sessions,
            passages,
            embedded,
            meta.get("model"),
            int(turn_bytes + passage_bytes + copy_bytes),
            meta.get("last_written"),
            {"store": "postgresql"},
        )

    # -- explicit memories --------------------------------------------------------------------------
    # (memory_write is Store's: the merge rule once, on these primitives)
    def _lock_memories(self, tx: psycopg.Cursor) -> None:
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('ireneo-memories:' || %s, 0))",
            (self.user,),
        )

    def _memories_near(
        self, tx: psycopg.Cursor, vector: np.ndarray, model: str, at_least: float
    ) -> list[StoredMemory]:
        query = _vector(vector)
        rows = tx.execute(
            "SELECT id, memory_id, terms, tags, importance, source, updates FROM memories "
            "WHERE user_id = %s AND model = %s AND -(embedding <#> %s) >= %s "
            "ORDER BY embedding <#> %s, id",
            (self.user, model, query, at_least, query),
        ).fetchall()
        return [
            StoredMemory(row, memory_id, terms, tuple(tags), importance, source, updates)
            for row, memory_id, terms, tags, importance, source, updates in rows
        ]

    def _insert_memory(
        self,
        tx: psycopg.Cursor,
        memory_id: str,
        draft: MemoryDraft,
        vector: np.ndarray,
        model: str,
        now: datetime,
    ) -> None:
        when = _second(now)
        tx.execute(
            "INSERT INTO memories (user_id, memory_id, content, terms, tags, importance, "
            "source, created_at, updated_at, model, embedding) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                self.user,
                memory_id,
                draft.content,
                draft.terms,
                list(draft.tags),
                draft.importance,
                draft.source,
                when,
                when,
                model,
                _vector(vector),
            ),
        )

    def _update_memory(
        self,
        tx: psycopg.Cursor,
        row: int,
        draft: MemoryDraft,
        vector: np.ndarray,
        model: str,
        now: datetime,
    ) -> None:
        tx.execute(
            "UPDATE memories SET content = %s, terms = %s, tags = %s, importance = %s, "
            "source = %s, updated_at = %s, updates = updates + 1, model = %s, embedding = %s "
            "WHERE user_id = %s AND id = %s",
            (
                draft.content,
                draft.terms,
                list(draft.tags),
                draft.importance,
                draft.source,
                _second(now),
                model,
                _vector(vector),
                self.user,
                row,
            ),
        )

    def memory_records(self, memory_ids: list[str] | None = None) -> list[MemoryRecord]:
        if memory_ids is not None and not memory_ids:
            return []
        rows = self._all(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE user_id = %s "
            "AND (%s::text[] IS NULL OR memory_id = ANY(%s::text[])) "
            "ORDER BY updated_at DESC, id DESC",
            (self.user, memory_ids, memory_ids),
        )
        return [_memory(row) for row in rows]

    def memory_delete(self, memory_id: str) -> bool:
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM memories WHERE user_id = %s AND memory_id = %s",
                (self.user, memory_id),
            )
            return cur.rowcount > 0

    def memory_count(self) -> int:
        row = self._one("SELECT count(*) FROM memories WHERE user_id = %s", (self.user,))
        return int(row[0]) if row else 0

    def memory_term_stats(self, terms: list[str]) -> TermStats:
        with self._transaction() as cur:
            count, total = cur.execute(
                "SELECT count(*), coalesce(sum(cardinality(lexemes)), 0) FROM memories "
                "WHERE user_id = %s",
                (self.user,),
            ).fetchone()  # type: ignore[misc]
            df = dict(
                cur.execute(
                    "SELECT l.term, count(*) FROM memories m CROSS JOIN LATERAL "
                    "(SELECT DISTINCT unnest(m.lexemes) AS term) l WHERE m.user_id = %s "
                    "AND m.lexemes && %s::text[] AND l.term = ANY(%s::text[]) GROUP BY l.term",
                    (self.user, terms, terms),
                ).fetchall()
            )
        return TermStats.counted(count, total, df)

    def memory_lexical_search(
        self, terms: list[str], limit: int, filters: MemoryFilter
    ) -> list[tuple[str, float]]:
        if not terms:
            return []
        where, params = _memory_filter_sql(filters)
        # Ranked by how many of the terms a memory holds: search.py-like scoring is memories.py's.
        return self._all(
            "SELECT m.memory_id, (SELECT count(DISTINCT l) FROM unnest(m.lexemes) AS l "
            "WHERE l = ANY(%(terms)s::text[]))::float8 AS score FROM memories m "
            "WHERE m.user_id = %(u)s AND m.lexemes && %(terms)s::text[] "
            + (f"AND {where} " if where else "")
            + "ORDER BY score DESC, m.id LIMIT %(limit)s",
            {"u": self.user, "terms": terms, "limit": limit, **params},
        )

    def memory_vectors(self, model: str, filters: MemoryFilter) -> tuple[list[str], np.ndarray]:
        where, params = _memory_filter_sql(filters)
        rows = self._all(
            "SELECT m.memory_id, m.embedding FROM memories m WHERE m.user_id = %(u)s "
            "AND m.model = %(model)s AND m.embedding IS NOT NULL "
            + (f"AND {where} " if where else "")
            + "ORDER BY m.id",
            {"u": self.user, "model": model, **params},
        )
        return id_matrix([(memory_id, vector.to_numpy()) for memory_id, vector in rows])

    def memories_unembedded(self, model: str, limit: int) -> list[tuple[str, str]]:
        return self._all(
            "SELECT memory_id, content FROM memories WHERE user_id = %s "
            "AND (embedding IS NULL OR model IS DISTINCT FROM %s) ORDER BY id LIMIT %s",
            (self.user, model, limit),
        )

    def memory_put_vectors(self, memory_ids: list[str], vectors: np.ndarray, model: str) -> None:
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._transaction() as cur:
            cur.executemany(
                "UPDATE memories SET model = %s, embedding = %s "
                "WHERE user_id = %s AND memory_id = %s",
                [(model, matrix[i], self.user, mid) for i, mid in enumerate(memory_ids)],
            )

    def memory_touch(self, memory_ids: list[str], now: datetime) -> None:
        if not memory_ids:
            return
        with self._transaction() as cur:
            cur.execute(
                "UPDATE memories SET uses = uses + 1, used_at = %s "
                "WHERE user_id = %s AND memory_id = ANY(%s::text[])",
                (_second(now), self.user, list(memory_ids)),
            )

    def memory_expire(self, updated_before: datetime) -> int:
        with self._transaction() as cur:
            cur.execute(
                "DELETE FROM memories WHERE user_id = %s AND importance = 0 AND updated_at < %s",
                (self.user, _second(updated_before)),
            )
            return cur.rowcount


# -- values in and out ----------------------------------------------------------------------------


def _second(ts: datetime) -> datetime:
    """Instants are kept to the second, in UTC, as the embedded store keeps them."""
    return ts.astimezone(UTC).replace(microsecond=0)


def _utc(ts: datetime) -> datetime:
    return ts.astimezone(UTC)


def _parsed_turn(row: tuple) -> Turn:
    sid, uuid, seq, ts, role, harness, value, echo = row
    return Turn(sid, uuid, seq, _utc(ts), role, harness, blocks(value), echo)


_turn = kept(_parsed_turn)  # the turn a row of turn_windows holds, the last ones kept


def _vector(vector: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(vector, dtype=np.float32)


def _turn_columns(
    rows: list[TurnWrite],
    echoes: frozenset[tuple[str, str]],
    *,
    with_key: bool,
) -> list[list]:
    """Column arrays of turns for an `unnest(...)` insert or update."""
    columns: list[list] = [
        [t.seq for t, _, _ in rows],
        [_second(t.ts) for t, _, _ in rows],
        [t.role for t, _, _ in rows],
        [t.harness for t, _, _ in rows],
        [blocks_json(t.blocks) for t, _, _ in rows],
        [digest for _, digest, _ in rows],
        [(t.session_id, t.turn_uuid) in echoes for t, _, _ in rows],
    ]
    if with_key:
        columns = [[t.session_id for t, _, _ in rows], [t.turn_uuid for t, _, _ in rows], *columns]
    return columns


def _filter_sql(filters: Filters) -> tuple[str, dict]:
    """A condition over `turns t` (and `passages p` for block types), values bound by name."""
    clauses, params = [], {}
    if filters.since:
        clauses.append("t.ts >= %(since)s")
        params["since"] = _second(filters.since)
    if filters.until:
        clauses.append("t.ts <= %(until)s")
        params["until"] = _second(filters.until)
    if filters.role:
        clauses.append("t.role = %(role)s")
        params["role"] = filters.role
    if filters.session_id:
        clauses.append("t.session_id = %(session_id)s")
        params["session_id"] = filters.session_id
    if filters.block_types:
        clauses.append("p.block_type = ANY(%(block_types)s::text[])")
        params["block_types"] = list(filters.block_types)
    return " AND ".join(clauses), params


_MEMORY_COLUMNS = (
    "memory_id, content, terms, tags, importance, source, created_at, updated_at, updates, uses"
)


def _memory(row: tuple) -> MemoryRecord:
    memory_id, content, terms, tags, importance, source, created, updated, updates, uses = row
    return MemoryRecord(
        memory_id,
        content,
        terms,
        tuple(tags),
        importance,
        source,
        _utc(created),
        _utc(updated),
        updates,
        uses,
    )


def _memory_filter_sql(filters: MemoryFilter) -> tuple[str, dict]:
    """A condition over `memories m`, values bound by name."""
    clauses, params = [], {}
    if filters.tags is not None:  # fails closed: an untagged memory's empty array overlaps none
        clauses.append("m.tags && %(tags)s::text[]")
        params["tags"] = list(filters.tags)
    if filters.min_importance is not None:
        clauses.append("m.importance >= %(min_importance)s")
        params["min_importance"] = filters.min_importance
    if filters.low_updated_after is not None:
        clauses.append("NOT (m.importance = 0 AND m.updated_at < %(low_after)s)")
        params["low_after"] = _second(filters.low_updated_after)
    return " AND ".join(clauses), params
