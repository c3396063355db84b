"""A real PostgreSQL for the tests: IRENEO_TEST_DATABASE_URL (a superuser's URL), or a cluster
the tests start themselves with initdb/pg_ctl in a temporary directory, on 127.0.0.1.

In it: a database owned by `ireneo_owner`, pgvector created by the superuser, the schema
upgraded by the owner, and `ireneo_app`, the role the server runs as (owning nothing).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import conninfo, sql

from ireneo.benchmark.server_process import free_port
from ireneo.store import pg_schema

PG_BIN = Path(os.environ.get("IRENEO_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
OWNER, APP = "ireneo_owner", "ireneo_app"


@dataclass
class Database:
    superuser_url: str
    owner_url: str
    app_url: str


def available() -> str | None:
    """Why no PostgreSQL can be had for the tests, or None."""
    if os.environ.get("IRENEO_TEST_DATABASE_URL"):
        return None
    if not (PG_BIN / "initdb").exists():
        return f"PostgreSQL is not installed ({PG_BIN}/initdb missing; see .ci/install-postgres)"
    if not (
        Path("/usr/share/postgresql") / PG_BIN.parent.name / "extension/vector.control"
    ).exists():
        return "pgvector is not installed (see .ci/install-postgres)"
    return None


class Cluster:
    """initdb + pg_ctl in a temporary directory; as root, run as the `postgres` user."""

    def __init__(self, *, durable: bool = False) -> None:
        """`durable`: fsync and synchronous commit on, as in production (benchmarks); the
        tests run without them."""
        self.dir = Path(tempfile.mkdtemp(prefix="ireneo-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.dir, "postgres")
        self._run(
            PG_BIN / "initdb",
            "-D",
            self.data,
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
        )
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=200"
        )
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._options = options
        self.start()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: object) -> None:
        done = subprocess.run([*self._as, *map(str, args)], capture_output=True, text=True)
        if done.returncode:
            log = self.dir / "log"
            raise RuntimeError(
                f"{args[0]} failed: {done.stderr.strip()}"
                + (f"\n{log.read_text()[-2000:]}" if log.exists() else "")
            )

    def start(self) -> None:
        """Start the server (again, after `halt`) on the same port and data."""
        self._run(
            PG_BIN / "pg_ctl",
            "-D",
            self.data,
            "-l",
            self.dir / "log",
            "-w",
            "-o",
            self._options,
            "start",
        )

    def halt(self) -> None:
        """Stop the server as a crash would (every connection cut), keeping its data."""
        self._run(PG_BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        try:
            self.halt()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def prepare(superuser_url: str) -> Database:
    """A fresh database with the roles, pgvector and the schema, in the server at the URL."""
    name = "ireneo_test_" + uuid.uuid4().hex[:8]
    with psycopg.connect(superuser_url, autocommit=True) as conn:
        for role in (OWNER, APP):
            conn.execute(
                sql.SQL(
                    "DO $$ BEGIN CREATE ROLE {} LOGIN; "
                    "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
                ).format(sql.Identifier(role))
            )
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(OWNER)
            )
        )
    database_url = conninfo.make_conninfo(superuser_url, dbname=name)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    owner_url = conninfo.make_conninfo(database_url, user=OWNER)
    pg_schema.upgrade(owner_url, APP)
    return Database(database_url, owner_url, conninfo.make_conninfo(database_url, user=APP))
