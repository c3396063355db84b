"""The memory tools over real HTTP with real tokens and the official MCP client: each user's
memories are their own, even in the very same words."""

from __future__ import annotations

import asyncio
import re

import pytest
from fastmcp import Client

from ireneo.server.memories import user_key
from ireneo.server.tools import (
    BAD_SEARCH,
    DELETED,
    MEMORY_UNAVAILABLE,
    NO_MATCHING_MEMORY,
    NO_MEMORIES,
    NOT_STORED,
    STORED,
    UNKNOWN_MEMORY,
)
from tests.conftest_server import RunningServer, make_settings

FACT = "Prefers PostgreSQL over MySQL for new projects."
ID = re.compile(r"mem-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = RunningServer(make_settings(tmp_path_factory.mktemp("memories-home"), memory_tools=True))
    yield srv
    srv.close()


def call(srv: RunningServer, user: str, tool: str, **arguments) -> str:
    return srv.call(srv.token(user), tool, **arguments)


def store(srv: RunningServer, user: str, content: str, **arguments) -> str:
    text = call(srv, user, "store_memory", content=content, **arguments)
    assert text == STORED.format(id=ID.search(text).group()), text
    return ID.search(text).group()


async def call_result(srv: RunningServer, caller: str, tool: str, **arguments):
    async with Client(f"{srv.url}/mcp", auth=srv.token(caller), timeout=30) as client:
        return await client.call_tool(tool, arguments, raise_on_error=False)


async def tool_names(srv: RunningServer) -> list[str]:
    async with Client(f"{srv.url}/mcp", auth=srv.token("alice"), timeout=30) as client:
        return sorted(tool.name for tool in await client.list_tools())


def test_the_memory_tools_are_listed(server):
    assert asyncio.run(tool_names(server)) == [
        "delete_memory",
        "read_conversation",
        "recall_my_conversations",
        "search_memories",
        "store_memory",
    ]


def test_they_can_be_turned_off(tmp_path):
    srv = RunningServer(make_settings(tmp_path, memory_tools=False))
    try:
        assert asyncio.run(tool_names(srv)) == ["read_conversation", "recall_my_conversations"]
    finally:
        srv.close()


def test_store_then_search_shows_id_date_importance_tags_and_text(server):
    memory_id = store(server, "carol", FACT, tags=["db", "Prefs"], importance="high")
    text = call(server, "carol", "search_memories", query="which database for new projects")
    header, body = text.split("\n", 1)
    assert re.fullmatch(
        rf"\[1\] {memory_id} · \d{{4}}-\d\d-\d\d · high · tags: db, prefs", header
    ), header
    assert body == "    | " + FACT


def test_alice_never_sees_or_deletes_bobs_memories_even_in_the_same_words(server):
    alice_id = store(server, "alice", FACT, tags=["db"])
    assert call(server, "bob", "search_memories", query="PostgreSQL MySQL") == NO_MEMORIES
    bob_id = store(server, "bob", FACT, tags=["db"])  # no dedup across users: a memory of his own
    assert bob_id != alice_id
    alice_sees = call(server, "alice", "search_memories", query="PostgreSQL MySQL")
    assert alice_id in alice_sees and bob_id not in alice_sees
    assert alice_sees.count("[") == 1

    # bob's id reads exactly like an unknown id, and deletes nothing
    assert call(server, "alice", "delete_memory", id=bob_id) == UNKNOWN_MEMORY
    assert call(server, "alice", "delete_memory", id="mem-000000000000") == UNKNOWN_MEMORY
    assert bob_id in call(server, "bob", "search_memories", query="PostgreSQL")

    assert call(server, "bob", "delete_memory", id=bob_id) == DELETED.format(id=bob_id)
    assert call(server, "bob", "delete_memory", id=bob_id) == UNKNOWN_MEMORY
    assert call(server, "bob", "search_memories", query="PostgreSQL") == NO_MEMORIES
    assert alice_id in call(server, "alice", "search_memories", query="PostgreSQL")


def test_a_user_without_any_memory_directory_gets_plain_answers(server):
    assert call(server, "newcomer", "search_memories", query="anything") == NO_MEMORIES
    assert call(server, "newcomer", "delete_memory", id="mem-000000000000") == UNKNOWN_MEMORY
    assert not server.memory_dir("newcomer").exists()


def test_a_near_duplicate_updates_the_same_memory(server):
    first = store(server, "dana", "Dana's invoices go to finance@example.com.")
    again = call(
        server, "dana", "store_memory", content="Dana's invoices go to finance@example.com!"
    )
    assert again.startswith(f"Updated memory {first}: ") and again.endswith("(updates: 1).")
    assert call(server, "dana", "search_memories", query="invoices").count("mem-") == 1


def test_tag_filters_fail_closed_over_mcp(server):
    store(server, "emma", "The office wifi password changes every March.")  # no tags
    tagged = store(server, "emma", "Emma's laptop is a ThinkPad T14.", tags=["hardware"])
    assert (
        call(server, "emma", "search_memories", query="office wifi password", tags=["wifi"])
        == NO_MATCHING_MEMORY
    )
    found = call(server, "emma", "search_memories", query="wifi", tags=["hardware"])
    assert tagged in found and "wifi password" not in found


def test_min_importance_and_limit(server):
    store(server, "finn", "Finn's parking spot is P-12.", importance="low")
    high = store(server, "finn", "Finn is allergic to peanuts.", importance="high")
    text = call(server, "finn", "search_memories", query="Finn", min_importance="high")
    assert high in text and "P-12" not in text
    assert call(server, "finn", "search_memories", query="Finn", limit=1).count("mem-") == 1


def test_bad_arguments_store_nothing(server):
    assert call(server, "gail", "store_memory", content="   ") == NOT_STORED.format(
        reason="the content is empty"
    )
    too_many = [f"t{i}" for i in range(21)]
    assert call(server, "gail", "store_memory", content="x", tags=too_many).startswith(
        "Nothing stored: tags: at most 20 tags"
    )
    result = asyncio.run(
        call_result(server, "gail", "store_memory", content="x", importance="urgent")
    )
    assert result.is_error
    result = asyncio.run(call_result(server, "gail", "search_memories", query="x", limit=500))
    assert result.is_error
    assert call(server, "gail", "search_memories", query="x", tags=["y" * 65]) == BAD_SEARCH.format(
        reason="tags: a tag holds at most 64 characters"
    )
    assert call(server, "gail", "search_memories", query="anything") == NO_MEMORIES


def test_the_user_comes_from_the_token_not_an_argument(server):
    store(server, "hana", "Hana's locker code is 4471.")
    result = asyncio.run(
        call_result(server, "ivan", "search_memories", query="locker", user="hana")
    )
    assert result.is_error and "4471" not in result.content[0].text
    result = asyncio.run(
        call_result(server, "ivan", "store_memory", content="planted", user="hana")
    )
    assert result.is_error
    assert "planted" not in call(server, "hana", "search_memories", query="planted")


def test_memory_tools_fail_soft_when_the_memory_cannot_be_opened(server):
    path = server.memory_dir("oscar")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a memory directory")
    assert call(server, "oscar", "store_memory", content=FACT) == MEMORY_UNAVAILABLE
    assert call(server, "oscar", "search_memories", query="x") == MEMORY_UNAVAILABLE
    assert call(server, "oscar", "delete_memory", id="mem-000000000000") == MEMORY_UNAVAILABLE


def test_tool_text_shows_no_paths_or_user_keys(server):
    store(server, "kate@example.com", FACT)
    text = call(server, "kate@example.com", "search_memories", query="PostgreSQL")
    assert str(server.settings.home) not in text and user_key("kate@example.com") not in text
    assert "kate" not in text
