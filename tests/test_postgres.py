"""What only the PostgreSQL store has: one database for every user, isolated by the database
itself (Row-Level Security, an application role that owns nothing), and versioned migrations.
The behaviour both stores share is tested on both by the `memory` fixture (tests/conftest.py)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import conninfo, sql

from ireneo import Memory
from ireneo.cli import main
from ireneo.errors import NotFound
from ireneo.model import Block, Turn
from ireneo.store import Filters, pg_schema
from ireneo.store import base as store_base
from ireneo.store.postgres import PostgresStore, SchemaOutdated, open_pool
from tests.conftest import conversation, turn_line, write_jsonl

TABLES = [*pg_schema.USER_TABLES, "index_jobs", "users", "migrations"]


def user() -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
def stocked(pg_pool, tmp_path, monkeypatch):
    """A user with one conversation, indexed and embedded, with search's copies saved (as a
    large memory's are), so that every user table holds some of the user's rows."""
    monkeypatch.setattr(store_base, "SAVE_AFTER", 1)
    name = user()
    conversation(
        tmp_path / "src",
        "pump-1",
        ["The pump on line 3 failed, ticket MT-4471.", "Replaced the bearing; MT-4471 closed."],
    )
    with Memory(database=pg_pool, user=name) as memory:
        memory.index([tmp_path / "src"])
    return name


def test_the_application_role_sees_nothing_without_a_user(pg_database, stocked):
    with psycopg.connect(pg_database.app_url, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("ireneo_app",)
        for table in pg_schema.USER_TABLES:
            count = conn.execute(f"SELECT count(*) FROM ireneo.{table}").fetchone()
            assert count == (0,), table
        with conn.transaction():
            conn.execute("SELECT set_config('app.user_id', %s, true)", (stocked,))
            assert conn.execute("SELECT count(*) FROM ireneo.turns").fetchone() == (2,)
        # set_config(..., true) ended with the transaction: nothing again
        assert conn.execute("SELECT count(*) FROM ireneo.turns").fetchone() == (0,)
        with conn.transaction():
            conn.execute("SELECT set_config('app.user_id', %s, true)", (user(),))
            assert conn.execute("SELECT count(*) FROM ireneo.passages").fetchone() == (0,)


def test_the_application_role_cannot_write_rows_of_another_user(pg_database, stocked):
    with psycopg.connect(pg_database.app_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute("SELECT set_config('app.user_id', %s, true)", (user(),))
            conn.execute("INSERT INTO ireneo.meta VALUES (%s, 'x', 'y')", (stocked,))
        with conn.transaction():
            conn.execute("SELECT set_config('app.user_id', %s, true)", (user(),))
            gone = conn.execute("DELETE FROM ireneo.turns WHERE user_id = %s", (stocked,))
            assert gone.rowcount == 0


def test_every_table_forces_row_security_and_the_application_role_owns_none(pg_database):
    with psycopg.connect(pg_database.app_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
            "pg_get_userbyid(c.relowner) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'ireneo' AND c.relkind = 'r'"
        ).fetchall()
        role = conn.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
    assert sorted(name for name, *_ in rows) == sorted(TABLES)
    for name, enabled, forced, owner in rows:
        assert enabled and forced, name
        assert owner == "ireneo_owner", name
    assert role == (False, False)


def test_the_owner_is_held_by_the_policies_too(pg_database, stocked):
    with psycopg.connect(pg_database.owner_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM ireneo.turns").fetchone() == (0,)


def test_two_users_with_the_same_words_never_see_each_other(pg_pool, tmp_path, monkeypatch):
    monkeypatch.setattr(store_base, "SAVE_AFTER", 1)  # each user's copies saved, then read
    alice, bob = user(), user()
    words = "The pump on line 3 failed again, ticket MT-4471, bearing replaced."
    conversation(tmp_path / "a", "alice-1", [words, "Alice's note: call the supplier."])
    conversation(tmp_path / "b", "bob-1", [words, "Bob's note: order new seals."])
    with Memory(database=pg_pool, user=alice) as a, Memory(database=pg_pool, user=bob) as b:
        a.index([tmp_path / "a"])
        b.index([tmp_path / "b"])
    # replicas that start from the saved copies
    with Memory(database=pg_pool, user=alice) as a, Memory(database=pg_pool, user=bob) as b:
        for memory, own, other in ((a, "alice-1", "bob-1"), (b, "bob-1", "alice-1")):
            hits = memory.recall("pump MT-4471 bearing", k=8)
            assert hits and {h.session_id for h in hits} == {own}
            assert [s.session_id for s in memory.sessions()] == [own]
            with pytest.raises(NotFound):
                memory.get(other)
            assert memory.store.term_stats(["mt4471"]).document_frequency == {"mt4471": 1}
            assert memory.status().turns == 2
        a.memories.store("Alice pays by invoice, ticket MT-4471.")
        assert b.memories.search("invoice MT-4471") == []
        assert b.memories.store("Bob pays by invoice, ticket MT-4471.").created


def test_upgrade_is_idempotent_and_the_cli_runs_it(pg_database):
    assert pg_schema.upgrade(pg_database.owner_url, "ireneo_app") == []
    result = CliRunner().invoke(
        main, ["db", "upgrade", "--database-url", pg_database.owner_url, "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "applied": [],
        "version": pg_schema.latest_version(),
        "app_role": "ireneo_app",
    }


def test_upgrade_refuses_to_run_as_the_application_role(pg_database):
    result = CliRunner().invoke(main, ["db", "upgrade", "--database-url", pg_database.app_url])
    assert result.exit_code == 1
    assert "run the upgrade as the role that owns the tables" in result.output


def test_a_database_not_upgraded_is_refused_with_the_command_to_run(pg_database):
    name = "ireneo_empty_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_database.superuser_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    empty = conninfo.make_conninfo(pg_database.superuser_url, dbname=name)
    with pytest.raises(SchemaOutdated, match="ireneo db upgrade"):
        PostgresStore(empty, user())
    fresh = CliRunner().invoke(main, ["db", "upgrade", "--database-url", empty])
    assert fresh.exit_code == 0, fresh.output
    assert f"schema at version {pg_schema.latest_version()}" in fresh.output
    pool = open_pool(empty)
    pool.close()


def test_the_environment_selects_postgres_when_no_home_is_given(pg_database, stocked, monkeypatch):
    monkeypatch.setenv("IRENEO_DATABASE_URL", pg_database.app_url)
    monkeypatch.setenv("IRENEO_USER", stocked)
    result = CliRunner().invoke(main, ["recall", "--json", "MT-4471"])
    assert result.exit_code == 0, result.output
    assert {hit["session_id"] for hit in json.loads(result.output)["hits"]} == {"pump-1"}
    monkeypatch.delenv("IRENEO_USER")
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 1 and "IRENEO_USER" in result.output


def test_a_replica_sees_the_vectors_another_replica_adds_replaces_and_drops(pg_pool, tmp_path):
    name = user()
    source = tmp_path / "src"
    conversation(source, "c-1", ["The pump failed on line 3.", "The conveyor jammed."])
    with Memory(database=pg_pool, user=name) as one, Memory(database=pg_pool, user=name) as two:
        one.index([source])
        query = one.embedder.embed_query("pump failure")
        assert len(two.store.dense_search(query, 10, Filters())) == 2  # two now holds a copy
        conversation(source, "c-2", ["The pump failed again."])
        one.index([source])
        found = two.store.dense_search(query, 10, Filters())
        assert len(found) == 3
        conversation(source, "c-1", ["The pump was fine after all.", "The conveyor jammed."])
        one.index([source])  # c-1 edited: its old passages (and vectors) are gone
        again = two.store.dense_search(query, 10, Filters())
        assert len(again) == 3 and {pid for pid, _ in again} != {pid for pid, _ in found}
        held = [pid for pid, _ in again]
        assert not np.isnan(two.store.dense_scores(query, np.array(held + [10**9]))[:-1]).any()
        assert np.isnan(two.store.dense_scores(query, np.array([10**9]))).all()
        one.store.drop_vectors()
        assert two.store.dense_search(query, 10, Filters()) == []


def test_two_writers_of_the_same_new_turns_store_them_once(pg_pool, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from ireneo.model import Block, Turn

    name = user()
    turns = [
        Turn(
            "c-1",
            f"t-{i}",
            i,
            datetime(2026, 10, 1, 9, i, tzinfo=UTC),
            "user",
            "test",
            (Block("text", f"Valve V-{i} replaced."),),
        )
        for i in range(20)
    ]
    stores = [Memory(database=pg_pool, user=name) for _ in range(4)]
    try:
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda m: m.store_turns(turns), stores))
        assert sum(r.added for r in results) == 20
        assert sum(r.unchanged for r in results) == 60
        assert stores[0].status().turns == 20 and stores[0].status().passages == 20
        assert stores[0].store.term_stats(["v7"]).document_frequency == {"v7": 1}
    finally:
        for memory in stores:
            memory.close()


def test_forgetting_on_postgres_removes_rows_counts_and_audits(pg_pool, tmp_path):
    from datetime import UTC, datetime

    now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    src = tmp_path / "src"
    conversation(src, "old-talk", ["zqvmarker7731 is the code word.", "Noted."], day="2026-01-05")
    conversation(src, "new-talk", ["The K-2 pump bearing is MT-4471.", "Logged."], day="2026-10-02")
    conversation(src, "third-talk", ["Lunch is at noon.", "Fine."], day="2026-10-03")
    with Memory(database=pg_pool, user=user()) as memory:
        memory.index([src])
        memory.memories.store("Rahul pays by card.")
        old = memory.forget_older_than(180, actor="cli", now=now)
        assert (old.conversations, old.turns, old.passages, old.vectors) == (1, 2, 2, 2)
        assert all("zqvmarker7731" not in h.text for h in memory.recall("zqvmarker7731"))
        assert [s.session_id for s in memory.sessions()] == ["new-talk", "third-talk"]
        one = memory.forget("third-talk", actor="route", now=now)
        assert (one.conversations, one.turns) == (1, 2)
        assert memory.store.term_stats(["lunch", "mt4471"]).document_frequency == {"mt4471": 1}
        everything = memory.forget_all(actor="operator", now=now)
        assert (everything.conversations, everything.memories) == (1, 1)
        assert memory.store.is_empty() and memory.memories.count() == 0
        log = memory.audit_log()
        assert [(e.action, e.actor) for e in log] == [
            ("forget_before", "cli"),
            ("forget_conversation", "route"),
            ("forget_all", "operator"),
        ]
        assert all("zqvmarker7731" not in str(e.to_dict()) for e in log)


def test_recall_echoes_are_flagged_and_left_out_on_postgres(pg_pool, tmp_path):
    from ireneo.model import Block, Turn
    from ireneo.server.tools import returned_turns

    src = tmp_path / "src"
    conversation(
        src,
        "handover",
        [
            "Shift handover: the pump bearing noise on motor K-2 is logged as ticket MT-4471.",
            "Noted. MT-4471 must be closed before the N-11 upgrade can be scheduled.",
        ],
    )
    name = user()
    with Memory(database=pg_pool, user=name) as memory:
        memory.index([src])
        hits = memory.recall("MT-4471 N-11", k=2)
        memory.note_returned(returned_turns(hits))
        echo = "Your follow-up: MT-4471 must be closed before the N-11 upgrade can be scheduled."
        ts = hits[0].ts
        memory.store_turns(
            [Turn("todo", "todo-1", 1, ts, "assistant", "test", (Block("text", echo),))]
        )
        assert [t.echo for t in memory.get("todo")] == [True]
        assert all(h.session_id != "todo" for h in memory.recall("N-11 upgrade scheduled", k=5))
        assert any(
            h.session_id == "todo"
            for h in memory.recall("N-11 upgrade scheduled", k=5, include_echoes=True)
        )
        # what another replica forgets is no longer shown here (the words kept by echoes.Shown)
        with Memory(database=pg_pool, user=name) as other:
            other.forget("handover")
        memory.store_turns(
            [Turn("todo", "todo-2", 2, ts, "assistant", "test", (Block("text", echo),))]
        )
        assert [t.echo for t in memory.get("todo")] == [True, False]


def test_a_turn_returned_again_is_recorded_once_at_its_latest_on_postgres(pg_database, pg_pool):
    """Every recall shows ~20 turns: the record keeps one row a turn, its latest return, so a
    busy user's records stay as many as their turns shown within the window."""
    from datetime import timedelta

    from ireneo.server.tools import returned_turns

    now = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
    name = user()
    with Memory(database=pg_pool, user=name) as memory:
        memory.store_turns(
            [
                Turn("pump", f"pump-{seq}", seq, now, "user", "test", (Block("text", text),))
                for seq, text in enumerate(
                    ["The pump on line 3 failed, ticket MT-4471.", "MT-4471 is closed."]
                )
            ]
        )
        shown = returned_turns(memory.recall("pump MT-4471", k=2))
        assert len(set(shown)) == 2
        for hour in range(5):  # the same turns, twice in one record too
            memory.note_returned(shown + shown, now + timedelta(hours=hour))
        memory.note_returned(shown, now)  # an older return leaves the latest as it is
        with psycopg.connect(pg_database.owner_url, autocommit=True) as conn, conn.transaction():
            conn.execute("SELECT set_config('app.user_id', %s, true)", (memory.store.user,))
            rows = conn.execute("SELECT at FROM ireneo.returned").fetchall()
        assert rows == [(now + timedelta(hours=4),)] * 2
        assert len(memory.store.returned_texts(now + timedelta(hours=4))) == 2


