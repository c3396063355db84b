"""Shared fixtures: every test gets its own memory directory, never the user's real one."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ireneo import Memory

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("IRENEO_HOME", str(tmp_path / "default-home"))
    monkeypatch.delenv("IRENEO_MODEL", raising=False)


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "memory"


@pytest.fixture(scope="session")
def pg_database():
    """A PostgreSQL database with ireneo's schema (tests/pg_cluster.py), for the whole run.

    Skipped where PostgreSQL or pgvector is missing, failed instead when IRENEO_REQUIRE_ALL=1.
    """
    from tests import pg_cluster

    missing = pg_cluster.available()
    if missing:
        if os.environ.get("IRENEO_REQUIRE_ALL") == "1":
            pytest.fail(f"{missing}; it is required when IRENEO_REQUIRE_ALL=1")
        pytest.skip(missing)
    url = os.environ.get("IRENEO_TEST_DATABASE_URL")
    cluster = None if url else pg_cluster.Cluster()
    try:
        yield pg_cluster.prepare(url or cluster.url)
    finally:
        if cluster is not None:
            cluster.stop()


@pytest.fixture(scope="session")
def pg_pool(pg_database):
    """One pool of the application role's connections, shared like a server shares it."""
    from ireneo.store.postgres import open_pool

    pool = open_pool(pg_database.app_url, max_size=4)
    yield pool
    pool.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request) -> str:
    """The store behind `memory`: every test of a memory runs on both."""
    return request.param


@pytest.fixture
def memory(home, store_kind, request):
    if store_kind == "postgres":
        pool = request.getfixturevalue("pg_pool")
        m = Memory(database=pool, user=f"test-{uuid.uuid4().hex}")
    else:
        m = Memory(home)
    with m:
        yield m


def turn_line(
    session_id: str,
    seq: int,
    text: str,
    *,
    role: str | None = None,
    ts: str | None = None,
    uuid: str | None = None,
    block_type: str = "text",
) -> dict:
    when = ts or (datetime(2026, 10, 1, 9, 0, tzinfo=UTC) + timedelta(minutes=seq)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    return {
        "session_id": session_id,
        "turn_uuid": uuid or f"{session_id}-{seq}",
        "seq": seq,
        "ts": when,
        "role": role or ("user" if seq % 2 == 0 else "assistant"),
        "harness": "test",
        "blocks": [{"block_type": block_type, "text": text}],
    }


def write_jsonl(path: Path, lines: list[dict | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            (line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n"
            for line in lines
        ),
        encoding="utf-8",
    )
    return path


def conversation(path: Path, session_id: str, texts: list[str], day: str = "2026-10-01") -> Path:
    lines = [turn_line(session_id, i, t, ts=f"{day}T09:{i:02d}:00Z") for i, t in enumerate(texts)]
    return write_jsonl(path / f"{session_id}.funes.jsonl", lines)
