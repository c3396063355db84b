"""The PostgreSQL store's schema: numbered migrations, applied by the tables' owner.

Every user's rows live in the same tables of the `ireneo` schema, with `user_id` (the server's
user key, a hash: never the user's own id) leading every primary key and index, so the tables can
be distributed by `user_id` (Citus) without change. Isolation is the database's: every table has
Row-Level Security, forced on its owner too, admitting only the rows whose `user_id` is the
transaction's `app.user_id` (set with `set_config(..., true)`); with none set nothing is seen.
The exceptions are `users` (which users have a memory) and `index_jobs` (the indexer's queue):
they hold user keys and counters only, and every replica must read them whole to find work.

`upgrade(owner_url, app_role)` applies what is missing, then grants the application role (which
must not own the tables) what it needs. pgvector's `vector` extension is not a trusted
extension: a superuser creates it once (`CREATE EXTENSION vector`) if the owner cannot.
"""

from __future__ import annotations

import re

from ireneo.extras import missing

try:
    import psycopg
    from psycopg import sql
except ImportError as exc:
    raise missing("postgres", "a PostgreSQL database", exc) from None

SCHEMA = "ireneo"
DEFAULT_APP_ROLE = "ireneo_app"

# Tables that hold one user's rows; each gets the same forced policy (_policies) when created.
USER_TABLES = (
    "meta",
    "sources",
    "sessions",
    "turns",
    "passages",
    "corpus",
    "term_df",
    "memories",
    "forget_log",
    "returned",
    "saved_copies",
)

_USER_POLICY = """
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY {table}_by_user ON {table}
    USING (user_id = current_setting('app.user_id', true))
    WITH CHECK (user_id = current_setting('app.user_id', true));
"""


def _policies(*tables: str) -> str:
    return "".join(_USER_POLICY.format(table=table) for table in tables)


