"""Forgetting on a real SQLite memory: one conversation, everything, or by age; in one transaction
with its audit entry; and no byte of the forgotten text left in the database files (db, -wal,
-shm) afterwards, including the full-text index and the text of earlier edits."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ireneo import Memory
from ireneo.errors import NotFound
from ireneo.store import base as store_base
from ireneo.store.base import conversation_digest
from tests.conftest import conversation, turn_line, write_jsonl

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
# Unique strings that occur nowhere else: as text, and as the search term it becomes.
MARKER = "zqvmarker7731"
EDITED_MARKER = "wyxoldtext4409"
MEMORY_MARKER = "kjqmemorymark5520"


def files_of(home: Path) -> list[Path]:
    return sorted(p for p in home.iterdir() if p.name.startswith("memory.db"))


def occurrences(home: Path, needle: str) -> list[str]:
    """The database files (db, -wal, -shm) that hold `needle`, in any case, as UTF-8 bytes."""
    found = []
    for path in files_of(home):
        data = path.read_bytes().lower()
        if needle.lower().encode() in data:
            found.append(path.name)
    return found


def two_conversations(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    conversation(
        src,
        "secret-talk",
        [
            f"The code word for the N-11 shipment is {MARKER}, keep it between us.",
            f"Noted: {MARKER} for N-11. Ticket MT-4471 stays open.",
            "Anything else about the shipment?",
        ],
    )
    conversation(
        src,
        "kept-talk",
        ["The K-2 pump bearing is logged as MT-4471.", "Logged, I will follow up on Thursday."],
        day="2026-10-02",
    )
    return src


@pytest.fixture
def indexed(tmp_path, home) -> Memory:
    with Memory(home) as memory:
        memory.index([two_conversations(tmp_path)])
        assert occurrences(home, MARKER), "the marker should be on disk before forgetting"
        yield memory


def test_forgetting_a_conversation_leaves_no_byte_of_it_in_the_files(indexed, home):
    before = indexed.status()
    forgotten = indexed.forget("secret-talk", actor="cli", now=NOW)

    assert forgotten.conversations == 1
    assert forgotten.turns == 3
    assert forgotten.passages == 3
    assert forgotten.vectors == 3
    assert occurrences(home, MARKER) == []
    after = indexed.status()
    assert (after.turns, after.sessions) == (before.turns - 3, before.sessions - 1)
    assert [s.session_id for s in indexed.sessions()] == ["kept-talk"]
    # the rest is whole: searchable by keyword and by vector
    hits = indexed.recall("MT-4471 pump bearing", k=3)
    assert {hit.session_id for hit in hits} == {"kept-talk"}
    assert all(MARKER not in hit.text for hit in indexed.recall(MARKER, k=3))


def test_a_forgotten_conversation_leaves_no_term_in_the_saved_copies(tmp_path, home, monkeypatch):
    """The layout saved for the next process (Store.save_copies) lists every term: a
    forget drops it in its own transaction."""
    monkeypatch.setattr(store_base, "SAVE_AFTER", 1)  # saved as a large memory's are
    with Memory(home) as memory:
        memory.index([two_conversations(tmp_path)])
        db = sqlite3.connect(home / "memory.db")
        try:
            saved = db.execute("SELECT data FROM saved_copies WHERE name = 'layout'").fetchone()
        finally:
            db.close()
        assert MARKER.encode() in saved[0]
        memory.forget("secret-talk", now=NOW)
        assert occurrences(home, MARKER) == []
        assert memory.recall("MT-4471 pump bearing", k=1)[0].session_id == "kept-talk"


def test_the_term_statistics_keep_no_term_of_a_forgotten_conversation(indexed, home):
    indexed.forget("secret-talk", now=NOW)
    db = sqlite3.connect(home / "memory.db")
    try:
        frequencies = dict(db.execute("SELECT term, passages FROM term_df"))
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    finally:
        db.close()
    assert MARKER.lower() not in frequencies
    assert frequencies.get("mt4471")  # the kept conversation's terms are still there
    assert not {t for t in tables if t.startswith("passages_fts")}  # no other index of terms


def test_the_old_text_of_an_edited_turn_does_not_survive_a_forget(tmp_path, home):
    src = tmp_path / "src"
    path = write_jsonl(src / "edit.funes.jsonl", [turn_line("edit", 0, f"draft {EDITED_MARKER}")])
    with Memory(home) as memory:
        memory.index([src])
        write_jsonl(path, [turn_line("edit", 0, "the final wording, nothing else")])
        memory.index([src])
        assert "final wording" in memory.get("edit")[0].text
        memory.forget("edit", now=NOW)
        assert occurrences(home, EDITED_MARKER) == []
        assert occurrences(home, "final wording") == []


def test_forget_all_removes_conversations_and_explicit_memories(indexed, home):
    indexed.memories.store(f"Prefers the {MEMORY_MARKER} route for deliveries.")
    assert occurrences(home, MEMORY_MARKER)

    forgotten = indexed.forget_all(actor="route", now=NOW)

    assert (forgotten.conversations, forgotten.turns, forgotten.memories) == (2, 5, 1)
    assert indexed.is_empty()
    assert indexed.memories.count() == 0
    assert indexed.status().passages == 0
    for needle in (MARKER, MEMORY_MARKER, "MT-4471", "bearing"):
        assert occurrences(home, needle) == [], needle
    # the memory still works after being emptied
    assert indexed.recall("MT-4471") == []


def test_forget_older_than_keeps_recent_conversations(indexed):
    # secret-talk ends 2026-10-01 09:02, kept-talk 2026-10-02 09:01
    now = datetime(2026, 10, 31, 9, 1, 30, tzinfo=UTC)
    forgotten = indexed.forget_older_than(29.5, actor="retention", now=now)
    assert forgotten.conversations == 1
    assert [s.session_id for s in indexed.sessions()] == ["kept-talk"]
    assert indexed.forget_older_than(29.5, now=now).turns == 0  # nothing more, no audit entry
    assert [e.action for e in indexed.audit_log()] == ["forget_before"]
    with pytest.raises(ValueError, match="more than 0 days"):
        indexed.forget_older_than(0)


def test_the_audit_log_says_what_when_and_who_without_text_or_ids(indexed, home):
    indexed.forget("secret-talk", actor="cli", now=NOW)
    indexed.forget("no-such-talk", actor="cli", now=NOW)  # nothing forgotten: nothing logged
    indexed.forget_all(actor="route", now=NOW + timedelta(hours=1))

    log = indexed.audit_log()
    assert [(e.action, e.actor) for e in log] == [
        ("forget_conversation", "cli"),
        ("forget_all", "route"),
    ]
    assert log[0].conversation == conversation_digest("secret-talk")
    assert log[0].at == NOW
    assert log[0].forgotten.turns == 3
    assert log[1].forgotten.turns == 2
    text = json.dumps([e.to_dict() for e in log])
    assert "secret-talk" not in text and MARKER not in text
    assert occurrences(home, "secret-talk") == []


def test_forgetting_an_unknown_conversation_changes_nothing(indexed):
    before = indexed.status()
    forgotten = indexed.forget("nothing-here", now=NOW)
    assert forgotten.turns == 0
    assert indexed.status().turns == before.turns


# -- the command line ------------------------------------------------------------------------------


def cli(home: Path, *args: str, code: int = 0, env: dict | None = None) -> str:
    from click.testing import CliRunner

    from ireneo.cli import main

    result = CliRunner().invoke(main, [*args, "--home", str(home)], env=env)
    assert result.exit_code == code, result.output
    return result.output


def test_ireneo_forget_on_the_command_line(tmp_path, home):
    src = two_conversations(tmp_path)
    cli(home, "index", str(src))
    assert "Forgot conversation secret-talk: 1 conversation, 3 turns, 0 memories." in cli(
        home, "forget", "--session", "secret-talk"
    )
    assert occurrences(home, MARKER) == []
    assert "no conversation 'secret-talk'" in cli(
        home, "forget", "--session", "secret-talk", code=1
    )
    assert "exactly one of" in cli(home, "forget", code=2)
    assert "exactly one of" in cli(home, "forget", "--all", "--session", "x", code=2)
    document = json.loads(cli(home, "forget", "--all", "--json"))
    assert document == {
        "forgotten": "everything",
        "conversations": 1,
        "turns": 2,
        "passages": 2,
        "vectors": 2,
        "memories": 0,
    }
    log = json.loads(cli(home, "forget", "--log", "--json"))["audit"]
    assert [(e["action"], e["actor"]) for e in log] == [
        ("forget_conversation", "cli"),
        ("forget_all", "cli"),
    ]
    text = cli(home, "forget", "--log")
    assert "by cli" in text and "secret-talk" not in text
    assert "0 conversations" in cli(home, "forget", "--older-than", "1")


def test_ireneo_status_says_what_retention_is_set(home):
    assert "retention:     off" in cli(home, "status")
    out = cli(home, "status", env={"IRENEO_RETENTION_DAYS": "90"})
    assert "retention:     90 days" in out
    document = json.loads(cli(home, "status", "--json", env={"IRENEO_RETENTION_DAYS": "30"}))
    assert document["retention_days"] == 30.0


@pytest.mark.parametrize("how", ["one", "all", "older"])
def test_a_conversation_named_before_it_is_forgotten_has_no_name_after(indexed, how):
    """A memory keeps the public names it has read (they never change); a forget through it
    drops them, so a forgotten conversation is not found by its name's lookup."""
    ref = indexed.conversation_ref("secret-talk")
    assert indexed.conversation_ref("secret-talk") == ref  # the kept name, the same
    if how == "one":
        indexed.forget("secret-talk", now=NOW)
    elif how == "all":
        indexed.forget_all(now=NOW)
    else:
        indexed.forget_older_than(29.5, now=datetime(2026, 10, 31, 9, 1, 30, tzinfo=UTC))
    with pytest.raises(NotFound):
        indexed.conversation_ref("secret-talk")
