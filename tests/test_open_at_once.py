"""Two processes opening one new SQLite file at the same moment, as two workers do for a user's
first posts or the inspector's sign-ins: both open it, neither gets "database is locked" nor
runs a migration the other applied. Real processes (forked), real files."""

from __future__ import annotations

import multiprocessing
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest

from ireneo.server.inspect import Sessions
from ireneo.store.sqlite import SQLiteStore

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="forks two openers at once")
TRIES = 25  # before the fix 4 of 14 sign-in files and 14 of 100 memories failed one opener


def _open(kind: str, directory: str, start: float, answers) -> None:
    while time.time() < start:  # both leave this loop in the same instant
        pass
    try:
        if kind == "memory":
            SQLiteStore(Path(directory)).close()
        else:
            Sessions._open(Path(directory) / "sessions.sqlite").close()
        answers.put("ok")
    except Exception as exc:  # noqa: BLE001 - what an opener met is the test's finding
        answers.put(repr(exc))


@pytest.mark.parametrize("kind", ["memory", "sign-ins"])
def test_two_processes_open_a_new_file_at_once(kind, tmp_path):
    fork = multiprocessing.get_context("fork")
    for n in range(TRIES):
        directory = tmp_path / str(n)
        directory.mkdir()
        answers = fork.Queue()
        start = time.time() + 0.2
        openers = [
            fork.Process(target=_open, args=(kind, str(directory), start, answers))
            for _ in range(2)
        ]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join(60)
        assert [answers.get(timeout=5), answers.get(timeout=5)] == ["ok", "ok"], n
    if kind == "memory":
        store = SQLiteStore(tmp_path / "0")  # the file is whole: every migration once
        try:
            versions = [row[0] for row in store._db.execute("SELECT version FROM migrations")]
        finally:
            store.close()
        assert versions == list(range(1, len(versions) + 1)) and versions


def test_a_write_that_finds_the_file_locked_leaves_the_memory_usable(tmp_path):
    """Another process (here a second connection) holds the file's write lock past the busy
    timeout: the write fails with "database is locked", and the store's own lock is free again,
    so the memory's other threads still read and write. Before, the failed BEGIN kept that lock
    for good and every other thread of the worker waited on it for ever."""
    store = SQLiteStore(tmp_path)
    store._db.execute("PRAGMA busy_timeout=50")  # the real 10 s, shortened for the test
    other = sqlite3.connect(tmp_path / "memory.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        store.add_meta("probe", "first")
    other.execute("ROLLBACK")
    other.close()
    done = []
    writer = threading.Thread(
        target=lambda: done.append(store.add_meta("probe", "second")), daemon=True
    )
    writer.start()
    writer.join(timeout=10)
    assert done == ["second"], "another thread could not take the store's lock"
    store.close()
