"""The layout and the vectors' codes saved in an embedded memory's file, or in PostgreSQL's
`saved_copies` (store/saved.py), so that a fresh process or replica reads them instead of every
row: read back as they were, used only while no deletion has happened since, never saved
holding what a deletion removed, and rebuilt from the rows when unreadable. Their size (tens of
MB in a large memory) does not stay in the write-ahead log either."""

from __future__ import annotations

import io
import logging
import sqlite3
import threading
import uuid
import zipfile
from datetime import UTC, datetime

import numpy as np
import psycopg
import pytest

from ireneo import Memory
from ireneo.formats import funes_jsonl
from ireneo.store import Filters
from ireneo.store import base as store_base
from ireneo.store import sqlite as sqlite_store
from ireneo.store.layout import PassageLayout, PassageRow
from ireneo.store.postgres import PostgresStore
from ireneo.store.saved import pack, unpack
from ireneo.store.sqlite import WAL_LIMIT
from ireneo.store.vectors import VectorIndex
from tests.conftest import conversation, turn_line, write_jsonl


def saved_rows(home) -> dict[str, int]:
    with sqlite3.connect(home / "memory.db") as db:
        return dict(db.execute("SELECT name, rows FROM saved_copies"))


def saved_deletes(home) -> dict[str, int]:
    """The count of deletions each saved copy was made at."""
    with sqlite3.connect(home / "memory.db") as db:
        return dict(db.execute("SELECT name, deletes FROM saved_copies"))


def recalled(memory: Memory, query: str) -> list[dict]:
    return [hit.to_dict() for hit in memory.recall(query, k=8)]


def add_turns(memory: Memory, path, session: str, texts: list[str]) -> None:
    lines = [turn_line(session, i, text) for i, text in enumerate(texts)]
    memory.store_turns(funes_jsonl.read_file(write_jsonl(path / f"{session}.funes.jsonl", lines)))


@pytest.fixture
def save_early(monkeypatch):
    """Copies saved from the first passages on, as a memory of thousands saves them."""
    monkeypatch.setattr(store_base, "SAVE_AFTER", 1)


def test_a_layout_and_a_vector_index_read_back_as_they_were_saved() -> None:
    rows = [
        PassageRow(i + 1, f"s{i // 3}", i % 3, 1_700_000_000 + i, "user", "text", terms, i == 4)
        for i, terms in enumerate(
            ["pump seal leak", "mt4471 open", "", "seal report", "lunch", "pump p 003"]
        )
    ]
    layout = PassageLayout().extended(rows)
    layout.bm25(layout.term_ids(["pump"]), np.ones(1), 2.0, 5, Filters())  # builds postings
    read = PassageLayout.from_saved(layout.saved())
    for column in ("ids", "turn_keys", "ts", "roles", "block_types", "echo", "offsets", "tokens"):
        assert np.array_equal(getattr(read, column), getattr(layout, column)), column
    assert read.vocabulary.names == layout.vocabulary.names
    assert read.turns(read.turn_keys) == layout.turns(layout.turn_keys)
    words = ["pump", "seal", "mt4471"]
    weights = np.array([1.0, 2.0, 3.0])
    assert np.array_equal(
        read.bm25(read.term_ids(words), weights, 2.0, 5, Filters()),
        layout.bm25(layout.term_ids(words), weights, 2.0, 5, Filters()),
    )
    grown = read.extended([PassageRow(9, "s9", 0, 1_700_000_100, "user", "text", "pump", False)])
    found = grown.bm25(grown.term_ids(["pump"]), np.ones(1), 2.0, 5, Filters())
    assert 9 in grown.ids[found].tolist()

    vectors = np.random.default_rng(7).standard_normal((50, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = VectorIndex().extended(zip(range(1, 51), vectors, strict=True))
    again = VectorIndex.from_saved(index.saved())
    assert again.nearest(vectors[3], 5) == index.nearest(vectors[3], 5)
    assert again.cosines_of(vectors[9], np.arange(1, 51)).tolist() == (
        index.cosines_of(vectors[9], np.arange(1, 51)).tolist()
    )


@pytest.mark.parametrize("kind", [PassageLayout, VectorIndex])
def test_bytes_that_hold_no_saved_copy_are_refused(kind) -> None:
    partial = io.BytesIO()
    np.savez(partial, ids=np.arange(3))
    for data in (b"", b"not a copy", partial.getvalue()):
        with pytest.raises(ValueError):
            kind.from_saved(data)


def test_saved_arrays_are_read_whole_and_never_as_objects() -> None:
    ids = np.arange(5, dtype=np.int64)
    columns = np.asfortranarray(np.arange(6, dtype=np.uint8).reshape(2, 3))
    data = bytes(pack({"codes": np.arange(3, dtype=np.uint8), "ids": ids, "columns": columns}))
    parts = unpack(data)
    assert parts["ids"].dtype == np.int64 and np.array_equal(parts["ids"], ids)
    assert np.array_equal(parts["columns"], columns) and parts["columns"].flags.f_contiguous
    # copied out, aligned (an entry starts wherever the one before it ended): `data` can go
    assert not np.shares_memory(parts["ids"], np.frombuffer(data, np.uint8))
    assert parts["ids"].flags.aligned

    for write in (np.savez_compressed, np.savez):  # compressed, or pickled objects: not pack's
        data = io.BytesIO()
        write(data, ids=ids, objects=np.array([{"a": 1}], dtype=object))
        with pytest.raises(ValueError):
            unpack(data.getvalue())


def test_every_array_header_reads_back_as_numpy_wrote_it() -> None:
    """The headers np.savez writes are read without numpy's parser; any other is left to it."""
    parts = {
        "scalar": np.array(7, dtype=np.int64),
        "empty": np.zeros(0, dtype=np.int32),
        "flags": np.array([True, False]),
        "scales": np.array([0.5, 2.0], dtype=np.float32),
        "codes": np.arange(12, dtype=np.uint8).reshape(3, 4),
        "columns": np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4)),
        "names": ["a", "b"],
    }
    read = unpack(bytes(pack(parts)))
    for name, part in parts.items():
        if isinstance(part, list):
            assert read[name] == part
            continue
        assert read[name].dtype == part.dtype and read[name].shape == part.shape, name
        assert np.array_equal(read[name], part), name
    assert read["columns"].flags.f_contiguous
    archive = io.BytesIO()  # a version 2.0 header, which np.save writes for huge headers only
    with zipfile.ZipFile(archive, "w") as out, out.open("ids.npy", "w") as entry:
        np.lib.format.write_array(entry, np.arange(4), version=(2, 0))
    assert np.array_equal(unpack(archive.getvalue())["ids"], np.arange(4))


