"""Review of `ireneo serve --workers N` (ec1cdd5): what the processes serving one home share
must not stop the home from being served. Real server processes on 127.0.0.1, real files."""

from __future__ import annotations

import subprocess
import sys
import uuid

import httpx2
import psycopg
import pytest
from psycopg import conninfo

from ireneo.benchmark.server_process import INGEST_KEY, ServerProcess
from ireneo.server.inspect import SESSIONS_FILE
from tests.test_workers import memory_dir, pair, post, recall

__all__ = ["pair"]  # the two processes on one home, a fixture of tests/test_workers.py


def test_a_damaged_sign_in_file_does_not_keep_the_server_from_starting(tmp_path):
    """The inspector's sign-ins are disposable (a user signs in again); the memories are not.
    A damaged `inspect-sessions.sqlite` (a torn write, a full disk, any stray bytes) made
    `build_state` raise `sqlite3.DatabaseError: file is not a database`, so no process
    started: no ingest, no recall, for the sake of a table of sign-ins."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / SESSIONS_FILE).write_bytes(b"not a database, but a damaged file " * 64)
    server = ServerProcess(home=home, log_path=tmp_path / "server.log")
    try:
        server.start(timeout=120)
        answer = httpx2.post(
            server.url + "/turns",
            json={
                "user": "alice",
                "conversation_id": "c1",
                "turns": [{"ts": "2026-10-01T10:00:00Z", "role": "user", "text": "P-003 leaks"}],
            },
            headers={"x-ingest-key": INGEST_KEY},
            timeout=30,
        )
        assert answer.status_code == 202
    finally:
        server.stop()


@pytest.fixture
def database_without_schema(pg_database):
    """A database of the test cluster that `ireneo db upgrade` never ran on."""
    name = f"review_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_database.superuser_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield conninfo.make_conninfo(pg_database.superuser_url, dbname=name)
    with psycopg.connect(pg_database.superuser_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_server_whose_workers_cannot_start_exits_refusing(
    tmp_path, database_without_schema, workers
):
    """`ireneo serve` refuses to start when the database's schema is not upgraded (a
    ConfigError from building the app). With --workers N the app is built in each worker, and
    uvicorn 0.54 starts a worker that dies again, for ever: the parent stayed alive with no
    worker serving, and a supervisor that watches the process never learned that the server
    was down. The parent now refuses what a worker would, once, before any starts."""
    server = ServerProcess(home=tmp_path / "home", database_url=database_without_schema)
    process = subprocess.Popen(
        [sys.executable, "-m", "ireneo.cli", "serve", "--port", str(server.port)]
        + ["--workers", workers],
        env=server.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)
        raise AssertionError(f"--workers {workers}: still running after 90 s") from None
    finally:
        if process.stderr is not None:
            process.stderr.close()
    assert process.returncode != 0


def test_a_user_deleted_and_made_again_elsewhere_is_not_served_from_the_deleted_file(pair):
    """B holds ria's memory open; A deletes ria (DELETE /users) and a post through A makes the
    directory again. B must notice at its next lease (server/memories.py compares the memory
    file's (device, inode) with the one it opened): neither show the deleted conversation nor
    write a post into the deleted file. The file's, not the directory's: ext4 gives a directory
    made again at once the inode number just freed, while B's open file keeps its inode."""
    a, b = pair
    assert post(b, "ria", "old", ["Old note OLD-7 about the boiler.", "Ok."]) == 202
    assert "OLD-7" in recall(b, "ria", "OLD-7")  # B holds the memory open
    before = memory_dir(a, "ria").stat().st_ino
    answer = httpx2.delete(a.url + "/users/ria", headers={"x-ingest-key": INGEST_KEY}, timeout=30)
    assert answer.status_code == 200
    assert post(a, "ria", "mid", ["Middle note MID-8 about the pump.", "Ok."]) == 202
    reused = memory_dir(a, "ria").stat().st_ino == before  # what makes the case (ext4: always)
    assert "OLD-7" not in recall(b, "ria", "OLD-7 boiler"), f"inode reused: {reused}"
    assert post(b, "ria", "new", ["New note NEW-9 about the valve.", "Ok."]) == 202
    assert "NEW-9" in recall(a, "ria", "NEW-9"), f"inode reused: {reused}"
