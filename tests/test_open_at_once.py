"""Two processes opening one new SQLite file at the same moment, as two workers do for a user's
first posts or the inspector's sign-ins: both open it, neither gets "database is locked" nor
runs a migration the other applied. Real processes (forked), real files."""

from __future__ import annotations

import multiprocessing
import sys
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
