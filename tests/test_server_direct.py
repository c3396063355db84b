"""The direct path for `tools/call` (ireneo.server.direct) against the SDK's, byte for byte.

Two real servers on one home, one with the direct path and one without, take the same raw
requests: every answer (status, content type, body) must be the same, and the direct path must
have answered exactly the well-formed calls of `recall_my_conversations`. Real MCP clients
(fastmcp's and the SDK's) get the same text from both, and the per-call log lines stay.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import httpx2
import pytest
from fastmcp import Client

from ireneo.server.direct import DirectCalls
from tests.conftest_server import RunningServer, conversation, make_settings

TEXTS = [
    "Shift handover: the pump bearing noise on motor K-2 is logged as ticket MT-4471.",
    "Noted. MT-4471 must be closed before the N-11 upgrade — à 91 % de charge — is scheduled.",
    "Owner of the follow-up is Priya, due Thursday.",
]
JSON_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """(with the direct path, without it), on one home holding alice's conversation."""
    settings = make_settings(tmp_path_factory.mktemp("direct-home"))
    direct = RunningServer(settings)
    plain = RunningServer(settings, direct=False)
    assert direct.post(conversation("handover-1", TEXTS, user="alice")).status_code == 202
    direct.wait_indexed()
    yield direct, plain
    direct.close()
    plain.close()


def answered(server: RunningServer) -> int:
    """How many calls the server's direct path has answered (None: it has none)."""
    app: Any = server.app.middleware_stack
    while app is not None:
        if isinstance(app, DirectCalls):
            return app.answered
        app = getattr(app, "app", None)
    raise AssertionError("no direct path in this server")


def call(name: str = "recall_my_conversations", rid: Any = 7, **arguments: Any) -> dict:
    params = {"name": name, "arguments": arguments or {"query": "MT-4471"}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def modern(body: dict, **meta: Any) -> dict:
    body = json.loads(json.dumps(body))
    body["params"]["_meta"] = ENVELOPE | meta
    return body


def modern_headers(name: str = "recall_my_conversations", method: str = "tools/call") -> dict:
    return JSON_HEADERS | {"mcp-protocol-version": MODERN, "mcp-method": method, "mcp-name": name}


def both(servers, body: Any, headers: dict | None = None, user: str | None = "alice"):
    """The two servers' answers to one request: (direct's, plain's), each (status, type, body)."""
    direct, plain = servers
    answers = []
    for server in (direct, plain):
        sent = dict(JSON_HEADERS if headers is None else headers)
        if user is not None:
            sent["authorization"] = f"Bearer {server.token(user)}"
        content = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False)
        response = server.http.post("/mcp", content=content, headers=sent)
        answers.append(
            (response.status_code, response.headers.get("content-type"), response.content)
        )
    return answers


QUERIES = ["MT-4471", "N-11 upgrade à 91 %", "nothing like this", "", "x" * 5000, "a\u2028b\x01\n"]
LEGACY = [None, "2025-06-18", "2025-11-25", "2025-03-26", "2024-11-05"]


@pytest.mark.parametrize("version", LEGACY + [MODERN])
@pytest.mark.parametrize("query", QUERIES)
def test_the_direct_path_answers_a_call_with_the_sdks_very_bytes(servers, version, query):
    headers = dict(JSON_HEADERS)
    body = call(query=query)
    if version == MODERN:
        headers, body = modern_headers(), modern(body, progressToken=3)
        body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "debug"
    elif version is not None:
        headers["mcp-protocol-version"] = version
    before = answered(servers[0])
    mine, sdks = both(servers, body, headers)
    assert mine == sdks
    assert mine[0] == 200 and json.loads(mine[2])["result"]["content"][0]["text"]
    assert answered(servers[0]) == before + 1


@pytest.mark.parametrize("rid", [0, -5, 2**40, "abc", "", "é"])
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_ids_come_back_as_sent(servers, rid, era):
    body, headers = call(rid=rid), None
    if era == "modern":
        body, headers = modern(body), modern_headers()
    before = answered(servers[0])
    mine, sdks = both(servers, body, headers)
    assert mine == sdks and json.loads(mine[2])["id"] == rid
    assert answered(servers[0]) == before + 1


