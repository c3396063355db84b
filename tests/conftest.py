"""Shared fixtures: every test gets its own memory directory, never the user's real one."""

from __future__ import annotations

import json
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


@pytest.fixture
def memory(home):
    with Memory(home) as m:
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