DAMAGED_HEADERS = [
    # numpy's parser, which reads any header the strict pattern does not, fails on these with
    # tokenize's TokenError or a TypeError, not a ValueError
    (b"'fortran_order': False, 'shape'", b"'fortran_order': False,B'shape'"),
    (b",), }", b",3, }"),
]


@pytest.mark.parametrize(("was", "made"), DAMAGED_HEADERS)
def test_a_damaged_array_header_is_refused_as_no_saved_copy(was, made) -> None:
    data = bytes(pack({"ids": np.arange(5, dtype=np.int64), "names": ["a", "b"]}))
    assert was in data
    with pytest.raises(ValueError):
        unpack(data.replace(was, made, 1))


@pytest.mark.parametrize("text", [b"[" * 100_000, b'{"a": 1}', b"7"], ids=["deep", "dict", "7"])
def test_a_list_of_strings_that_pack_never_wrote_is_refused(text) -> None:
    data = io.BytesIO()
    np.savez(data, **{"names.strings": np.frombuffer(text, dtype=np.uint8)})
    with pytest.raises(ValueError):
        unpack(data.getvalue())


@pytest.mark.parametrize(("was", "made"), DAMAGED_HEADERS)
def test_a_saved_copy_with_a_damaged_header_is_built_from_the_rows(
    home, tmp_path, save_early, caplog, was, made
):
    with Memory(home) as memory:
        memory.index(
            [conversation(tmp_path / "a", "pumps", ["the seal on P-003 leaks", "MT-4471"])]
        )
        expected = recalled(memory, "P-003 seal")
    with sqlite3.connect(home / "memory.db") as db:
        for name, data in db.execute("SELECT name, data FROM saved_copies").fetchall():
            db.execute(
                "UPDATE saved_copies SET data = ? WHERE name = ?",
                (bytes(data).replace(was, made, 1), name),
            )
    with caplog.at_level(logging.WARNING, logger="ireneo.store"), Memory(home) as memory:
        assert recalled(memory, "P-003 seal") == expected
        assert "is unreadable" in caplog.text
        assert saved_rows(home) == {}  # dropped: the next index saves them again