def test_a_user_without_memory_gets_the_same_sentence(servers):
    mine, sdks = both(servers, call(), user="nobody-yet")
    assert mine == sdks and b"No earlier conversations" in mine[2]


OTHERS = {
    "another tool": call("read_conversation", ref="nope"),
    "an unknown tool": call("no_such_tool"),
    "a number for the query": call(query=5),
    "a null query": call(query=None),
    "an extra argument": call(query="MT-4471", limit=3),
    "no arguments": {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}},
    "a _meta in a 2025 call": {
        **call(),
        "params": {**call()["params"], "_meta": {"progressToken": 1}},
    },
    "a float id": call(rid=1.5),
    "a huge id": call(rid=2**60),
    "a boolean id": call(rid=True),
    "a null id": call(rid=None),
    "no id (a notification)": {k: v for k, v in call().items() if k != "id"},
    "a batch": [call(), call(rid=8)],
    "jsonrpc 1.0": {**call(), "jsonrpc": "1.0"},
    "tools/list": {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    "initialize": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    },
    "an unknown method": {"jsonrpc": "2.0", "id": 3, "method": "tools/fly", "params": {}},
}


@pytest.mark.parametrize("what", OTHERS)
def test_other_requests_go_to_the_sdk(servers, what):
    before = answered(servers[0])
    mine, sdks = both(servers, OTHERS[what])
    assert mine == sdks
    assert answered(servers[0]) == before


BAD_BODIES = {
    "not json": b"{not json",
    "empty": b"",
    "a string": b'"tools/call"',
    "deep nesting": b"[" * 5000 + b"]" * 5000,
}


@pytest.mark.parametrize("what", BAD_BODIES)
def test_bad_bodies_get_the_sdks_answer(servers, what):
    before = answered(servers[0])
    mine, sdks = both(servers, BAD_BODIES[what])
    assert mine == sdks and mine[0] >= 400
    assert answered(servers[0]) == before


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_duplicated_key_reads_as_the_sdk_reads_it(servers, era):
    body = b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":'
    body += b'"recall_my_conversations","arguments":{"query":"x","query":"MT-4471"}'
    if era == "modern":
        body += b',"_meta":' + json.dumps(ENVELOPE).encode()
    mine, sdks = both(servers, body + b"}}", modern_headers() if era == "modern" else None)
    assert mine == sdks and mine[0] == 200 and b"MT-4471" in mine[2]


HEADS = {
    "no accept": {"content-type": "application/json"},
    "accept SSE only": {"accept": "text/event-stream", "content-type": "application/json"},
    "accept anything": {"accept": "*/*", "content-type": "application/json"},
    "a text body": {"accept": "application/json", "content-type": "text/plain"},
    "an upper-case type": {"accept": "application/json", "content-type": "Application/JSON"},
    "a charset": {"accept": "application/json", "content-type": "application/json; charset=utf-8"},
    "an unknown version": JSON_HEADERS | {"mcp-protocol-version": "2099-01-01"},
    "a session id": JSON_HEADERS | {"mcp-session-id": "abc"},
    "an mcp-param header": JSON_HEADERS | {"mcp-param-query": "MT-4471"},
}


@pytest.mark.parametrize("what", HEADS)
def test_heads_get_the_sdks_answer(servers, what):
    mine, sdks = both(servers, call(), HEADS[what])
    assert mine == sdks


MODERN_OTHERS = {
    "no _meta": (call(), modern_headers()),
    "a wrong Mcp-Name": (modern(call()), modern_headers(name="read_conversation")),
    "a wrong Mcp-Method": (modern(call()), modern_headers(method="tools/list")),
    "no Mcp-Name": (
        modern(call()),
        {k: v for k, v in modern_headers().items() if k != "mcp-name"},
    ),
    "another version in _meta": (
        modern(call(), **{"io.modelcontextprotocol/protocolVersion": "2025-06-18"}),
        modern_headers(),
    ),
    "an unknown _meta key": (modern(call(), other=1), modern_headers()),
    "a bad log level": (
        modern(call(), **{"io.modelcontextprotocol/logLevel": "loud"}),
        modern_headers(),
    ),
    "a log level of another type": (
        modern(call(), **{"io.modelcontextprotocol/logLevel": 3}),
        modern_headers(),
    ),
    "a progress token of another type": (modern(call(), progressToken={"a": 1}), modern_headers()),
    "a float progress token": (modern(call(), progressToken=1.5), modern_headers()),
    "client info of another type": (
        modern(call(), **{"io.modelcontextprotocol/clientInfo": "me"}),
        modern_headers(),
    ),
    "capabilities of another type": (
        modern(call(), **{"io.modelcontextprotocol/clientCapabilities": []}),
        modern_headers(),
    ),
    "an unknown tool": (modern(call("no_such_tool")), modern_headers("no_such_tool")),
}


