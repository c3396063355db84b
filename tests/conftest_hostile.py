"""Helpers for the hostile-input and isolation tests: what a server's memories hold, taken
through the Python API (so the same check reads any store), and the probe count they report."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from typing import Any

from fastmcp import Client

from tests.conftest_server import RunningServer


def memory_snapshot(server: RunningServer, key: str) -> str | None:
    """A digest of everything one user's memory holds (turns, refs, explicit memories), or None
    when the user has no memory."""
    digest = hashlib.sha256()
    with server.state.registry.lease(key, create=False) as memory:
        if memory is None:
            return None
        for summary in memory.sessions():
            digest.update(
                f"session {summary.session_id} {memory.conversation_ref(summary.session_id)}\n".encode()
            )
            for turn in memory.get(summary.session_id):
                digest.update(f"{turn.turn_uuid} {turn.seq} {turn.ts} {turn.role}\n".encode())
                digest.update(turn.text.encode("utf-8") + b"\n")
        for record in memory.store.memory_records():
            digest.update(f"memory {record.memory_id} {record.updated_at}\n".encode())
            digest.update(record.content.encode("utf-8") + b"\n")
    return digest.hexdigest()


def store_snapshot(server: RunningServer) -> dict[str, str | None]:
    """Every user's memory digest, by user key."""
    return {key: memory_snapshot(server, key) for key in server.state.registry.keys_on_disk()}


class ProbeLedger:
    """Counts probes by kind and records leaks; the isolation tests report it at the end."""

    def __init__(self) -> None:
        self.probes: Counter[str] = Counter()
        self.leaks: list[str] = []

    def check(self, kind: str, answer: str, markers: list[str]) -> None:
        self.probes[kind] += 1
        leaked = [marker for marker in markers if marker in answer]
        if leaked:
            self.leaks.append(f"{kind}: {leaked} in {answer[:200]!r}")

    def record(self, kind: str, leaked: bool, detail: str = "") -> None:
        self.probes[kind] += 1
        if leaked:
            self.leaks.append(f"{kind}: {detail}")

    @property
    def total(self) -> int:
        return sum(self.probes.values())


class McpSession:
    """One MCP client session kept open on a loop of its own, for many calls."""

    def __init__(self, url: str, token: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = Client(url, auth=token, timeout=30)
        self._run(self.client.__aenter__())

    def _run(self, coro) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def call(self, tool: str, **arguments: Any):
        return self._run(self.client.call_tool(tool, arguments, raise_on_error=False))

    def text(self, tool: str, **arguments: Any) -> str:
        result = self.call(tool, **arguments)
        return "\n".join(getattr(c, "text", "") for c in result.content)

    def close(self) -> None:
        self._run(self.client.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
