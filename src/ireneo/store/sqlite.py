"""The embedded store: one SQLite file per memory, in WAL mode.

Turns, passages with their terms, BM25's statistics and the vectors live in the same file, so one
transaction keeps them consistent: a memory killed mid-write reopens with whole turns or none.
Search reads copies kept in memory of where each passage sits and its terms (store/layout.py,
whose postings give the BM25 candidates) and of the vectors (store/vectors.py: exact dense
search); both are brought up to date from counters kept by triggers, and saved in the file after
indexing, so a fresh process starts from them (`save_copies`). Vectors are stored as float32
little-endian blobs, one per passage. Explicit memories have an FTS5 index of their own.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np

from ireneo.errors import StorageFull
from ireneo.model import ConversationSummary, Turn, format_ts, parse_ts
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
from ireneo.store.rows import blocks as _blocks
from ireneo.store.rows import blocks_json as _blocks_json
from ireneo.store.rows import conversation_ref as _ref
from ireneo.store.rows import first_words as _first_words
from ireneo.store.rows import kept, turn_text

DB_NAME = "memory.db"

WAL_LIMIT = 8 * 2**20  # bytes
# A connection's page cache, at most (SQLite's default is 2,000 KiB). Search reads its copies
# in RAM, and a warm recall reads a few dozen pages, which the system's page cache also holds:
# a smaller cache cost no CPU that could be measured, and a memory held open keeps less
# (docs/scaling.md).
PAGE_CACHE_BYTES = 256 * 1024
OPEN_BYTES = 150 * 1024  # what an open memory's connection and objects hold (measured)


# Numbered migrations, applied in order and recorded in the `migrations` table.
def _terms_json(column: str) -> str:
    """SQL turning a passage's space-separated terms into a JSON array, for json_each.

    Safe because terms never hold a quote or a backslash: analyze.py emits letters and digits.
    """
    return f"""'["' || replace({column}, ' ', '","') || '"]'"""


MIGRATIONS: list[str] = [
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE sources (
        path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
        sha256 TEXT NOT NULL, indexed_at TEXT NOT NULL
    );
    CREATE TABLE sessions (session_id TEXT PRIMARY KEY, ref TEXT NOT NULL UNIQUE);
    CREATE TABLE turns (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(session_id),
        turn_uuid TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ts TEXT NOT NULL,
        role TEXT NOT NULL,
        harness TEXT NOT NULL,
        blocks TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        UNIQUE (session_id, turn_uuid)
    );
    CREATE INDEX turns_session_seq ON turns (session_id, seq);
    CREATE INDEX turns_ts ON turns (ts);
    CREATE TABLE passages (
        id INTEGER PRIMARY KEY,
        turn_id INTEGER NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
        block_type TEXT NOT NULL,
        text TEXT NOT NULL,
        terms TEXT NOT NULL,
        term_count INTEGER NOT NULL
    );
    CREATE INDEX passages_turn ON passages (turn_id);
    CREATE TABLE vectors (
        passage_id INTEGER PRIMARY KEY REFERENCES passages(id) ON DELETE CASCADE,
        vector BLOB NOT NULL
    );
    CREATE VIRTUAL TABLE passages_fts USING fts5(
        terms, content='passages', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
    );
    CREATE VIRTUAL TABLE passages_vocab USING fts5vocab(passages_fts, 'row');
    -- Totals kept by triggers: passages and terms (BM25's average length), and vectors, so the
    -- in-memory matrix notices appends and deletions without a scan.
    CREATE TABLE corpus (
        id INTEGER PRIMARY KEY CHECK (id = 1), passages INTEGER NOT NULL, terms INTEGER NOT NULL,
        vectors INTEGER NOT NULL, vector_deletes INTEGER NOT NULL
    );
    CREATE TRIGGER vectors_ai AFTER INSERT ON vectors BEGIN
        UPDATE corpus SET vectors = vectors + 1;
    END;
    CREATE TRIGGER vectors_ad AFTER DELETE ON vectors BEGIN
        UPDATE corpus SET vectors = vectors - 1, vector_deletes = vector_deletes + 1;
    END;
    INSERT INTO corpus VALUES (1, 0, 0, 0, 0);
    CREATE TRIGGER passages_ai AFTER INSERT ON passages BEGIN
        INSERT INTO passages_fts (rowid, terms) VALUES (new.id, new.terms);
        UPDATE corpus SET passages = passages + 1, terms = terms + new.term_count;
    END;
    CREATE TRIGGER passages_ad AFTER DELETE ON passages BEGIN
        INSERT INTO passages_fts (passages_fts, rowid, terms) VALUES ('delete', old.id, old.terms);
        UPDATE corpus SET passages = passages - 1, terms = terms - old.term_count;
    END;
    """,
    # 2: explicit memories (ireneo.memories), apart from the turns: their own FTS5 index, term
    # statistics and vectors, so conversation recall does not change when memories are stored.
    # Importance is 0 low, 1 medium, 2 high. `tags` (JSON) is what is shown; `memory_tags` is
    # what filters, and an untagged memory has no row there, so a tag filter never admits it.
    """
    CREATE TABLE memories (
        id INTEGER PRIMARY KEY,
        memory_id TEXT NOT NULL UNIQUE,
        content TEXT NOT NULL,
        terms TEXT NOT NULL,
        term_count INTEGER NOT NULL,
        tags TEXT NOT NULL,
        importance INTEGER NOT NULL CHECK (importance IN (0, 1, 2)),
        source TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        updates INTEGER NOT NULL DEFAULT 0,
        uses INTEGER NOT NULL DEFAULT 0,
        used_at TEXT
    );
    CREATE INDEX memories_expiry ON memories (importance, updated_at);
    CREATE TABLE memory_tags (
        tag TEXT NOT NULL,
        memory INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        PRIMARY KEY (tag, memory)
    ) WITHOUT ROWID;
    CREATE INDEX memory_tags_memory ON memory_tags (memory);
    CREATE TABLE memory_vectors (
        memory INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        vector BLOB NOT NULL
    );
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        terms, content='memories', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
    );
    CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, 'row');
    CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, terms) VALUES (new.id, new.terms);
    END;
    CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, terms) VALUES ('delete', old.id, old.terms);
    END;
    CREATE TRIGGER memories_au AFTER UPDATE OF terms ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, terms) VALUES ('delete', old.id, old.terms);
        INSERT INTO memories_fts (rowid, terms) VALUES (new.id, new.terms);
    END;
    """,
    # 3: the audit log of forgets: what kind, by whom, how much; never any text or id.
    """
    CREATE TABLE forget_log (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        action TEXT NOT NULL,
        actor TEXT NOT NULL,
        conversation TEXT,
        before TEXT,
        conversations INTEGER NOT NULL,
        turns INTEGER NOT NULL,
        passages INTEGER NOT NULL,
        vectors INTEGER NOT NULL,
        memories INTEGER NOT NULL
    );
    """,
    # 4: recall echoes (ireneo.echoes): a flag on turns, and which turns were returned when.
    """
    ALTER TABLE turns ADD COLUMN echo INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE returned (
        turn_id INTEGER NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
        at TEXT NOT NULL
    );
    CREATE INDEX returned_at ON returned (at);
    CREATE INDEX returned_turn ON returned (turn_id);
    """,
    # 5: document frequencies in a table of their own. fts5vocab counts a term's documents by
    # walking its postings, so asking for "the" cost as much as a whole query (15 ms at 60,000
    # passages); here it is one key lookup. A term leaves the table with its last passage, so a
    # forgotten word does not stay behind.
    f"""
    CREATE TABLE term_df (term TEXT PRIMARY KEY, passages INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO term_df
        SELECT value, count(DISTINCT p.id) FROM passages p, json_each({_terms_json("p.terms")})
        WHERE value <> '' GROUP BY value;
    CREATE TRIGGER passages_df_ai AFTER INSERT ON passages BEGIN
        INSERT INTO term_df (term, passages)
            SELECT DISTINCT value, 1 FROM json_each({_terms_json("new.terms")}) WHERE value <> ''
            ON CONFLICT (term) DO UPDATE SET passages = passages + 1;
    END;
    CREATE TRIGGER passages_df_ad AFTER DELETE ON passages BEGIN
        UPDATE term_df SET passages = passages - 1
            WHERE term IN (SELECT value FROM json_each({_terms_json("old.terms")}));
        DELETE FROM term_df
            WHERE passages <= 0 AND term IN (SELECT value FROM json_each({_terms_json("old.terms")}));
    END;
    """,
    # 6: deleted passages counted, so the in-memory layout (store/layout.py) notices a deletion
    # without a scan.
    """
    ALTER TABLE corpus ADD COLUMN passage_deletes INTEGER NOT NULL DEFAULT 0;
    CREATE TRIGGER passages_counted_ad AFTER DELETE ON passages BEGIN
        UPDATE corpus SET passage_deletes = passage_deletes + 1;
    END;
    """,
    # 7: storing a passage costs less. No FTS5 index of passages: recall has ranked from the
    # layout's postings since they came (BM25 ~0.5 ms a query against FTS5's 3-5 ms), and
    # keeping the index up to date was a fifth of storing a turn. And `term_df` is counted up by
    # the writer, once a write (SQLiteStore.write_turns), not by a trigger per passage, which
    # was another fifth; a deletion still counts down by trigger.
    """
    DROP TRIGGER passages_df_ai;
    DROP TRIGGER passages_ai;
    DROP TRIGGER passages_ad;
    DROP TABLE passages_vocab;
    DROP TABLE passages_fts;
    CREATE TRIGGER passages_ai AFTER INSERT ON passages BEGIN
        UPDATE corpus SET passages = passages + 1, terms = terms + new.term_count;
    END;
    CREATE TRIGGER passages_ad AFTER DELETE ON passages BEGIN
        UPDATE corpus SET passages = passages - 1, terms = terms - old.term_count;
    END;
    """,
    # 8: the layout and the vectors' codes saved for the next process (Store.save_copies).
    # A deletion drops the saved copy it touches in its own transaction: what is forgotten does
    # not stay behind in one.
    """
    CREATE TABLE saved_copies (
        name TEXT PRIMARY KEY, rows INTEGER NOT NULL, deletes INTEGER NOT NULL, data BLOB NOT NULL
    );
    CREATE TRIGGER passages_unsave AFTER DELETE ON passages BEGIN
        DELETE FROM saved_copies WHERE name = 'layout';
    END;
    CREATE TRIGGER vectors_unsave AFTER DELETE ON vectors BEGIN
        DELETE FROM saved_copies WHERE name = 'vectors';
    END;
    """,
    # 9: one record of being returned a turn, the latest: a recall writes ~20 records, so a
    # busy memory's table grew by ~90,000 rows an hour (each written with two indexes) where
    # it holds at most one row a turn now; a record is updated, not added.
    """
    CREATE TABLE returned_latest (
        turn_id INTEGER PRIMARY KEY REFERENCES turns(id) ON DELETE CASCADE,
        at TEXT NOT NULL
    );
    INSERT INTO returned_latest SELECT turn_id, max(at) FROM returned GROUP BY turn_id;
    DROP TABLE returned;
    ALTER TABLE returned_latest RENAME TO returned;
    CREATE INDEX returned_at ON returned (at);
    """,
]