@pytest.mark.parametrize("what", MODERN_OTHERS)
def test_the_2026_protocols_refusals_stay_the_sdks(servers, what):
    body, headers = MODERN_OTHERS[what]
    before = answered(servers[0])
    mine, sdks = both(servers, body, headers)
    assert mine == sdks
    assert answered(servers[0]) == before


@pytest.mark.parametrize("token", [None, "not-a-jwt"])
def test_callers_without_a_good_token_get_the_same_401(servers, token):
    answers = []
    for server in servers:
        headers = dict(JSON_HEADERS)
        if token:
            headers["authorization"] = f"Bearer {token}"
        response = server.http.post("/mcp", json=call(), headers=headers)
        answers.append((response.status_code, response.headers.get("www-authenticate")))
    assert answers[0] == answers[1] and answers[0][0] == 401


def test_fastmcps_client_gets_the_same_text(servers):
    async def recall(server: RunningServer) -> str:
        async with Client(f"{server.url}/mcp", auth=server.token("alice"), timeout=30) as client:
            result = await client.call_tool("recall_my_conversations", {"query": "MT-4471"})
            assert not result.is_error
            return result.content[0].text

    before = answered(servers[0])
    texts = [asyncio.run(recall(server)) for server in servers]
    assert texts[0] == texts[1] and "MT-4471" in texts[0]
    assert answered(servers[0]) == before + 1


def test_the_sdks_client_gets_the_same_text(servers):
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def recall(server: RunningServer) -> str:
        headers = {"authorization": f"Bearer {server.token('alice')}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(f"{server.url}/mcp", http_client=http) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            result = await session.call_tool("recall_my_conversations", {"query": "N-11"})
            assert not result.is_error
            return result.content[0].text

    texts = [asyncio.run(recall(server)) for server in servers]
    assert texts[0] == texts[1] and "N-11" in texts[0]


def test_a_direct_call_logs_its_request_and_recall_lines(servers, caplog):
    caplog.set_level(logging.INFO, logger="ireneo.server")
    before = answered(servers[0])
    mine, _ = both(servers[:1] * 2, call(query="MT-4471"))
    assert mine[0] == 200 and answered(servers[0]) == before + 2
    deadline = time.monotonic() + 10  # a request's line is written once its answer is sent
    while True:
        events = [(r.msg, getattr(r, "ireneo_fields", {})) for r in list(caplog.records)]
        recalls = [fields for event, fields in events if event == "recall"]
        requests = [fields for event, fields in events if event == "request"]
        if len(requests) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(recalls) == 2 and all(f["user_key"] and f["outcome"] for f in recalls)
    assert all(f["query_chars"] == 7 for f in recalls)
    assert [f["path"] for f in requests if f["path"] == "/mcp"] == ["/mcp", "/mcp"]


def test_the_inspector_gets_the_same_answer(servers):
    """The third-party client (Node), through the direct path and through the SDK."""
    import os
    import shutil
    import subprocess

    if shutil.which("npx") is None:
        if os.environ.get("IRENEO_REQUIRE_ALL") == "1":
            pytest.fail("npx (Node.js) is required when IRENEO_REQUIRE_ALL=1")
        pytest.skip("npx (Node.js) is not installed")
    outputs = []
    before = answered(servers[0])
    for server in servers:
        command = ["npx", "-y", "@modelcontextprotocol/inspector@2.12.0", "--cli"]
        command += [f"{server.url}/mcp", "--transport", "http"]
        command += ["--header", f"Authorization: Bearer {server.token('alice')}"]
        command += ["--method", "tools/call", "--tool-name", "recall_my_conversations"]
        command += ["--tool-arg", "query=MT-4471 à"]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1] and "MT-4471" in outputs[0]["content"][0]["text"]
    assert answered(servers[0]) == before + 1