def test_a_fresh_process_starts_from_the_saved_copies_and_reads_only_newer_rows(
    home, tmp_path, save_early, monkeypatch
):
    with Memory(home) as memory:
        memory.index(
            [conversation(tmp_path / "a", "pumps", ["the seal on P-003 leaks", "MT-4471"])]
        )
        assert saved_rows(home) == {"layout": 2, "vectors": 2}
        add_turns(memory, tmp_path / "b", "lunch", ["lunch at the canteen on Friday"])

    read_after = []
    original = sqlite_store.SQLiteStore._passage_rows

    def passage_rows(self, after):
        read_after.append(after)
        return original(self, after)

    monkeypatch.setattr(sqlite_store.SQLiteStore, "_passage_rows", passage_rows)
    with Memory(home) as memory:
        from_copies = [recalled(memory, "P-003 seal"), recalled(memory, "canteen lunch")]
        assert from_copies[1][0]["session_id"] == "lunch"  # stored after the copy was saved
        assert read_after == [2]  # the rows after the copy's last passage, not all
    with sqlite3.connect(home / "memory.db") as db:
        db.execute("DELETE FROM saved_copies")
    with Memory(home) as memory:
        assert [recalled(memory, "P-003 seal"), recalled(memory, "canteen lunch")] == from_copies
    assert read_after == [2, 0]


def test_copies_are_saved_again_once_an_eighth_of_them_is_new(home, tmp_path, monkeypatch):
    monkeypatch.setattr(store_base, "SAVE_AFTER", 4)
    with Memory(home) as memory:
        add_turns(memory, tmp_path, "one", ["first", "second", "third"])
        memory.embed_pending()
        assert saved_rows(home) == {}  # fewer than SAVE_AFTER: read from the rows
        add_turns(memory, tmp_path, "two", ["fourth", "fifth"])
        memory.embed_pending()
        assert saved_rows(home) == {"layout": 5, "vectors": 5}
        add_turns(memory, tmp_path, "three", ["sixth"])
        memory.embed_pending()
        assert saved_rows(home) == {"layout": 5, "vectors": 5}
        add_turns(memory, tmp_path, "four", ["seventh", "eighth", "ninth", "tenth"])
        memory.embed_pending()
        assert saved_rows(home) == {"layout": 10, "vectors": 10}


def test_a_memory_without_saved_copies_gets_them_at_its_next_index(home, tmp_path, monkeypatch):
    """A memory indexed before copies were saved (or below the threshold then): indexing its
    unchanged files again embeds nothing, and saves them."""
    source = conversation(tmp_path / "a", "pumps", ["the seal on P-003 leaks", "MT-4471"])
    with Memory(home) as memory:
        memory.index([source])
        assert saved_rows(home) == {}
        monkeypatch.setattr(store_base, "SAVE_AFTER", 1)
        assert memory.index([source]).embedded == 0
        assert saved_rows(home) == {"layout": 2, "vectors": 2}


def test_a_deletion_drops_the_saved_copy_it_touches(home, tmp_path, save_early):
    with Memory(home) as memory:
        memory.index(
            [conversation(tmp_path / "a", "pumps", ["the seal on P-003 leaks", "MT-4471"])]
        )
        memory.index([conversation(tmp_path / "b", "lunch", ["lunch at the canteen"])])
        assert saved_rows(home) == {"layout": 3, "vectors": 3}
        memory.forget("lunch")
        assert saved_rows(home) == {}
        assert all(hit.session_id == "pumps" for hit in memory.recall("canteen lunch"))

        memory.index([conversation(tmp_path / "c", "fans", ["fan FN-2 is noisy"])])
        assert saved_rows(home) == {"layout": 3, "vectors": 3}
        before = saved_deletes(home)
        memory.reembed("minilm-l6-v2-q8")
        after = saved_deletes(home)  # the vectors' copy dropped, and saved again once re-embedded
        assert after["layout"] == before["layout"] and after["vectors"] == before["vectors"] + 3


def test_a_copy_made_before_a_deletion_is_not_saved(memory, tmp_path, save_early, monkeypatch):
    """A forget that lands between building a copy and writing it: the copy holds what was
    forgotten, so it is not written (both stores)."""
    add_turns(memory, tmp_path, "pumps", ["the seal on P-003 leaks"])
    add_turns(memory, tmp_path, "secret", ["the code word is zqvmarker7731"])
    original = PassageLayout.saved

    def saved_while_forgetting(layout):
        data = original(layout)
        memory.forget("secret")
        return data

    monkeypatch.setattr(PassageLayout, "saved", saved_while_forgetting)
    memory.embed_pending()
    assert memory.store._saved_rows("layout") == 0
    monkeypatch.setattr(PassageLayout, "saved", original)
    memory.embed_pending()  # saved now, without what was forgotten
    deletes = memory.store._passage_counters()[1]
    saved = memory.store._read_saved("layout", PassageLayout.from_saved, deletes)
    assert len(saved) == 1 and "zqvmarker7731" not in saved.vocabulary.code


