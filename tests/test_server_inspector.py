"""End to end with a third-party MCP client: the MCP Inspector's CLI (Node), pinned to 2.12.0
(older versions cannot send headers). Skipped only where `npx` is missing, and failed instead
when IRENEO_REQUIRE_ALL=1 (CI installs Node)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.conftest_server import RunningServer, conversation, make_settings

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if shutil.which("npx") is None:
        if os.environ.get("IRENEO_REQUIRE_ALL") == "1":
            pytest.fail("npx (Node.js) is required when IRENEO_REQUIRE_ALL=1")
        pytest.skip("npx (Node.js) is not installed")
    srv = RunningServer(make_settings(tmp_path_factory.mktemp("inspector-home")))
    texts = [
        "Shift handover: the pump bearing noise on motor K-2 is logged as ticket MT-4471.",
        "MT-4471 must be closed before the N-11 upgrade can be scheduled.",
    ]
    assert srv.post(conversation("handover-1", texts, user="alice")).status_code == 202
    assert (
        srv.post(conversation("south-1", ["Motor P-7 ticket MT-5120."], user="bob")).status_code
        == 202
    )
    yield srv
    srv.close()


def inspector(server: RunningServer, token: str | None, *args: str) -> subprocess.CompletedProcess:
    command = ["npx", "-y", INSPECTOR, "--cli", f"{server.url}/mcp", "--transport", "http"]
    if token is not None:
        command += ["--header", f"Authorization: Bearer {token}"]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


def test_the_inspector_lists_the_tools(server):
    done = inspector(server, server.token("alice"), "--method", "tools/list")
    assert done.returncode == 0, done.stderr
    tools = {tool["name"]: tool for tool in json.loads(done.stdout)["tools"]}
    assert set(tools) == {
        "recall_my_conversations",
        "read_conversation",
        "store_memory",
        "search_memories",
        "delete_memory",
    }
    description = tools["recall_my_conversations"]["description"]
    for phrase in (
        "last time",
        "earlier",
        "what did we decide",
        "the numbers we used",
        "short queries",
    ):
        assert phrase in description


def test_the_inspector_recalls_with_a_bearer_token(server):
    done = inspector(
        server,
        server.token("alice"),
        "--method",
        "tools/call",
        "--tool-name",
        "recall_my_conversations",
        "--tool-arg",
        "query=MT-4471 K-2",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["isError"] is False
    text = result["content"][0]["text"]
    assert "MT-4471" in text
    assert "MT-5120" not in text and "handover-1" not in text


def test_the_inspector_without_a_token_gets_nothing(server):
    done = inspector(server, None, "--method", "tools/list")
    assert done.returncode != 0
    assert "recall_my_conversations" not in done.stdout
