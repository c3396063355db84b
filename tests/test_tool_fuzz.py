"""Generated arguments for every MCP tool, sent by a real MCP client to a real server.

Each call ends in one of two ways: the tool refuses the arguments (an error result naming the
bad argument), or it answers with its text. It never answers "unavailable" (which would mean an
exception inside), never shows another user's words, and the server keeps serving.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ireneo.server.tools import MEMORY_UNAVAILABLE, UNAVAILABLE
from tests.conftest_hostile import McpSession
from tests.conftest_server import RunningServer, conversation, make_settings, refs_in

BOB_MARKERS = ["BOBSECRET-7731", "MT-5120", "zebrafinch"]
SETTINGS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)

texts = st.one_of(
    st.text(max_size=40),
    st.text(st.characters(categories=["Cc", "Cf", "Zs", "Mn"]), max_size=10),
    st.sampled_from(["", " ", "\x00", "*", '"', "NEAR(", "MT-4471", "x" * 10_000]),
)
anything = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        texts,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
turn_numbers = st.one_of(
    st.none(), st.integers(-(2**70), 2**70), st.integers(-3, 10), st.just(2**63), anything
)


@pytest.fixture(scope="module")
def alice(tmp_path_factory):
    srv = RunningServer(make_settings(tmp_path_factory.mktemp("tool-fuzz")))
    texts_bob = ["Ticket MT-5120, code BOBSECRET-7731.", "zebrafinch is the nickname."]
    texts_alice = [f"Turn {i} about pump K-2 and ticket MT-4471." for i in range(6)]
    assert srv.post(conversation("c-1", texts_bob, user="bob")).status_code == 202
    assert srv.post(conversation("c-1", texts_alice, user="alice")).status_code == 202
    srv.wait_indexed()
    session = McpSession(f"{srv.url}/mcp", srv.token("alice"))
    session.ref = refs_in(session.text("recall_my_conversations", query="MT-4471"))[0]
    yield session
    session.close()
    assert srv.http.get("/health").status_code == 200
    srv.close()


def check(session: McpSession, tool: str, arguments: dict) -> None:
    result = session.call(tool, **arguments)
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    assert text.strip(), (tool, arguments)
    assert text not in (UNAVAILABLE, MEMORY_UNAVAILABLE), (tool, arguments)
    for marker in BOB_MARKERS:
        assert marker not in text, (tool, arguments, text[:200])


def maybe_extra(arguments: dict, extra: dict) -> dict:
    return {**arguments, **extra}


extras = st.dictionaries(
    st.sampled_from(["user", "sub", "x", "query", "ref"]), anything, max_size=2
)


@SETTINGS
@given(query=st.one_of(texts, anything), extra=extras)
def test_recall_arguments(alice, query, extra):
    check(alice, "recall_my_conversations", maybe_extra({"query": query}, extra))


@SETTINGS
@given(
    ref=st.one_of(st.just(None), st.just(None), texts, anything), lo=turn_numbers, hi=turn_numbers
)
@example(ref=None, lo=2**63, hi=None)
@example(ref=None, lo=None, hi=-(2**70))
def test_read_conversation_arguments(alice, ref, lo, hi):
    arguments = {"ref": alice.ref if ref is None else ref, "from_turn": lo, "to_turn": hi}
    check(alice, "read_conversation", arguments)


@SETTINGS
@given(
    content=st.one_of(texts, anything),
    tags=st.one_of(st.none(), st.lists(texts, max_size=4), anything),
    importance=st.one_of(st.sampled_from(["low", "medium", "high"]), anything),
    source=st.one_of(st.none(), texts, anything),
)
def test_store_memory_arguments(alice, content, tags, importance, source):
    arguments = {"content": content, "tags": tags, "importance": importance, "source": source}
    check(alice, "store_memory", arguments)


@SETTINGS
@given(
    query=st.one_of(texts, anything),
    limit=st.one_of(st.integers(-(2**70), 2**70), anything),
    tags=st.one_of(st.none(), st.lists(texts, max_size=3), anything),
    min_importance=st.one_of(st.none(), st.sampled_from(["low", "medium", "high"]), anything),
)
def test_search_memories_arguments(alice, query, limit, tags, min_importance):
    arguments = {"query": query, "limit": limit, "tags": tags, "min_importance": min_importance}
    check(alice, "search_memories", arguments)


@SETTINGS
@given(memory_id=st.one_of(texts, anything))
def test_delete_memory_arguments(alice, memory_id):
    check(alice, "delete_memory", {"id": memory_id})