def test_an_unreadable_saved_copy_is_built_from_the_rows(home, tmp_path, save_early, caplog):
    with Memory(home) as memory:
        memory.index(
            [conversation(tmp_path / "a", "pumps", ["the seal on P-003 leaks", "MT-4471"])]
        )
        expected = recalled(memory, "P-003 seal")
    with sqlite3.connect(home / "memory.db") as db:
        db.execute("UPDATE saved_copies SET data = x'00ff'")
    with caplog.at_level(logging.WARNING, logger="ireneo.store"), Memory(home) as memory:
        assert recalled(memory, "P-003 seal") == expected
        assert f"{home / 'memory.db'}: the saved layout is unreadable" in caplog.text
        assert saved_rows(home) == {}  # dropped: the next index saves them again
        memory.embed_pending()
        assert saved_rows(home) == {"layout": 2, "vectors": 2}


def test_a_full_disk_leaves_the_copies_unsaved_and_indexing_unharmed(
    home, tmp_path, monkeypatch, caplog
):
    texts = [f"the seal on pump P-{i:03d} leaks, ticket MT-{4400 + i}" for i in range(40)]
    monkeypatch.setattr(store_base, "SAVE_AFTER", 10_000)  # not saved as it is indexed
    with Memory(home) as memory:
        memory.index([conversation(tmp_path / "a", "pumps", texts)])  # copies of several pages
        db = memory.store._db
        db.execute("VACUUM")  # no free page left to take the copies either
        db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
        monkeypatch.setattr(store_base, "SAVE_AFTER", 1)
        with caplog.at_level(logging.WARNING, logger="ireneo.store"):
            assert memory.embed_pending() == 0
        assert "the disk is full" in caplog.text
        assert saved_rows(home) == {}
        assert memory.recall("P-003 seal", k=1)[0].session_id == "pumps"
        db.execute("PRAGMA max_page_count = 1073741823")
        memory.embed_pending()
        assert saved_rows(home) == {"layout": 40, "vectors": 40}


def test_a_large_write_does_not_leave_the_write_ahead_log_at_its_size(home):
    """A saved copy is tens of MB in a large memory; a server keeps the memory open for long."""
    wal = home / "memory.db-wal"
    with Memory(home) as memory:
        with memory.store._transaction() as db:
            db.execute(
                "INSERT INTO saved_copies VALUES ('layout', 1, -1, ?)", (bytes(3 * WAL_LIMIT),)
            )
        assert wal.stat().st_size > 3 * WAL_LIMIT
        memory.store.set_meta("after", "one")  # a checkpoint ran: this write starts the log over
        memory.store.set_meta("after", "two")
        assert wal.stat().st_size <= WAL_LIMIT


# -- PostgreSQL: the same copies in `saved_copies`, one pair per user --------------------------


def pg_saved(pg_database, user: str) -> dict[str, tuple[int, int]]:
    """Each saved copy of `user` as (rows, deletes), read as the superuser (no policy)."""
    with psycopg.connect(pg_database.superuser_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, rows, deletes FROM ireneo.saved_copies WHERE user_id = %s", (user,)
        ).fetchall()
    return {name: (count, deletes) for name, count, deletes in rows}


def pg_user() -> str:
    return f"test-{uuid.uuid4().hex}"


def index_pumps(memory: Memory, tmp_path) -> None:
    memory.index([conversation(tmp_path / "a", "pumps", ["the seal on P-003 leaks", "MT-4471"])])


def test_a_replica_starts_from_the_saved_copies_and_reads_only_newer_rows(
    pg_pool, pg_database, tmp_path, save_early, monkeypatch
):
    user = pg_user()
    with Memory(database=pg_pool, user=user) as memory:
        index_pumps(memory, tmp_path)
        assert pg_saved(pg_database, user) == {"layout": (2, 0), "vectors": (2, 0)}
        add_turns(memory, tmp_path / "b", "lunch", ["lunch at the canteen on Friday"])

    read_after = []
    original = PostgresStore._passage_rows

    def passage_rows(self, after):
        read_after.append(after)
        return original(self, after)

    monkeypatch.setattr(PostgresStore, "_passage_rows", passage_rows)
    with Memory(database=pg_pool, user=user) as replica:
        from_copies = [recalled(replica, "P-003 seal"), recalled(replica, "canteen lunch")]
        assert from_copies[1][0]["session_id"] == "lunch"  # stored after the copy was saved
        assert read_after[0] > 0  # the rows after the copy's last passage, not all
    with psycopg.connect(pg_database.superuser_url, autocommit=True) as conn:
        conn.execute("DELETE FROM ireneo.saved_copies WHERE user_id = %s", (user,))
    with Memory(database=pg_pool, user=user) as replica:
        assert [recalled(replica, "P-003 seal"), recalled(replica, "canteen lunch")] == from_copies
    assert read_after[1:] == [0]