MIGRATIONS: list[str] = [
    # 1: conversations, their passages with search terms and vectors, and explicit memories.
    # `lexemes` are the passage's analysed terms (ireneo.analyze: identifiers already normalised)
    # as an array; `passage_terms` is their inverted index (user, term, passage, count), and
    # `term_df` and `corpus` keep BM25's statistics per user, all maintained by statement
    # triggers, so term_stats reads a few rows. Why not a GIN index on `lexemes`: under
    # Row-Level Security a condition whose operator is not leakproof (array `&&` is not) cannot
    # be used in an index scan, so the GIN index would only find the user's rows; `term = ANY`
    # on a b-tree (text equality is leakproof) is used whole.
    """
    CREATE TABLE meta (
        user_id text NOT NULL, key text NOT NULL, value text NOT NULL,
        PRIMARY KEY (user_id, key)
    );
    CREATE TABLE sources (
        user_id text NOT NULL, path text NOT NULL, size bigint NOT NULL, mtime_ns bigint NOT NULL,
        sha256 text NOT NULL, indexed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (user_id, path)
    );
    CREATE TABLE sessions (
        user_id text NOT NULL, session_id text NOT NULL, ref text NOT NULL,
        PRIMARY KEY (user_id, session_id), UNIQUE (user_id, ref)
    );
    CREATE TABLE turns (
        user_id text NOT NULL,
        id bigint GENERATED ALWAYS AS IDENTITY,
        session_id text NOT NULL,
        turn_uuid text NOT NULL,
        seq integer NOT NULL,
        ts timestamptz NOT NULL,
        role text NOT NULL,
        harness text NOT NULL,
        blocks text NOT NULL,
        content_hash text NOT NULL,
        PRIMARY KEY (user_id, id),
        UNIQUE (user_id, session_id, turn_uuid),
        FOREIGN KEY (user_id, session_id) REFERENCES sessions (user_id, session_id)
    );
    CREATE INDEX turns_session_seq ON turns (user_id, session_id, seq);
    CREATE INDEX turns_ts ON turns (user_id, ts);
    CREATE TABLE passages (
        user_id text NOT NULL,
        id bigint GENERATED ALWAYS AS IDENTITY,
        turn_id bigint NOT NULL,
        block_type text NOT NULL,
        text text NOT NULL,
        terms text NOT NULL,
        lexemes text[] GENERATED ALWAYS AS (string_to_array(terms, ' ')) STORED,
        embedding vector,
        PRIMARY KEY (user_id, id),
        FOREIGN KEY (user_id, turn_id) REFERENCES turns (user_id, id) ON DELETE CASCADE
    );
    CREATE INDEX passages_turn ON passages (user_id, turn_id);
    CREATE TABLE passage_terms (
        user_id text NOT NULL, term text NOT NULL, passage_id bigint NOT NULL,
        tf integer NOT NULL, length integer NOT NULL,  -- the passage's terms, for BM25
        PRIMARY KEY (user_id, term, passage_id)
    );
    CREATE INDEX passages_pending ON passages (user_id, id) WHERE embedding IS NULL;
    -- vectors and vector_deletes let each replica's in-memory copy of a user's vectors notice
    -- appends and deletions without a scan (PostgresStore.vectors).
    CREATE TABLE corpus (
        user_id text PRIMARY KEY, passages bigint NOT NULL, terms bigint NOT NULL,
        vectors bigint NOT NULL DEFAULT 0, vector_deletes bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE term_df (
        user_id text NOT NULL, term text NOT NULL, docs bigint NOT NULL,
        PRIMARY KEY (user_id, term)
    );
    -- Rows of one statement, one user's: the corpus row is locked first, so two writers of
    -- one user queue there instead of deadlocking over term rows.
    CREATE FUNCTION passages_counted() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE sign integer := CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END;
    BEGIN
        INSERT INTO corpus AS c (user_id, passages, terms)
            SELECT user_id, sign * count(*), sign * coalesce(sum(cardinality(lexemes)), 0)
            FROM changed GROUP BY user_id ORDER BY user_id
        ON CONFLICT (user_id) DO UPDATE
            SET passages = c.passages + excluded.passages, terms = c.terms + excluded.terms;
        INSERT INTO term_df AS d (user_id, term, docs)
            SELECT p.user_id, l.term, sign * count(DISTINCT p.id)
            FROM changed p CROSS JOIN LATERAL unnest(p.lexemes) AS l(term)
            GROUP BY p.user_id, l.term ORDER BY p.user_id, l.term
        ON CONFLICT (user_id, term) DO UPDATE SET docs = d.docs + excluded.docs;
        IF sign > 0 THEN
            INSERT INTO passage_terms (user_id, term, passage_id, tf, length)
                SELECT p.user_id, l.term, p.id, count(*), cardinality(p.lexemes)
                FROM changed p CROSS JOIN LATERAL unnest(p.lexemes) AS l(term)
                GROUP BY p.user_id, l.term, p.id, cardinality(p.lexemes);
        ELSE
            DELETE FROM passage_terms t USING changed p
            WHERE t.user_id = p.user_id AND t.term = ANY(p.lexemes) AND t.passage_id = p.id;
            UPDATE corpus c SET vectors = c.vectors - v.n, vector_deletes = c.vector_deletes + v.n
            FROM (SELECT user_id, count(embedding) AS n FROM changed GROUP BY user_id) v
            WHERE c.user_id = v.user_id AND v.n > 0;
            DELETE FROM term_df d USING (SELECT DISTINCT user_id FROM changed) u
            WHERE d.user_id = u.user_id AND d.docs <= 0;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER passages_added AFTER INSERT ON passages
        REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION passages_counted();
    CREATE TRIGGER passages_removed AFTER DELETE ON passages
        REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION passages_counted();

    -- Explicit memories (ireneo.memories): importance 0 low, 1 medium, 2 high; `tags` in the
    -- order shown; an untagged memory has none, so a tag filter never admits it.
    CREATE TABLE memories (
        user_id text NOT NULL,
        id bigint GENERATED ALWAYS AS IDENTITY,
        memory_id text NOT NULL,
        content text NOT NULL,
        terms text NOT NULL,
        lexemes text[] GENERATED ALWAYS AS (string_to_array(terms, ' ')) STORED,
        tags text[] NOT NULL,
        importance smallint NOT NULL CHECK (importance IN (0, 1, 2)),
        source text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        updates integer NOT NULL DEFAULT 0,
        uses integer NOT NULL DEFAULT 0,
        used_at timestamptz,
        model text,
        embedding vector,
        PRIMARY KEY (user_id, id),
        UNIQUE (user_id, memory_id)
    );
    CREATE INDEX memories_expiry ON memories (user_id, importance, updated_at);

    -- The indexer's queue: a row while a user has passages waiting for vectors. Written by the
    -- same transaction that stores them, so no work is lost with a replica.
    CREATE TABLE index_jobs (
        user_id text PRIMARY KEY,
        requested_at timestamptz NOT NULL DEFAULT now(),
        generation bigint NOT NULL DEFAULT 1
    );
    CREATE FUNCTION passages_need_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO index_jobs AS j (user_id)
            SELECT DISTINCT user_id FROM changed ORDER BY user_id
        ON CONFLICT (user_id) DO UPDATE SET generation = j.generation + 1;
        RETURN NULL;
    END $$;
    CREATE TRIGGER passages_queued AFTER INSERT ON passages
        REFERENCING NEW TABLE AS changed FOR EACH STATEMENT
        EXECUTE FUNCTION passages_need_vectors();
    ALTER TABLE index_jobs ENABLE ROW LEVEL SECURITY;
    ALTER TABLE index_jobs FORCE ROW LEVEL SECURITY;
    CREATE POLICY index_jobs_queue ON index_jobs USING (true) WITH CHECK (true);

    -- Who has a memory: what the periodic jobs (memory expiry) go through.
    CREATE TABLE users (user_id text PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now());
    ALTER TABLE users ENABLE ROW LEVEL SECURITY;
    ALTER TABLE users FORCE ROW LEVEL SECURITY;
    CREATE POLICY users_listed ON users USING (true)
        WITH CHECK (user_id = current_setting('app.user_id', true));
    """
    + _policies(
        "meta", "sources", "sessions", "turns", "passages", "passage_terms", "corpus", "term_df"
    )
    + _policies("memories"),
    # 2: the audit log of forgets (what kind, by whom, how much; never any text or id), and
    # recall echoes (ireneo.echoes): a flag on turns, and which turns were returned when.
    """
    CREATE TABLE forget_log (
        user_id text NOT NULL,
        id bigint GENERATED ALWAYS AS IDENTITY,
        at timestamptz NOT NULL,
        action text NOT NULL,
        actor text NOT NULL,
        conversation text,
        before timestamptz,
        conversations integer NOT NULL,
        turns integer NOT NULL,
        passages integer NOT NULL,
        vectors integer NOT NULL,
        memories integer NOT NULL,
        PRIMARY KEY (user_id, id)
    );
    ALTER TABLE turns ADD COLUMN echo boolean NOT NULL DEFAULT false;
    CREATE TABLE returned (
        user_id text NOT NULL,
        turn_id bigint NOT NULL,
        at timestamptz NOT NULL,
        FOREIGN KEY (user_id, turn_id) REFERENCES turns (user_id, id) ON DELETE CASCADE
    );
    CREATE INDEX returned_at ON returned (user_id, at);
    CREATE INDEX returned_turn ON returned (user_id, turn_id);
    """
    + _policies("forget_log", "returned"),
    # 3: deleted passages counted, so each replica's in-memory layout of a user's passages
    # (store/layout.py) notices a deletion without a scan. Named to fire before
    # passages_removed, so the corpus row is still the first row a writer locks.
    """
    ALTER TABLE corpus ADD COLUMN passage_deletes bigint NOT NULL DEFAULT 0;
    CREATE FUNCTION passages_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE corpus c SET passage_deletes = c.passage_deletes + d.n
        FROM (SELECT user_id, count(*) AS n FROM changed GROUP BY user_id ORDER BY user_id) d
        WHERE c.user_id = d.user_id;
        RETURN NULL;
    END $$;
    CREATE TRIGGER passages_deleted AFTER DELETE ON passages
        REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION passages_deleted();
    """,
    # 4: no inverted index of passages in SQL. Recall ranks from each replica's layout
    # (store/layout.py), and writing a row per term of every passage was most of storing one.
    """
    CREATE OR REPLACE FUNCTION passages_counted() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE sign integer := CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END;
    BEGIN
        INSERT INTO corpus AS c (user_id, passages, terms)
            SELECT user_id, sign * count(*), sign * coalesce(sum(cardinality(lexemes)), 0)
            FROM changed GROUP BY user_id ORDER BY user_id
        ON CONFLICT (user_id) DO UPDATE
            SET passages = c.passages + excluded.passages, terms = c.terms + excluded.terms;
        INSERT INTO term_df AS d (user_id, term, docs)
            SELECT p.user_id, l.term, sign * count(DISTINCT p.id)
            FROM changed p CROSS JOIN LATERAL unnest(p.lexemes) AS l(term)
            GROUP BY p.user_id, l.term ORDER BY p.user_id, l.term
        ON CONFLICT (user_id, term) DO UPDATE SET docs = d.docs + excluded.docs;
        IF sign < 0 THEN
            UPDATE corpus c SET vectors = c.vectors - v.n, vector_deletes = c.vector_deletes + v.n
            FROM (SELECT user_id, count(embedding) AS n FROM changed GROUP BY user_id) v
            WHERE c.user_id = v.user_id AND v.n > 0;
            DELETE FROM term_df d USING (SELECT DISTINCT user_id FROM changed) u
            WHERE d.user_id = u.user_id AND d.docs <= 0;
        END IF;
        RETURN NULL;
    END $$;
    DROP TABLE passage_terms;
    """,
    # 5: the layout and the vectors' codes saved for a replica's first recall of a user
    # (Store.save_copies), as the embedded store saves them in its file. Uncompressed: pglz took
    # 0.9 s to write the 36 MB of a 10,000-conversation memory's copies against 0.25 s, and
    # both read in 0.1 s. A deletion of passages drops the user's saved copies in its own
    # transaction, so nothing forgotten stays in one; the trigger is named to fire after
    # passages_deleted, whose lock on the corpus row makes it wait for a copy being saved,
    # which it then sees and drops.
    """
    CREATE TABLE saved_copies (
        user_id text NOT NULL, name text NOT NULL, rows bigint NOT NULL, deletes bigint NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (user_id, name)
    );
    ALTER TABLE saved_copies ALTER COLUMN data SET STORAGE EXTERNAL;
    CREATE FUNCTION passages_unsaved() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM saved_copies s USING (SELECT DISTINCT user_id FROM changed) u
        WHERE s.user_id = u.user_id;
        RETURN NULL;
    END $$;
    CREATE TRIGGER passages_unsaved AFTER DELETE ON passages
        REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION passages_unsaved();
    """
    + _policies("saved_copies"),
    # 6: one record of being returned a turn, the latest (as the embedded store's migration 9):
    # a recall writes ~20 records, so a busy user's rows grew by thousands an hour, each with
    # two index entries, where there is now at most one row a turn shown within the window.
    # The old table's policy is lifted for the copy (its owner reads every user's rows).
    """
    CREATE TABLE returned_latest (
        user_id text NOT NULL,
        turn_id bigint NOT NULL,
        at timestamptz NOT NULL,
        PRIMARY KEY (user_id, turn_id),
        FOREIGN KEY (user_id, turn_id) REFERENCES turns (user_id, id) ON DELETE CASCADE
    );
    ALTER TABLE returned NO FORCE ROW LEVEL SECURITY;
    INSERT INTO returned_latest
        SELECT user_id, turn_id, max(at) FROM returned GROUP BY user_id, turn_id;
    DROP TABLE returned;
    ALTER TABLE returned_latest RENAME TO returned;
    ALTER INDEX returned_latest_pkey RENAME TO returned_pkey;
    CREATE INDEX returned_at ON returned (user_id, at);
    """
    + _policies("returned"),
]


