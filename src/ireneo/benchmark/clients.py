"""The MCP clients the load benchmarks call with: fastmcp's, or a raw one (`--client`).

Clients and server share the two cores of a benchmark machine. fastmcp.Client's stack (its
session, anyio streams, pydantic models of every message) costs the benchmark's one process a
few ms of CPU a call, which lands in the latency measured and in the CPU left to the server; an
agent or gateway on its own machine pays it there. `RawClient` is the least the protocol asks:
one JSON-RPC `tools/call` POST per call naming protocol 2025-06-18, no session (the server is
stateless between requests), the answer read as JSON (or as its last SSE event). It posts with
aiohttp (the `bench` extra): 0.8-0.9 ms of the client's CPU a call against 2.6-3.0 ms with
httpx2, 20 clients against one server (docs/reliability.md, "A lighter raw client").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

CLIENTS = ("fastmcp", "raw")


@dataclass
class Block:
    text: str


@dataclass
class Result:
    """What the benchmarks read of fastmcp's CallToolResult."""

    content: list[Block]
    is_error: bool


class Bearer(Protocol):
    """A bearer token read at each call (one session may speak for many users)."""

    token: str


class RawClient:
    """fastmcp.Client's constructor, context and `call_tool`, as far as the benchmarks use them;
    `auth` is a bearer token, or an object whose `token` is read at each call."""

    VERSION = "2025-06-18"

    def __init__(self, url: str, auth: str | Bearer, timeout: float = 60) -> None:
        self.url, self.auth, self.timeout = url, auth, timeout
        self.ids = 0
        self.http = None  # an aiohttp.ClientSession inside `async with`

    async def __aenter__(self) -> RawClient:
        from ireneo.extras import need

        need("bench", "the raw MCP client (--client raw)", "aiohttp")
        import aiohttp

        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": self.VERSION,
        }
        self.http = aiohttp.ClientSession(
            headers=headers, timeout=aiohttp.ClientTimeout(total=self.timeout)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.http is not None:
            await self.http.close()

    async def call_tool(self, name: str, arguments: dict, raise_on_error: bool = True) -> Result:
        if self.http is None:
            raise RuntimeError("RawClient: call inside `async with`")
        self.ids += 1
        call = {"name": name, "arguments": arguments}
        body = {"jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": call}
        token = self.auth if isinstance(self.auth, str) else self.auth.token
        authorization = {"authorization": f"Bearer {token}"}
        async with self.http.post(self.url, json=body, headers=authorization) as answer:
            answer.raise_for_status()
            text = await answer.text()
            sse = answer.content_type == "text/event-stream"
        if sse:
            events = [line[5:] for line in text.splitlines() if line.startswith("data:")]
            message = json.loads(events[-1])
        else:
            message = json.loads(text)
        if "error" in message:
            raise RuntimeError(f"{name}: JSON-RPC error {message['error']}")
        result = message["result"]
        blocks = [Block(b.get("text", "")) for b in result.get("content", [])]
        if raise_on_error and result.get("isError"):
            raise RuntimeError(blocks[0].text if blocks else f"{name}: tool error")
        return Result(blocks, bool(result.get("isError")))


def described(name: str) -> str:
    """How a report names the client `--client NAME` picked."""
    return "raw JSON-RPC posts, protocol 2025-06-18" if name == "raw" else "fastmcp.Client"


def client_class(name: str) -> type:
    """The client class `--client NAME` names: "fastmcp" or "raw"."""
    if name == "raw":
        return RawClient
    if name != "fastmcp":
        raise ValueError(f"unknown MCP client {name!r}: give one of {', '.join(CLIENTS)}")
    from fastmcp import Client

    return Client
