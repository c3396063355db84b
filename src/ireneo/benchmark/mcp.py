"""MCP recall latency: `recall_my_conversations` as an agent calls it, through a real server.

The memory measured lives where a server home keeps one user's (`memory_home`); a real
`ireneo serve` in its own process on 127.0.0.1 (`server_process.ServerProcess`) serves it, and
the official MCP client (fastmcp over streamable HTTP, one session kept open) asks every
question, short form then long, one call after another, after a few calls to warm the server.
The time is the client's: HTTP, authentication, the protocol, the tool's recall and its text.
A server that does not start or a call that fails raises `ServerFailed`, naming the server's
last log lines (its log: `server.log` in the server home).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path

from ireneo.benchmark.generate import Question
from ireneo.benchmark.server_process import ServerProcess
from ireneo.server.memories import user_key
from ireneo.server.tools import UNAVAILABLE

USER = "bench"
WARMUP = 5
TOOL = "recall_my_conversations"
# the server's own: ServerProcess sets them, or the bench chooses them (the memory's model)
_SERVER_OWN = {
    "IRENEO_HOME",
    "IRENEO_DATABASE_URL",
    "IRENEO_USER",
    "IRENEO_MODEL",
    "IRENEO_INGEST_KEY",
    "IRENEO_JWT_SECRET",
    "IRENEO_JWT_ISSUER",
    "IRENEO_JWT_AUDIENCE",
}


class ServerFailed(RuntimeError):
    """The server did not start or a call failed; the message ends with the server's log."""


def memory_home(server_home: Path) -> Path:
    """Where a server whose home is `server_home` keeps the bench user's memory."""
    return server_home / "users" / user_key(USER)


def mcp_latency(server_home: Path, questions: list[Question]) -> dict[str, float]:
    """p50/p95 milliseconds per tool call, the server's RSS after them, and how many calls
    answered with the tool's failure sentence (a timeout on a busy machine)."""
    queries = [getattr(q, form) for q in questions for form in ("short", "long")]
    # the environment's other settings (model cache, reranker...) reach the server as they
    # reach the bench's other children
    passed = {
        k: v for k, v in os.environ.items() if k.startswith("IRENEO_") and k not in _SERVER_OWN
    }
    log = server_home / "server.log"
    server = ServerProcess(server_home, env_extra=passed, log_path=log)
    try:
        server.start(timeout=180.0)
        times, failed = asyncio.run(_calls(f"{server.url}/mcp", server.token(USER), queries))
        rss = server.rss_mb()
    except Exception as exc:  # the server's or the client's: either way, say what the log says
        raise ServerFailed(
            f"MCP recall failed: {exc}; the server's log ends: {_tail(log)}"
        ) from exc
    finally:
        server.stop()
    times.sort()
    return {
        "mcp_p50_ms": statistics.median(times),
        "mcp_p95_ms": times[int(0.95 * (len(times) - 1))],
        "mcp_server_rss_mb": rss,
        "mcp_unavailable": float(failed),
    }


async def _calls(url: str, token: str, queries: list[str]) -> tuple[list[float], int]:
    from fastmcp import Client

    times, failed = [], 0
    async with Client(url, auth=token, timeout=120) as client:
        for query in queries[:WARMUP]:
            await client.call_tool(TOOL, {"query": query})
        for query in queries:
            started = time.perf_counter()
            result = await client.call_tool(TOOL, {"query": query})
            times.append((time.perf_counter() - started) * 1000)
            failed += _text(result) == UNAVAILABLE
    return times, failed


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])[-1500:]
    except OSError:
        return "(no log)"


def _text(result: object) -> str:
    content = getattr(result, "content", None) or []
    return "".join(getattr(part, "text", "") for part in content).strip()