class SchemaError(RuntimeError):
    """The database cannot be upgraded (or is not), with what to do about it."""


def current_version(conn: psycopg.Connection) -> int:
    """The last migration applied (0: none), as any role that may read the schema sees it."""
    row = conn.execute("SELECT to_regclass(%s) IS NULL", (f"{SCHEMA}.migrations",)).fetchone()
    if row is None or row[0]:
        return 0
    row = conn.execute(f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.migrations").fetchone()
    return int(row[0]) if row else 0


def latest_version() -> int:
    return len(MIGRATIONS)


def upgrade(owner_url: str, app_role: str = DEFAULT_APP_ROLE) -> list[int]:
    """Apply the missing migrations as the tables' owner and grant `app_role` the use of them.

    Each migration commits with its version row; an advisory lock keeps two upgrades (two
    replicas starting together) from running at once. Returns the versions applied.
    """
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", app_role):
        raise SchemaError(f"application role {app_role!r} is not a plain lower-case role name")
    applied: list[int] = []
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtextextended('ireneo-migrations', 0))")
        _check_roles(conn, app_role)
        _create_extensions(conn)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.migrations "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(f"ALTER TABLE {SCHEMA}.migrations ENABLE ROW LEVEL SECURITY")
        conn.execute(f"ALTER TABLE {SCHEMA}.migrations FORCE ROW LEVEL SECURITY")
        conn.execute(
            f"DO $$ BEGIN CREATE POLICY migrations_read ON {SCHEMA}.migrations USING (true); "
            "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )
        done = current_version(conn)
        for version, script in enumerate(MIGRATIONS, start=1):
            if version <= done:
                continue
            with conn.transaction():
                conn.execute(f"SET LOCAL search_path = {SCHEMA}, public")
                conn.execute(script)  # type: ignore[arg-type]  # our own constant text
                conn.execute(f"INSERT INTO {SCHEMA}.migrations (version) VALUES (%s)", (version,))
            applied.append(version)
        _grant(conn, app_role)
        conn.execute("SELECT pg_advisory_unlock(hashtextextended('ireneo-migrations', 0))")
    return applied


def _check_roles(conn: psycopg.Connection, app_role: str) -> None:
    row = conn.execute(
        "SELECT current_user = %s, EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s)",
        (app_role, app_role),
    ).fetchone()
    assert row is not None
    same, exists = row
    if same:
        raise SchemaError(
            f"connected as {app_role!r}, the application role: run the upgrade as the role that "
            "owns the tables, so that the server's role does not own them"
        )
    if not exists:
        raise SchemaError(
            f"the application role {app_role!r} does not exist: create it first, e.g. "
            f"CREATE ROLE {app_role} LOGIN PASSWORD '...'"
        )


def _create_extensions(conn: psycopg.Connection) -> None:
    for extension in ("vector", "btree_gin"):
        try:
            conn.execute(f"CREATE EXTENSION IF NOT EXISTS {extension}")
        except psycopg.errors.InsufficientPrivilege:
            raise SchemaError(
                f"the extension {extension!r} is missing and this role may not create it: "
                f"as a superuser, run CREATE EXTENSION {extension} in this database"
            ) from None
        except psycopg.errors.FeatureNotSupported as exc:
            raise SchemaError(f"the extension {extension!r} is not installed: {exc}") from None
        except psycopg.errors.UndefinedFile:
            raise SchemaError(
                f"the extension {extension!r} is not installed on the database server "
                "(pgvector: see .ci/install-postgres)"
            ) from None


def _grant(conn: psycopg.Connection, app_role: str) -> None:
    role, schema = sql.Identifier(app_role), sql.Identifier(SCHEMA)
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
    conn.execute(
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
            schema, role
        )
    )
    conn.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {} TO {}").format(schema, role))
    conn.execute(
        sql.SQL("REVOKE INSERT, UPDATE, DELETE ON {}.migrations FROM {}").format(schema, role)
    )