def test_a_forget_on_postgres_drops_the_users_saved_copies_in_its_transaction(
    pg_pool, pg_database, tmp_path, save_early
):
    user, other = pg_user(), pg_user()
    with Memory(database=pg_pool, user=user) as memory, Memory(database=pg_pool, user=other) as o:
        memory.index([conversation(tmp_path / "a", "pumps", ["the seal on P-003 leaks"])])
        memory.index([conversation(tmp_path / "b", "secret", ["the code word is zqvmarker7731"])])
        o.index([conversation(tmp_path / "c", "secret", ["the code word is zqvmarker7731"])])
        with psycopg.connect(pg_database.superuser_url, autocommit=True) as conn:
            [(layout,)] = conn.execute(
                "SELECT data FROM ireneo.saved_copies WHERE user_id = %s AND name = 'layout'",
                (user,),
            ).fetchall()
        assert b"zqvmarker7731" in layout
        memory.forget("secret", now=datetime(2026, 11, 30, tzinfo=UTC))
        assert pg_saved(pg_database, user) == {}
        assert set(pg_saved(pg_database, other)) == {"layout", "vectors"}  # not another user's
        memory.embed_pending()  # saved again, without what was forgotten
        assert pg_saved(pg_database, user) == {"layout": (1, 1), "vectors": (1, 1)}
    with Memory(database=pg_pool, user=user) as replica:
        assert "zqvmarker7731" not in replica.store.layout().vocabulary.code
        assert {hit["session_id"] for hit in recalled(replica, "zqvmarker7731")} == {"pumps"}
        before = pg_saved(pg_database, user)
        replica.reembed("minilm-l6-v2-q8")  # the vectors dropped, and saved again once re-embedded
        after = pg_saved(pg_database, user)
        assert after["layout"] == before["layout"]
        assert after["vectors"] == (1, before["vectors"][1] + 1)


def test_an_unreadable_saved_copy_on_postgres_is_built_from_the_rows(
    pg_pool, pg_database, tmp_path, save_early, caplog
):
    user = pg_user()
    with Memory(database=pg_pool, user=user) as memory:
        index_pumps(memory, tmp_path)
        expected = recalled(memory, "P-003 seal")
    with psycopg.connect(pg_database.superuser_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE ireneo.saved_copies SET data = '\\x00ff'::bytea WHERE user_id = %s", (user,)
        )
    with (
        caplog.at_level(logging.WARNING, logger="ireneo.store"),
        Memory(database=pg_pool, user=user) as replica,
    ):
        assert recalled(replica, "P-003 seal") == expected
        assert "the saved layout is unreadable" in caplog.text
        assert pg_saved(pg_database, user) == {}  # dropped: the next index saves them again
        replica.embed_pending()
        assert pg_saved(pg_database, user) == {"layout": (2, 0), "vectors": (2, 0)}


def test_a_deletion_waits_for_a_copy_being_saved_and_then_drops_it(
    pg_pool, pg_database, tmp_path, save_early
):
    """A forget that starts while a copy is written: it waits for the corpus row the save holds,
    then drops what was saved, in its own transaction."""
    user = pg_user()
    with Memory(database=pg_pool, user=user) as memory:
        memory.index([conversation(tmp_path / "a", "pumps", ["the seal on P-003 leaks"])])
        memory.index([conversation(tmp_path / "b", "secret", ["the code word is zqvmarker7731"])])
        copy, deletes = memory.store._layout.state()
        with psycopg.connect(pg_database.app_url) as saving:
            saving.execute("SELECT set_config('app.user_id', %s, true)", (user,))
            saving.execute(
                "SELECT 1 FROM ireneo.corpus WHERE user_id = %s FOR UPDATE", (user,)
            )  # a save holds the corpus row while it writes
            forgetting = threading.Thread(target=memory.forget, args=("secret",))
            forgetting.start()
            forgetting.join(timeout=1)
            assert forgetting.is_alive()  # waiting for the save
            saving.execute(
                "INSERT INTO ireneo.saved_copies VALUES (%s, 'layout', %s, %s, %s) "
                "ON CONFLICT (user_id, name) DO UPDATE SET data = excluded.data",
                (user, len(copy), deletes, bytes(copy.saved())),
            )
            saving.commit()
        forgetting.join(timeout=10)
        assert not forgetting.is_alive()
        assert pg_saved(pg_database, user) == {}
