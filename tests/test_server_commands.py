"""The server's verbs as a user runs them: `ireneo mcp` over a real stdio MCP client,
`ireneo serve` as a real process, `ireneo token`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import httpx2
import jwt
import pytest
from click.testing import CliRunner
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from ireneo import Memory
from ireneo.formats.gateway import parse_gateway_body
from ireneo.server.commands import serve, token
from ireneo.server.tools import NO_MEMORY, UNKNOWN_REF
from tests.conftest_server import (
    AUDIENCE,
    INGEST_KEY,
    ISSUER,
    JWT_SECRET,
    PYTHON,
    SERVER_ENV,
    conversation,
    json_events,
    refs_in,
    start_server,
    stop_server,
    subprocess_env,
    wait_ready,
)

TEXTS = [
    "Forecast for the budget: hyperbolic case, q0 1,500 units/d, Di 0.25/yr, b 0.6.",
    "At 18 months that gives 1,069.5 units/d and 693.3 k units.",
    "We pick the hyperbolic case as base case.",
]


def stdio_client(home) -> Client:
    transport = StdioTransport(
        command=PYTHON,
        args=["-m", "ireneo.cli", "mcp", "--home", str(home)],
        env=subprocess_env(),
    )
    return Client(transport, timeout=60)


async def stdio_session(home, calls):
    async with stdio_client(home) as client:
        tools = sorted(tool.name for tool in await client.list_tools())
        out = [tools]
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            out.append(result.content[0].text)
        return out


def test_mcp_serves_one_memory_over_stdio(tmp_path):
    home = tmp_path / "memory"
    _, _, turns = parse_gateway_body(conversation("budget-1", TEXTS))
    with Memory(home) as memory:
        memory.store_turns(turns)
        memory.embed_pending()
    tools, recalled, unknown = asyncio.run(
        stdio_session(
            home,
            [
                ("recall_my_conversations", {"query": "hyperbolic base case q0"}),
                ("read_conversation", {"ref": "ffffffffffff"}),
            ],
        )
    )
    assert tools == [
        "delete_memory",
        "read_conversation",
        "recall_my_conversations",
        "search_memories",
        "store_memory",
    ]
    assert "hyperbolic" in recalled and "budget-1" not in recalled
    assert unknown == UNKNOWN_REF
    ref = refs_in(recalled)[0]
    (read,) = asyncio.run(
        stdio_session(home, [("read_conversation", {"ref": ref, "from_turn": 1})])
    )[1:]
    assert TEXTS[1] in read and TEXTS[0] not in read


def test_mcp_on_a_home_that_does_not_exist_has_no_memory_and_creates_none(tmp_path):
    home = tmp_path / "nowhere"
    (answer,) = asyncio.run(stdio_session(home, [("recall_my_conversations", {"query": "x"})]))[1:]
    assert answer == NO_MEMORY
    assert not home.exists()


def test_token_prints_a_token_the_server_accepts(monkeypatch):
    for name, value in SERVER_ENV.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(token, ["--user", "alice", "--ttl", "120"])
    assert result.exit_code == 0, result.output
    claims = jwt.decode(
        result.output.strip(), JWT_SECRET, algorithms=["HS256"], audience=AUDIENCE, issuer=ISSUER
    )
    assert claims["sub"] == "alice"
    assert 115 <= claims["exp"] - time.time() <= 121


def test_token_json(monkeypatch):
    for name, value in SERVER_ENV.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(token, ["--user", "bob", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert (document["user"], document["expires_in"]) == ("bob", 3600)
    claims = jwt.decode(
        document["token"], JWT_SECRET, algorithms=["HS256"], audience=AUDIENCE, issuer=ISSUER
    )
    assert claims["sub"] == "bob"


def test_token_without_a_secret_says_what_to_set(monkeypatch):
    monkeypatch.delenv("IRENEO_JWT_SECRET", raising=False)
    result = CliRunner().invoke(token, ["--user", "alice"])
    assert result.exit_code != 0
    assert "IRENEO_JWT_SECRET" in result.output


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**SERVER_ENV, "IRENEO_INGEST_KEY": ""}, "IRENEO_INGEST_KEY is not set"),
        ({**SERVER_ENV, "IRENEO_INGEST_KEY": "short"}, "IRENEO_INGEST_KEY is too short"),
        ({**SERVER_ENV, "IRENEO_JWT_SECRET": ""}, "no token key"),
        ({**SERVER_ENV, "IRENEO_RECALL_TIMEOUT": "soon"}, "IRENEO_RECALL_TIMEOUT"),
    ],
)
def test_serve_refuses_to_start_with_unsafe_settings(monkeypatch, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(serve, ["--port", "1"])
    assert result.exit_code == 1
    assert message in result.output


def test_serve_runs_the_server(tmp_path):
    env = subprocess_env(IRENEO_HOME=str(tmp_path / "home"), **SERVER_ENV)
    process, url = start_server(env)
    try:
        wait_ready(process, url, timeout=60)
        body = conversation("budget-1", TEXTS, user="alice")
        response = httpx2.post(
            f"{url}/turns", json=body, headers={"x-ingest-key": INGEST_KEY}, timeout=30
        )
        assert response.status_code == 202
        minted = subprocess.run(
            [PYTHON, "-m", "ireneo.cli", "token", "--user", "alice"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

        async def recall():
            async with Client(f"{url}/mcp", auth=minted, timeout=30) as client:
                return (
                    (await client.call_tool("recall_my_conversations", {"query": "hyperbolic"}))
                    .content[0]
                    .text
                )

        assert "hyperbolic" in asyncio.run(recall())
    finally:
        stderr = stop_server(process, timeout=20)
    assert process.returncode == 0, stderr
    events = json_events(stderr)
    assert {"server_start", "ingest", "recall", "server_stop"} <= {e.get("event") for e in events}
    assert all(line.startswith("{") for line in stderr.splitlines() if line.strip())
    for forbidden in ("hyperbolic", minted, INGEST_KEY, '"alice"'):
        assert forbidden not in stderr
