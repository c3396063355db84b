"""Forgetting over real HTTP: the gateway's DELETE routes (ingest key), what stays and what goes,
the server's audit file, retention on a controllable clock; and no MCP tool that forgets."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from fastmcp import Client

from ireneo.server.logs import loggable_path as _loggable_path
from ireneo.server.memories import user_key
from ireneo.server.tools import NO_MEMORY
from ireneo.store.base import conversation_digest
from tests.conftest_server import INGEST_KEY, RunningServer, conversation, make_settings

MARKER = "pqzmarker0912"


class Clock:
    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def server(tmp_path):
    srv = RunningServer(make_settings(tmp_path / "home"))
    texts = [f"The N-11 shipment code word is {MARKER}.", f"Noted, {MARKER} for N-11."]
    assert srv.post(conversation("talk-1", texts, user="alice")).status_code == 202
    kept = ["Motor K-2 bearing is ticket MT-4471.", "Logged MT-4471."]
    assert srv.post(conversation("talk-2", kept, user="alice")).status_code == 202
    # bob has a conversation with the very same id
    bob = ["Bob's talk: pallet wrapper W-3 jams.", "Ticket MT-5120."]
    assert srv.post(conversation("talk-1", bob, user="bob")).status_code == 202
    srv.wait_indexed()
    yield srv
    srv.close()


def delete(srv: RunningServer, path: str, key: str | None = INGEST_KEY):
    headers = {"x-ingest-key": key} if key is not None else {}
    return srv.http.delete(path, headers=headers)


def on_disk(srv: RunningServer, user: str, needle: str) -> list[str]:
    home = srv.memory_dir(user)
    return [
        p.name
        for p in home.iterdir()
        if p.name.startswith("memory.db") and needle.encode() in p.read_bytes()
    ]


def test_the_routes_need_the_ingest_key(server):
    for key in (None, "wrong-key-0123456789", INGEST_KEY + "x"):
        assert delete(server, "/conversations/alice/talk-1", key).status_code == 401
        assert delete(server, "/users/alice", key).status_code == 401
    assert server.stored_turns("alice", "talk-1")


def test_bad_ids_are_refused_by_name(server):
    answer = delete(server, "/conversations/alice/bad:id")
    assert answer.status_code == 400
    assert "conversation_id" in answer.json()["error"]
    assert delete(server, "/conversations/%20/talk-1").status_code == 400


def test_forgetting_a_conversation_over_http(server):
    assert on_disk(server, "alice", MARKER)
    answer = delete(server, "/conversations/alice/talk-1")
    assert answer.status_code == 200
    assert answer.json() == {
        "forgotten": "talk-1",
        "conversations": 1,
        "turns": 2,
        "passages": 2,
        "vectors": 2,
        "memories": 0,
    }
    assert server.stored_turns("alice", "talk-1") == []
    assert MARKER not in server.recall("alice", f"N-11 shipment code word {MARKER}")
    assert on_disk(server, "alice", MARKER) == []
    # the rest of alice's memory, and bob's conversation of the same id, are untouched
    assert "MT-4471" in server.recall("alice", "K-2 bearing ticket")
    assert len(server.stored_turns("bob", "talk-1")) == 2
    # again: nothing left, still a success
    again = delete(server, "/conversations/alice/talk-1")
    assert again.status_code == 200 and again.json()["turns"] == 0


def test_the_audit_file_names_the_user_by_key_and_holds_no_text(server):
    delete(server, "/conversations/alice/talk-1")
    delete(server, "/users/bob")
    audit = server.settings.home / "audit.jsonl"
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["action"], e["actor"], e["user_key"]) for e in lines] == [
        ("forget_conversation", "route", user_key("alice")),
        ("forget_all", "route", user_key("bob")),
    ]
    assert lines[0]["conversation"] == conversation_digest("talk-1")
    assert lines[0]["turns"] == 2 and lines[1]["turns"] == 2
    text = audit.read_text()
    for word in ("alice", "bob", "talk-1", MARKER, "MT-5120"):
        assert word not in text
    assert audit.stat().st_mode & 0o077 == 0


def test_forgetting_a_user_removes_their_memory(server):
    bob_dir = server.memory_dir("bob")
    answer = delete(server, "/users/bob")
    assert answer.status_code == 200
    assert answer.json()["conversations"] == 1
    assert not bob_dir.exists()
    assert server.recall("bob", "pallet wrapper W-3") == NO_MEMORY
    assert "MT-4471" in server.recall("alice", "K-2 bearing ticket")
    # a user who was forgotten can start again
    assert server.post(conversation("new", ["Fresh start."], user="bob")).status_code == 202
    assert len(server.stored_turns("bob", "new")) == 1
    # a user with no memory: nothing to do, still a success
    assert delete(server, "/users/nobody").json()["turns"] == 0


def test_no_mcp_tool_forgets(server):
    async def names() -> list[str]:
        async with Client(f"{server.url}/mcp", auth=server.token("alice"), timeout=30) as client:
            return [tool.name for tool in await client.list_tools()]

    tools = asyncio.run(names())
    assert tools and not [name for name in tools if "forget" in name or "user" in name]


def test_request_logs_do_not_carry_the_ids_in_the_paths():
    assert (
        _loggable_path("/conversations/alice/talk-1") == "/conversations/{user}/{conversation_id}"
    )
    assert _loggable_path("/users/alice") == "/users/{user}"


def test_retention_forgets_old_conversations_on_the_clock(tmp_path):
    clock = Clock(datetime(2026, 10, 10, tzinfo=UTC))
    settings = make_settings(tmp_path / "home", retention_days=30.0, retention_interval=3600.0)
    srv = RunningServer(settings, clock=clock)
    try:
        old = conversation("old", ["Old talk about MT-1111."], day="2026-10-01")
        recent = conversation("recent", ["Recent talk about MT-2222."], day="2026-10-20")
        assert srv.post(old).status_code == 202
        assert srv.post(recent).status_code == 202
        retention = srv.state.retention
        assert retention.run_once() == 0  # nothing is 30 days old yet
        clock.now = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(hours=1)
        assert retention.run_once() == 1
        assert srv.stored_turns("alice", "old") == []
        assert len(srv.stored_turns("alice", "recent")) == 1
        entry = json.loads((settings.home / "audit.jsonl").read_text().splitlines()[-1])
        assert entry["actor"] == "retention" and entry["action"] == "forget_before"
        assert entry["before"] == "2026-10-02T01:00:00Z"
    finally:
        srv.close()


def test_retention_is_off_unless_set(tmp_path):
    from ireneo.config import Settings, SettingsError

    assert Settings.from_env({}).retention_days is None
    assert Settings.from_env({"IRENEO_RETENTION_DAYS": "90"}).retention_days == 90.0
    with pytest.raises(SettingsError, match="IRENEO_RETENTION_DAYS"):
        Settings.from_env({"IRENEO_RETENTION_DAYS": "0"})
    with pytest.raises(SettingsError, match="IRENEO_RETENTION_DAYS"):
        Settings.from_env({"IRENEO_RETENTION_DAYS": "forever"})