class SQLiteStore(Store[sqlite3.Connection]):
    def __init__(self, home: Path):
        home.mkdir(parents=True, exist_ok=True)
        self.path = home / DB_NAME
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            write_ahead(self._db)
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=10000")
            self._db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_BYTES // 1024}")
            # After a checkpoint the write-ahead log is cut back to this size; without it, one
            # large write (a saved copy is 40 MB at 10,000 conversations, an import more) would
            # leave the -wal file that large for as long as a server keeps the memory open.
            self._db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")
            # Deleted content is overwritten with zeros, not left in free pages: a forgotten turn
            # (or the old text of an edited one) must not stay readable in the file.
            self._db.execute("PRAGMA secure_delete=ON")
            self._migrate()
        except sqlite3.OperationalError as exc:
            self._db.close()
            if _is_full(exc):
                raise StorageFull(FULL) from exc
            raise
        self._keep_copies()
        self._pruned = -PRUNE_EVERY  # when record_returned last removed records past their window
        # the corpus row's counters as term_stats read them: (when, this connection's changes
        # then, counters), each thread's for the layout, the last read's for the vectors
        self._counted = threading.local()
        self._vectors_counted: tuple[float, int, tuple[int, int]] | None = None
        self._cache_full = False  # the file has reached PAGE_CACHE_BYTES (_page_cache_bytes)

    def __str__(self) -> str:
        return str(self.path)

    def resident_bytes(self) -> int:
        """Search's copies, SQLite's page cache (as large as the file, or as its write-ahead
        log, which holds every page a new memory wrote until it is closed; up to its limit) and
        what an open connection holds besides."""
        return super().resident_bytes() + self._page_cache_bytes() + OPEN_BYTES

    def _page_cache_bytes(self) -> int:
        # The file never shrinks (nothing here vacuums it): once it holds the cache's limit, the
        # cache may too, and no stat is needed again. The server asks after every lease, and
        # each stat gives the interpreter's lock away under load (docs/reliability.md).
        if self._cache_full:
            return PAGE_CACHE_BYTES
        size = 0
        for path in (self.path, self.path.with_name(self.path.name + "-wal")):
            with contextlib.suppress(OSError):
                size = max(size, path.stat().st_size)
                if path == self.path and size >= PAGE_CACHE_BYTES:
                    self._cache_full = True
        return min(size, PAGE_CACHE_BYTES)

    # -- plumbing ---------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self._lock:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in self._db.execute("SELECT version FROM migrations")}
            for version, script in enumerate(MIGRATIONS, start=1):
                if version in done:
                    continue
                # executescript commits first, so the migration is wrapped in its own transaction.
                # Its row goes in first: another process that opened the file at the same moment
                # and applied it meanwhile makes that insert fail, and this one rolls back.
                try:
                    self._db.executescript(
                        f"BEGIN IMMEDIATE; "
                        f"INSERT INTO migrations VALUES ({version}, datetime('now')); {script}; "
                        "COMMIT;"
                    )
                except sqlite3.IntegrityError as exc:
                    self._db.execute("ROLLBACK")
                    if "migrations.version" not in str(exc):
                        raise
            if self._get_meta("ref_salt") is None:
                self._db.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('ref_salt', ?)", (secrets.token_hex(16),)
                )

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    def _get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- metadata -------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            return self._get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._put_meta(self._db, key, value)

    def add_meta(self, key: str, value: str) -> str:
        with self._transaction() as tx:
            tx.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, value))
            return tx.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]

    # -- writes -----------------------------------------------------------------------------------
    def turn_hashes(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        with self._lock:
            stored = self._stored_turns(self._db, keys)
        return {key: digest for key, (_, digest) in stored.items()}

    # (write_turns is Store's: what each write does is decided there)
    def _stored_turns(
        self, tx: sqlite3.Connection, keys: list[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[int, str]]:
        """In a transaction, BEGIN IMMEDIATE already holds off every other writer."""
        stored: dict[tuple[str, str], tuple[int, str]] = {}
        for key in dict.fromkeys(keys):
            row = tx.execute(
                "SELECT id, content_hash FROM turns WHERE session_id = ? AND turn_uuid = ?", key
            ).fetchone()
            if row:
                stored[key] = row
        return stored

    def _write_changes(
        self,
        tx: sqlite3.Connection,
        turns: list[TurnWrite],
        changes: list[str],
        stored: dict[tuple[str, str], tuple[int, str]],
        echoes: frozenset[tuple[str, str]],
    ) -> None:
        """One turn at a time, in order."""
        salt = self._get_meta("ref_salt") or ""
        ids = {key: turn_id for key, (turn_id, _) in stored.items()}
        held: Counter[str] = Counter()  # passages stored that hold each term, not yet counted
        for (turn, content_hash, passages), change in zip(turns, changes, strict=True):
            if change == "unchanged":
                continue
            key = (turn.session_id, turn.turn_uuid)
            values = (
                turn.seq,
                format_ts(turn.ts),
                turn.role,
                turn.harness,
                _blocks_json(turn.blocks),
                content_hash,
                int(key in echoes),
            )
            if change == "replaced":
                turn_id = ids[key]
                _count_terms(tx, held)  # first: the deletion's trigger counts down
                tx.execute("DELETE FROM passages WHERE turn_id = ?", (turn_id,))
                tx.execute(
                    "UPDATE turns SET seq = ?, ts = ?, role = ?, harness = ?, blocks = ?, "
                    "content_hash = ?, echo = ? WHERE id = ?",
                    (*values, turn_id),
                )
            else:
                tx.execute(
                    "INSERT OR IGNORE INTO sessions VALUES (?, ?)",
                    (turn.session_id, _ref(salt, turn.session_id)),
                )
                turn_id = ids[key] = tx.execute(
                    "INSERT INTO turns (session_id, turn_uuid, seq, ts, role, harness, blocks, "
                    "content_hash, echo) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (turn.session_id, turn.turn_uuid, *values),
                ).lastrowid
            words = [p.terms.split() for p in passages]
            tx.executemany(
                "INSERT INTO passages (turn_id, block_type, text, terms, term_count) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (turn_id, p.block_type, p.text, p.terms, len(w))
                    for p, w in zip(passages, words, strict=True)
                ],
            )
            for passage_words in words:
                held.update(set(passage_words))
        _count_terms(tx, held)

    def _put_source(self, tx: sqlite3.Connection, source: SourceState) -> None:
        tx.execute(
            "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, datetime('now'))",
            (source.path, source.size, source.mtime_ns, source.sha256),
        )

    def _put_meta(self, tx: sqlite3.Connection, key: str, value: str) -> None:
        tx.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def source_state(self, path: str) -> SourceState | None:
        with self._lock:
            row = self._db.execute(
                "SELECT path, size, mtime_ns, sha256 FROM sources WHERE path = ?", (path,)
            ).fetchone()
        return SourceState(*row) if row else None

    def pending_passages(self, limit: int, after: int = 0) -> list[tuple[int, str]]:
        with self._lock:
            # Passages are embedded in id order, so those without a vector are usually all
            # newer than the newest vector: then the search starts there instead of passing
            # every embedded passage, once for each index run a post starts (docs/scaling.md).
            # One statement, so one snapshot; when some are older, every passage is looked at.
            pending, newest, newer = self._db.execute(_PENDING_SHAPE).fetchone()
            if newer == pending:
                after = max(after, newest)
            return self._db.execute(
                "SELECT p.id, p.text FROM passages p LEFT JOIN vectors v ON v.passage_id = p.id "
                "WHERE p.id > ? AND v.passage_id IS NULL ORDER BY p.id LIMIT ?",
                (after, limit),
            ).fetchall()

    def count_pending(self) -> int:
        """From the counters the triggers keep (as `pending_in`), not by a join over every
        passage: an index run asks it each time, and a join costs what the memory holds."""
        with self._lock:
            return int(self._db.execute(_PENDING).fetchone()[0])

    def put_vectors(self, passage_ids: list[int], vectors: np.ndarray) -> None:
        blobs = np.ascontiguousarray(vectors, dtype="<f4")
        with self._transaction() as db:
            db.executemany(
                # A passage's text never changes (an edit makes new passages), nor its vector.
                "INSERT OR IGNORE INTO vectors SELECT id, ? FROM passages WHERE id = ?",
                [(blobs[i].tobytes(), pid) for i, pid in enumerate(passage_ids)],
            )

    def drop_vectors(self) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM vectors")

    # -- search candidates ---------------------------------------------------------------------------
    def term_stats(self, terms: list[str]) -> TermStats:
        """Read in one statement with every counter of the corpus row: the layout's answer this
        thread's next `_passage_counters`, the vectors' the next `_vector_counters`, each once,
        within COUNTED_FOR seconds and while this connection has written nothing (as on
        PostgreSQL): a recall asks for the statistics, then for both copies, so one statement
        stands for four."""
        with self._lock:
            rows = self._db.execute(_STATS, (json.dumps(terms),)).fetchall()
            counted = (time.monotonic(), self._db.total_changes)
        df, corpus = {}, (0, 0, 0, 0, 0)
        for term, *values in rows:
            if term is None:
                corpus = tuple(values)
            else:
                df[term] = values[0]
        passages, total, passage_deletes, vectors, vector_deletes = corpus
        self._counted.row = (*counted, (passages, passage_deletes))
        self._vectors_counted = (*counted, (vectors, vector_deletes))
        return TermStats.counted(passages, total, df)

    def _passage_counters(self) -> tuple[int, int]:
        counted, self._counted.row = getattr(self._counted, "row", None), None
        if self._still(counted):
            return counted[2]
        with self._lock:
            return self._db.execute("SELECT passages, passage_deletes FROM corpus").fetchone()

    def _still(self, counted: tuple[float, int, tuple[int, int]] | None) -> bool:
        """Whether counters read with the statistics still stand for a read of them now."""
        return (
            counted is not None
            and time.monotonic() - counted[0] < COUNTED_FOR
            and counted[1] == self._db.total_changes
        )

    def _passage_rows(self, after: int) -> Iterator[PassageRow]:
        rows = self._stream(
            "SELECT p.id, t.session_id, t.seq, CAST(strftime('%s', t.ts) AS INTEGER), t.role, "
            "p.block_type, p.terms, t.echo FROM passages p JOIN turns t ON t.id = p.turn_id "
            "WHERE p.id > ? ORDER BY p.id",
            (after,),
        )
        return (PassageRow(*row) for row in rows)

    def _stream(self, query: str, params: tuple) -> Iterator[tuple]:
        """The rows of a long read (a memory's whole layout or vectors), fetched a chunk at a
        time: all 60,000 at once would hold ~30 MB more at the peak, which the process then
        keeps. The lock is held per chunk, so writers are not kept waiting for the whole read."""
        with self._lock:
            cursor = self._db.execute(query, params)
        while True:
            with self._lock:
                rows = cursor.fetchmany(READ_ROWS)
            if not rows:
                return
            yield from rows

    def _saved_rows(self, name: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT rows FROM saved_copies WHERE name = ?", (name,)
            ).fetchone()
        return row[0] if row else 0

    def _deletes_held(self, tx: sqlite3.Connection, name: str) -> int | None:
        """BEGIN IMMEDIATE holds off every other writer until the save commits."""
        counters = self._passage_counters if name == "layout" else self._vector_counters
        return counters()[1]

    def _put_saved(
        self, tx: sqlite3.Connection, name: str, rows: int, deletes: int, data: memoryview
    ) -> None:
        tx.execute(
            "INSERT OR REPLACE INTO saved_copies VALUES (?, ?, ?, ?)", (name, rows, deletes, data)
        )

    def _saved_data(self, name: str, deletes: int) -> bytes | None:
        with self._lock:
            row = self._db.execute(
                "SELECT rowid FROM saved_copies WHERE name = ? AND deletes = ?", (name, deletes)
            ).fetchone()
            if row is None:
                return None
            # straight into one buffer: a SELECT copies the blob twice (~10 ms at 24 MB)
            with self._db.blobopen("saved_copies", "data", row[0], readonly=True) as blob:
                return blob.read()

    def _drop_saved(self, name: str) -> None:
        try:
            with self._transaction() as db:
                db.execute("DELETE FROM saved_copies WHERE name = ?", (name,))
        except (sqlite3.Error, StorageFull):
            pass  # it stays unread, and is replaced when saved again

    def _vector_counters(self) -> tuple[int, int]:
        counted, self._vectors_counted = self._vectors_counted, None  # used once
        if self._still(counted):
            return counted[2]
        with self._lock:
            return self._db.execute("SELECT vectors, vector_deletes FROM corpus").fetchone()

    def _vector_rows(self, after: int) -> Iterator[tuple[int, np.ndarray]]:
        rows = self._stream(
            "SELECT passage_id, vector FROM vectors WHERE passage_id > ? ORDER BY passage_id",
            (after,),
        )
        return ((pid, np.frombuffer(blob, dtype="<f4")) for pid, blob in rows)

    def _filtered_passage_ids(self, filters: Filters) -> np.ndarray:
        where, params = _filter_sql(filters)
        with self._lock:
            rows = self._db.execute(
                f"SELECT p.id FROM passages p JOIN turns t ON t.id = p.turn_id WHERE {where}",
                params,
            ).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    # -- reads ------------------------------------------------------------------------------------------
    def turn_windows(self, windows: list[tuple[str, int | None, int | None]]) -> list[list[Turn]]:
        if not windows:
            return []
        bounds = [
            (sid, -(2**62) if lo is None else lo, 2**62 if hi is None else hi)
            for sid, lo, hi in windows
        ]
        # the windows as one JSON value: one statement text whatever their number, so the
        # connection's cache of prepared statements holds one (a text per count held ~9 KiB
        # each, ~135 KiB a memory after 16 recalls); json_extract, not ->> (SQLite 3.38+).
        # SQLite's JSON functions end a string at NUL, which a .funes.jsonl session_id may
        # hold: such windows are bound one value each, as they are.
        if any("\x00" in sid for sid, _, _ in bounds):
            query = (
                "WITH w(key, session_id, lo, hi) AS (VALUES "
                + ", ".join(["(?, ?, ?, ?)"] * len(bounds))
                + f") SELECT w.key, {_TURN_COLUMNS} FROM w JOIN turns t "
                "ON t.session_id = w.session_id AND t.seq BETWEEN w.lo AND w.hi "
                "ORDER BY w.key, t.seq, t.id"
            )
            params: tuple = tuple(v for i, bound in enumerate(bounds) for v in (i, *bound))
        else:
            query = (
                f"SELECT w.key, {_TURN_COLUMNS} FROM json_each(?) w JOIN turns t "
                "ON t.session_id = json_extract(w.value, '$[0]') "
                "AND t.seq BETWEEN json_extract(w.value, '$[1]') AND json_extract(w.value, '$[2]') "
                "ORDER BY w.key, t.seq, t.id"
            )
            params = (json.dumps(bounds),)
        with self._lock:
            rows = self._db.execute(query, params).fetchall()
        turns: list[list[Turn]] = [[] for _ in windows]
        for row in rows:
            turns[row[0]].append(_turn(row[1:]))
        return turns

    def sessions(self, since: datetime | None, until: datetime | None) -> list[ConversationSummary]:
        where, params = _filter_sql(Filters(since=since, until=until))
        with self._lock:
            rows = self._db.execute(
                "SELECT t.session_id, min(t.ts), max(t.ts), count(*), "
                "(SELECT blocks FROM turns f WHERE f.session_id = t.session_id ORDER BY seq LIMIT 1) "
                "FROM turns t "
                + (f"WHERE {where} " if where else "")
                + "GROUP BY t.session_id ORDER BY min(t.ts), t.session_id",
                params,
            ).fetchall()
        return [
            ConversationSummary(sid, parse_ts(first), parse_ts(last), count, _first_words(blocks))
            for sid, first, last, count, blocks in rows
        ]

    def conversation_ref(self, session_id: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT ref FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        return row[0] if row else None

    def resolve_ref(self, ref: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT session_id FROM sessions WHERE ref = ?", (ref,)
            ).fetchone()
        return row[0] if row else None

    def is_empty(self) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM turns LIMIT 1").fetchone() is None

    # -- recall echoes ------------------------------------------------------------------------------
    def record_returned(
        self, turns: list[tuple[str, int]], now: datetime, keep_after: datetime
    ) -> None:
        # What recall showed is a hint for telling echoes, written after every recall: it is
        # committed without waiting for the disk (the next durable commit or checkpoint writes
        # it; a power cut may lose the last few). A sync each was costly: docs/scaling.md.
        # One statement for the turns (each turn's record updated to its latest return), and
        # records past their window removed once a PRUNE_EVERY, not by every recall.
        prune = time.monotonic() - self._pruned >= PRUNE_EVERY
        if not turns and not prune:
            return
        when = format_ts(now)
        with self._lock:
            self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                with self._transaction() as db:
                    if prune:
                        db.execute("DELETE FROM returned WHERE at < ?", (format_ts(keep_after),))
                    if any("\x00" in session_id for session_id, _ in turns):  # see turn_windows
                        db.executemany(_RETURNED_ONE, [(when, *turn) for turn in turns])
                    elif turns:
                        db.execute(_RETURNED, (when, json.dumps(turns)))
            finally:
                self._db.execute("PRAGMA synchronous=FULL")
            if prune:
                self._pruned = time.monotonic()

    def returned_keys(self, since: datetime) -> set[tuple[int, str]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT t.id, t.content_hash FROM returned r JOIN turns t ON t.id = r.turn_id "
                "WHERE r.at >= ?",
                (format_ts(since),),
            ).fetchall()
        return set(rows)

    def turn_texts(self, ids: list[int]) -> list[tuple[int, str, str]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, content_hash, blocks FROM turns "
                "WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            ).fetchall()
        return [(turn_id, digest, turn_text(value)) for turn_id, digest, value in rows]

    # -- forgetting (the flow is Store's) -------------------------------------------------------
    def _conversation_ids(self, tx: sqlite3.Connection) -> list[str]:
        return [row[0] for row in tx.execute("SELECT session_id FROM sessions")]

    def _conversation_ids_before(self, tx: sqlite3.Connection, before: datetime) -> list[str]:
        return [
            row[0]
            for row in tx.execute(
                "SELECT session_id FROM turns GROUP BY session_id HAVING max(ts) < ?",
                (format_ts(before),),
            )
        ]

    def _delete_conversations(self, tx: sqlite3.Connection, session_ids: list[str]) -> Forgotten:
        """Their vectors, passages (term counts and saved copies go by trigger), turns (and the
        record of their being returned, by cascade) and sessions."""
        conversations = turns = passages = vectors = 0
        passages_of = (
            "SELECT p.id FROM passages p JOIN turns t ON t.id = p.turn_id WHERE t.session_id = ?"
        )
        for session_id in session_ids:
            vectors += tx.execute(
                f"DELETE FROM vectors WHERE passage_id IN ({passages_of})", (session_id,)
            ).rowcount
            passages += tx.execute(
                "DELETE FROM passages WHERE turn_id IN (SELECT id FROM turns WHERE session_id = ?)",
                (session_id,),
            ).rowcount
            turns += tx.execute("DELETE FROM turns WHERE session_id = ?", (session_id,)).rowcount
            conversations += tx.execute(
                "DELETE FROM sessions WHERE session_id = ?", (session_id,)
            ).rowcount
        return Forgotten(conversations, turns, passages, vectors)

    def _delete_the_rest(self, tx: sqlite3.Connection) -> int:
        """Also merges the memories' full-text index into one segment: an FTS5 delete only adds
        a tombstone, and the deleted terms stay in the older segments until merged away."""
        memories = tx.execute("DELETE FROM memories").rowcount
        tx.execute("DELETE FROM sources")
        tx.execute("DELETE FROM meta WHERE key = 'last_written'")
        tx.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
        return memories

    def _write_audit(self, tx: sqlite3.Connection, entry: AuditEntry) -> None:
        tx.execute(
            "INSERT INTO forget_log (at, action, actor, conversation, before, conversations, "
            "turns, passages, vectors, memories) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                format_ts(entry.at),
                entry.action,
                entry.actor,
                entry.conversation,
                format_ts(entry.before) if entry.before else None,
                *entry.forgotten.to_dict().values(),
            ),
        )

    def _audit_rows(self) -> list[tuple]:
        with self._lock:
            rows = self._db.execute(
                "SELECT at, action, actor, conversation, before, conversations, turns, passages, "
                "vectors, memories FROM forget_log ORDER BY id"
            ).fetchall()
        return [
            (parse_ts(at), action, actor, conversation, parse_ts(before) if before else None, *n)
            for at, action, actor, conversation, before, *n in rows
        ]

    def _scrub(self) -> None:
        """Copy the WAL into the database and truncate it: the pages written before the forget
        (which hold the text) leave the -wal file."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def status(self) -> Status:
        with self._lock:
            turns, sessions = self._db.execute(
                "SELECT count(*), count(DISTINCT session_id) FROM turns"
            ).fetchone()
            passages = self._db.execute("SELECT count(*) FROM passages").fetchone()[0]
            embedded = self._db.execute("SELECT count(*) FROM vectors").fetchone()[0]
            model = self._get_meta("model")
            last = self._get_meta("last_written")
        disk = sum(p.stat().st_size for p in self.path.parent.glob(DB_NAME + "*") if p.is_file())
        return Status(turns, sessions, passages, embedded, model, disk, last)

    # -- explicit memories --------------------------------------------------------------------------
    # (memory_write is Store's: the merge rule once, on these primitives)
    def _lock_memories(self, tx: sqlite3.Connection) -> None:
        """Nothing more to do: BEGIN IMMEDIATE already makes the transaction the only writer."""

    def _memories_near(
        self, tx: sqlite3.Connection, vector: np.ndarray, model: str, at_least: float
    ) -> list[StoredMemory]:
        rows = tx.execute(
            "SELECT memory, vector FROM memory_vectors WHERE model = ?", (model,)
        ).fetchall()
        if not rows:
            return []
        scores = np.vstack([np.frombuffer(blob, dtype="<f4") for _, blob in rows]) @ vector
        near = []
        for i in np.argsort(-scores, kind="stable"):
            if scores[i] < at_least:
                break
            stored = tx.execute(
                "SELECT memory_id, terms, tags, importance, source, updates FROM memories "
                "WHERE id = ?",
                (rows[i][0],),
            ).fetchone()
            if stored is not None:
                memory_id, terms, tags, importance, source, updates = stored
                near.append(
                    StoredMemory(
                        rows[i][0],
                        memory_id,
                        terms,
                        tuple(json.loads(tags)),
                        importance,
                        source,
                        updates,
                    )
                )
        return near

    def _insert_memory(
        self,
        tx: sqlite3.Connection,
        memory_id: str,
        draft: MemoryDraft,
        vector: np.ndarray,
        model: str,
        now: datetime,
    ) -> None:
        when = format_ts(now)
        rowid = tx.execute(
            "INSERT INTO memories (memory_id, content, terms, term_count, tags, importance, "
            "source, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                memory_id,
                draft.content,
                draft.terms,
                len(draft.terms.split()),
                json.dumps(draft.tags, ensure_ascii=False),
                draft.importance,
                draft.source,
                when,
                when,
            ),
        ).lastrowid
        _write_memory_tags(tx, rowid, draft.tags)
        tx.execute("INSERT INTO memory_vectors VALUES (?, ?, ?)", (rowid, model, _blob(vector)))

    def _update_memory(
        self,
        tx: sqlite3.Connection,
        row: int,
        draft: MemoryDraft,
        vector: np.ndarray,
        model: str,
        now: datetime,
    ) -> None:
        tx.execute(
            "UPDATE memories SET content = ?, terms = ?, term_count = ?, tags = ?, "
            "importance = ?, source = ?, updated_at = ?, updates = updates + 1 WHERE id = ?",
            (
                draft.content,
                draft.terms,
                len(draft.terms.split()),
                json.dumps(draft.tags, ensure_ascii=False),
                draft.importance,
                draft.source,
                format_ts(now),
                row,
            ),
        )
        _write_memory_tags(tx, row, draft.tags)
        tx.execute(
            "INSERT OR REPLACE INTO memory_vectors VALUES (?, ?, ?)", (row, model, _blob(vector))
        )

    def memory_records(self, memory_ids: list[str] | None = None) -> list[MemoryRecord]:
        sql = f"SELECT {_MEMORY_COLUMNS} FROM memories m"
        params: list = []
        if memory_ids is not None:
            if not memory_ids:
                return []
            sql += f" WHERE m.memory_id IN ({','.join('?' * len(memory_ids))})"
            params = list(memory_ids)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY m.updated_at DESC, m.id DESC", params)
            return [_memory(row) for row in rows.fetchall()]

    def memory_delete(self, memory_id: str) -> bool:
        with self._transaction() as db:
            return db.execute("DELETE FROM memories WHERE memory_id = ?", (memory_id,)).rowcount > 0

    def memory_count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM memories").fetchone()[0]

    def memory_term_stats(self, terms: list[str]) -> TermStats:
        marks = ",".join("?" * len(terms))
        with self._lock:
            count, total = self._db.execute(
                "SELECT count(*), coalesce(sum(term_count), 0) FROM memories"
            ).fetchone()
            df = dict(
                self._db.execute(
                    f"SELECT term, doc FROM memories_vocab WHERE term IN ({marks})", terms
                )
            )
        return TermStats.counted(count, total, df)

    def memory_lexical_search(
        self, terms: list[str], limit: int, filters: MemoryFilter
    ) -> list[tuple[str, float]]:
        if not terms:
            return []
        where, params = _memory_filter_sql(filters)
        sql = (
            "SELECT m.memory_id, -bm25(memories_fts) FROM memories_fts "
            "JOIN memories m ON m.id = memories_fts.rowid WHERE memories_fts MATCH ? "
            + (f"AND {where} " if where else "")
            + "ORDER BY bm25(memories_fts) LIMIT ?"
        )
        with self._lock:
            return self._db.execute(sql, (_match(terms), *params, limit)).fetchall()

    def memory_vectors(self, model: str, filters: MemoryFilter) -> tuple[list[str], np.ndarray]:
        where, params = _memory_filter_sql(filters)
        with self._lock:
            rows = self._db.execute(
                "SELECT m.memory_id, v.vector FROM memory_vectors v JOIN memories m ON m.id = v.memory "
                "WHERE v.model = ? " + (f"AND {where} " if where else "") + "ORDER BY m.id",
                (model, *params),
            ).fetchall()
        return id_matrix([(mid, np.frombuffer(blob, dtype="<f4")) for mid, blob in rows])

    def memories_unembedded(self, model: str, limit: int) -> list[tuple[str, str]]:
        with self._lock:
            return self._db.execute(
                "SELECT m.memory_id, m.content FROM memories m LEFT JOIN memory_vectors v "
                "ON v.memory = m.id AND v.model = ? WHERE v.memory IS NULL ORDER BY m.id LIMIT ?",
                (model, limit),
            ).fetchall()

    def memory_put_vectors(self, memory_ids: list[str], vectors: np.ndarray, model: str) -> None:
        blobs = np.ascontiguousarray(vectors, dtype="<f4")
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO memory_vectors SELECT id, ?, ? FROM memories "
                "WHERE memory_id = ?",
                [(model, blobs[i].tobytes(), mid) for i, mid in enumerate(memory_ids)],
            )

    def memory_touch(self, memory_ids: list[str], now: datetime) -> None:
        if not memory_ids:
            return
        with self._transaction() as db:
            db.executemany(
                "UPDATE memories SET uses = uses + 1, used_at = ? WHERE memory_id = ?",
                [(format_ts(now), mid) for mid in memory_ids],
            )

    def memory_expire(self, updated_before: datetime) -> int:
        with self._transaction() as db:
            return db.execute(
                "DELETE FROM memories WHERE importance = 0 AND updated_at < ?",
                (format_ts(updated_before),),
            ).rowcount


# How many passages have no vector: the triggers count both tables (a vector's passage always
# exists: foreign keys are on, and deleting a passage deletes its vector).
_PENDING = "SELECT passages - vectors FROM corpus"
# With it, the newest passage that has a vector and how many passages are newer than it: when
# these are the pending ones, none is older.
_PENDING_SHAPE = (
    "SELECT c.passages - c.vectors, n.newest, "
    "(SELECT count(*) FROM passages WHERE id > n.newest) "
    "FROM corpus c, (SELECT coalesce(max(passage_id), 0) AS newest FROM vectors) n"
)


def pending_in(home: Path) -> int:
    """How many passages of the memory in `home` have no vector yet (0 when it has no file),
    from the counters the triggers keep: one read-only query, without opening the memory (no
    migration, no copies, no connection kept), so a server can find the few memories with work
    among thousands."""
    path = home / DB_NAME
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        db.execute("PRAGMA busy_timeout=10000")
        row = db.execute(_PENDING).fetchone()
    return int(row[0]) if row else 0


def expirable_in(home: Path, updated_before: datetime) -> bool:
    """Whether the memory in `home` has a low-importance explicit memory not updated since
    `updated_before` (what `memory_expire` removes), read without opening the memory."""
    path = home / DB_NAME
    if not path.exists():
        return False
    with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        db.execute("PRAGMA busy_timeout=10000")
        row = db.execute(
            "SELECT EXISTS (SELECT 1 FROM memories WHERE importance = 0 AND updated_at < ?)",
            (format_ts(updated_before),),
        ).fetchone()
    return bool(row and row[0])


def _count_terms(db: sqlite3.Connection, held: Counter[str]) -> None:
    """Add to `term_df` the passages stored that hold each term, and clear `held`: one upsert
    per distinct term of a write, where a trigger per passage took a fifth of storing it."""
    db.executemany(
        "INSERT INTO term_df (term, passages) VALUES (?, ?) "
        "ON CONFLICT (term) DO UPDATE SET passages = passages + excluded.passages",
        held.items(),
    )
    held.clear()


class _Transaction:
    """`BEGIN IMMEDIATE … COMMIT` under the store's lock; rolled back on any exception."""

    def __init__(self, db: sqlite3.Connection, lock: threading.RLock):
        self.db, self.lock = db, lock

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException:
            # "database is locked": another process kept the file's write lock past the busy
            # timeout. `__exit__` will not run, so the lock is given back here, or every other
            # thread of this process would wait on the memory for ever (docs/reliability.md).
            self.lock.release()
            raise
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is not None:
                if self.db.in_transaction:  # SQLite may have rolled back already (on FULL)
                    self.db.execute("ROLLBACK")
                if _is_full(exc):
                    raise StorageFull(FULL) from exc
                return
            try:
                self.db.execute("COMMIT")
            except sqlite3.OperationalError as failed:
                if self.db.in_transaction:  # a failed COMMIT leaves the transaction open
                    self.db.execute("ROLLBACK")
                if _is_full(failed):
                    raise StorageFull(FULL) from failed
                raise
        finally:
            self.lock.release()


FULL = "the memory's disk is full; nothing of the write was stored"


def write_ahead(db: sqlite3.Connection, wait: float = 10.0) -> None:
    """Put the file `db` opened in WAL mode. Two processes opening a new file at once (two
    workers: a user's first posts, the inspector's sign-ins) both switch it, and SQLite answers
    the one that finds the other switching "database is locked" at once, without waiting on its
    busy handler (4 of 14 simultaneous opens): so the switch is tried again for `wait` s."""
    deadline = time.monotonic() + wait
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _is_full(exc: BaseException | None) -> bool:
    """SQLite's "database or disk is full" (the disk, or a max_page_count quota)."""
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


COUNTED_FOR = 0.5  # seconds counters read with the statistics stand for a new read
# BM25's statistics and the copies' counters (the corpus row, its term NULL), then each term's
# document frequency
_STATS = (
    "SELECT NULL, passages, terms, passage_deletes, vectors, vector_deletes FROM corpus "
    "UNION ALL SELECT term, passages, 0, 0, 0, 0 FROM term_df "
    "WHERE term IN (SELECT value FROM json_each(?))"
)
# A turn's record of being returned: its latest return kept (record_returned).
_RETURNED_UPSERT = " ON CONFLICT (turn_id) DO UPDATE SET at = max(at, excluded.at)"
_RETURNED = (
    "INSERT INTO returned (turn_id, at) SELECT t.id, ? FROM json_each(?) w JOIN turns t "
    "ON t.session_id = json_extract(w.value, '$[0]') AND t.seq = json_extract(w.value, '$[1]') "
    "WHERE true" + _RETURNED_UPSERT  # WHERE: SQLite parses ON CONFLICT after a join only so
)
_RETURNED_ONE = (
    "INSERT INTO returned (turn_id, at) SELECT id, ? FROM turns WHERE session_id = ? AND seq = ?"
    + _RETURNED_UPSERT
)


_TURN_COLUMNS = "t.session_id, t.turn_uuid, t.seq, t.ts, t.role, t.harness, t.blocks, t.echo"


def _parsed_turn(row: tuple) -> Turn:
    session_id, turn_uuid, seq, ts, role, harness, blocks, echo = row
    return Turn(
        session_id, turn_uuid, seq, parse_ts(ts), role, harness, _blocks(blocks), bool(echo)
    )


_turn = kept(_parsed_turn)  # the turn a row of _TURN_COLUMNS holds, the last ones kept


def _match(terms: list[str]) -> str:
    """An FTS5 query matching any of the terms; each is quoted, so nothing in it is syntax."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def _filter_sql(filters: Filters) -> tuple[str, list]:
    """A WHERE clause over `turns t` (and `passages p` for block types), values bound."""
    clauses, params = [], []
    if filters.since:
        clauses.append("t.ts >= ?")
        params.append(format_ts(filters.since))
    if filters.until:
        clauses.append("t.ts <= ?")
        params.append(format_ts(filters.until))
    if filters.role:
        clauses.append("t.role = ?")
        params.append(filters.role)
    if filters.session_id:
        clauses.append("t.session_id = ?")
        params.append(filters.session_id)
    if filters.block_types:
        clauses.append(f"p.block_type IN ({','.join('?' * len(filters.block_types))})")
        params.extend(filters.block_types)
    return " AND ".join(clauses), params


# -- explicit memories ------------------------------------------------------------------------------

_MEMORY_COLUMNS = (
    "m.memory_id, m.content, m.terms, m.tags, m.importance, m.source, m.created_at, "
    "m.updated_at, m.updates, m.uses"
)


def _memory(row: tuple) -> MemoryRecord:
    memory_id, content, terms, tags, importance, source, created, updated, updates, uses = row
    return MemoryRecord(
        memory_id,
        content,
        terms,
        tuple(json.loads(tags)),
        importance,
        source,
        parse_ts(created),
        parse_ts(updated),
        updates,
        uses,
    )


def _blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def _write_memory_tags(db: sqlite3.Connection, rowid: int, tags: tuple[str, ...]) -> None:
    db.execute("DELETE FROM memory_tags WHERE memory = ?", (rowid,))
    db.executemany("INSERT INTO memory_tags VALUES (?, ?)", [(tag, rowid) for tag in tags])


def _memory_filter_sql(filters: MemoryFilter) -> tuple[str, list]:
    """A WHERE clause over `memories m`, values bound."""
    clauses, params = [], []
    if filters.tags is not None:  # fails closed: an untagged memory has no memory_tags row
        clauses.append(
            "EXISTS (SELECT 1 FROM memory_tags mt WHERE mt.memory = m.id "
            f"AND mt.tag IN ({','.join('?' * len(filters.tags))}))"
        )
        params.extend(filters.tags)
    if filters.min_importance is not None:
        clauses.append("m.importance >= ?")
        params.append(filters.min_importance)
    if filters.low_updated_after is not None:
        clauses.append("NOT (m.importance = 0 AND m.updated_at < ?)")
        params.append(format_ts(filters.low_updated_after))
    return " AND ".join(clauses), params