def test_records_returned_before_migration_6_keep_each_turns_latest(pg_database, monkeypatch):
    """A database written with a record per return keeps each turn's latest through the upgrade,
    every user's, under their own policy."""
    from tests import pg_cluster

    monkeypatch.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:5])
    old = pg_cluster.prepare(pg_database.superuser_url)
    monkeypatch.undo()
    ats = ["2026-10-20 09:00+00", "2026-10-20 11:00+00", "2026-10-20 10:00+00"]
    with psycopg.connect(old.app_url, autocommit=True) as conn:
        for owner in ("u-a", "u-b"):
            with conn.transaction():
                conn.execute("SELECT set_config('app.user_id', %s, true)", (owner,))
                conn.execute("INSERT INTO ireneo.sessions VALUES (%s, 's', 'r')", (owner,))
                conn.execute(
                    "INSERT INTO ireneo.turns (user_id, id, session_id, turn_uuid, seq, ts, "
                    "role, harness, blocks, content_hash) OVERRIDING SYSTEM VALUE "
                    "VALUES (%s, 7, 's', 'u', 0, now(), 'user', 'test', '[]', 'h')",
                    (owner,),
                )
                for at in ats:
                    conn.execute("INSERT INTO ireneo.returned VALUES (%s, 7, %s)", (owner, at))
    assert pg_schema.upgrade(old.owner_url, "ireneo_app") == [6]
    with psycopg.connect(old.app_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM ireneo.returned").fetchone() == (0,)
        for owner in ("u-a", "u-b"):
            with conn.transaction():
                conn.execute("SELECT set_config('app.user_id', %s, true)", (owner,))
                rows = conn.execute("SELECT user_id, turn_id, at FROM ireneo.returned").fetchall()
            assert rows == [(owner, 7, datetime(2026, 10, 20, 11, 0, tzinfo=UTC))]


def test_turn_windows_read_conversations_whose_ids_quote_and_escape(pg_pool, tmp_path):
    """The windows are sent as one JSON value (read by json_to_recordset): an id holding
    quotes, backslashes, placeholders, JSON's escapes or SQL reads its own turns, and open
    bounds read to the conversation's ends."""
    ids = [
        "it's",
        "back\\slash",
        "%s %(u)s",
        "$$'; DROP TABLE turns; --",
        "E'\\x41'",
        'q"\\u0041"',
        "плюс",
    ]
    lines = [turn_line(sid, seq, f"{n} turn {seq}") for n, sid in enumerate(ids) for seq in (0, 1)]
    source = write_jsonl(tmp_path / "src" / "ids.funes.jsonl", lines)
    with Memory(database=pg_pool, user=user()) as memory:
        memory.index([source])
        windows = memory.store.turn_windows(
            [(sid, seq, seq) for sid in reversed(ids) for seq in (1, 0)] + [("it", None, None)]
        )
        assert [[(t.session_id, t.seq, t.text) for t in w] for w in windows] == [
            [(sid, seq, f"{ids.index(sid)} turn {seq}")] for sid in reversed(ids) for seq in (1, 0)
        ] + [[]]
        assert len(memory.store.get_turns("it's", None, None)) == 2


def test_widening_reads_further_hits_sides_a_few_at_a_time(pg_pool, tmp_path, monkeypatch):
    """An answer with room shows further hits, each with its sides (search.widen): they are
    read AHEAD hits at a time, each read a PostgreSQL round trip, and the answer is the one
    that reading each hit's sides alone gives."""
    from ireneo import search
    from ireneo.render import within

    for n in range(8):
        texts = [f"Hi {n}.", f"The chiller valve of line {n} was checked.", "Ok.", "Bye."]
        conversation(tmp_path, f"line{n}", texts)
    with Memory(database=pg_pool, user=user()) as memory:
        memory.index([tmp_path])
        reads: list[int] = []
        windows = memory.store.turn_windows
        monkeypatch.setattr(
            memory.store, "turn_windows", lambda w: reads.append(len(w)) or windows(w)
        )
        answers = {}
        for ahead in (1, search.AHEAD):
            monkeypatch.setattr(search, "AHEAD", ahead)
            reads.clear()
            hits = memory.recall("chiller valve", k=2, fits=within(4000, lambda sid: sid))
            answers[ahead] = ([(h.session_id, h.seq, h.context) for h in hits], len(reads))
    (one_by_one, alone), (ahead, together) = answers[1], answers[search.AHEAD]
    assert ahead == one_by_one and len(one_by_one) == 8  # every chat shown, whole
    assert together < alone


def test_a_turn_kept_parsed_is_read_anew_once_its_row_changes(pg_pool, tmp_path):
    """turn_windows keeps the last turns parsed, by their whole row: a turn stored again with
    other text is read as it is now, and a long turn (never kept) reads whole."""
    from ireneo.store import rows

    long = "word " * rows.KEPT_TURN_CHARS
    source = write_jsonl(
        tmp_path / "src" / "a.funes.jsonl",
        [turn_line("a", 0, "first text"), turn_line("a", 1, long)],
    )
    with Memory(database=pg_pool, user=user()) as memory:
        memory.index([source])
        read = [t.text for t in memory.store.get_turns("a", None, None)]
        assert read == ["first text", long]
        write_jsonl(source, [turn_line("a", 0, "second text"), turn_line("a", 1, long)])
        memory.index([source])
        assert [t.text for t in memory.store.get_turns("a", 0, 0)] == ["second text"]
        assert memory.store.get_turns("a", 1, 1)[0].text == read[1]
