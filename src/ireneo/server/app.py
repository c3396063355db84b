"""The HTTP server: `POST /turns`, `/mcp` (bearer JWT), `GET /health`.

`create_app(settings)` builds the ASGI app; `ireneo serve` runs it under uvicorn. The server
keeps no state beyond the memories on disk: open memories, index tasks and recall slots are
caches and limits, rebuilt on start (users with turns still waiting for vectors are indexed
again on start).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastmcp import FastMCP
from fastmcp.server.dependencies import get_access_token
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ireneo.server.auth import build_verifier, caller_user
from ireneo.server.indexer import Indexer
from ireneo.server.ingest import IngestRoute
from ireneo.server.logs import log_event
from ireneo.server.memories import MemoryRegistry, user_key
from ireneo.server.settings import Settings
from ireneo.server.tools import MemoryLease, Recaller, register_tools

log = logging.getLogger("ireneo.server")

INSTRUCTIONS = (
    "Verbatim recall of the current user's earlier conversations with this assistant. "
    "Call recall_my_conversations when the user refers to something discussed before."
)


class ConfigError(ValueError):
    """Settings the server refuses to start with; the message lists every problem."""


@dataclass
class ServerState:
    """What one running server holds; `app.state.ireneo` (tests read its counters)."""

    settings: Settings
    registry: MemoryRegistry
    indexer: Indexer
    recaller: Recaller
    mcp: FastMCP


def recaller_for(settings: Settings) -> Recaller:
    return Recaller(
        k=settings.recall_k,
        max_chars=settings.max_result_chars,
        max_query_chars=settings.max_query_chars,
        concurrency=settings.recall_concurrency,
        timeout=settings.recall_timeout,
    )


def create_app(settings: Settings) -> Starlette:
    """The server as an ASGI app. Raises ConfigError when the settings are not safe to serve."""
    problems = settings.problems()
    if problems:
        raise ConfigError("; ".join(problems))

    registry = MemoryRegistry(
        settings.users_dir, capacity=settings.max_open_memories, model=settings.model
    )
    indexer = Indexer(
        registry, debounce=settings.index_debounce, concurrency=settings.index_concurrency
    )
    recaller = recaller_for(settings)

    @asynccontextmanager
    async def lifespan(server: FastMCP):
        settings.users_dir.mkdir(parents=True, exist_ok=True)
        catch_up = asyncio.get_running_loop().create_task(indexer.catch_up())
        log_event(log, "server_start", dev=settings.dev, auth=settings.jwt_algorithm)
        try:
            yield {}
        finally:
            catch_up.cancel()
            await indexer.stop()
            await asyncio.to_thread(registry.close_all)
            log_event(log, "server_stop", index_runs=sum(indexer.runs.values()))

    mcp = FastMCP(
        "ireneo",
        instructions=INSTRUCTIONS,
        auth=build_verifier(settings),
        lifespan=lifespan,
    )

    def caller() -> tuple[str, MemoryLease] | None:
        user = caller_user(get_access_token())
        if user is None:
            return None
        key = user_key(user)
        return key, lambda: registry.lease(key, create=False)

    register_tools(mcp, recaller, caller)

    ingest = IngestRoute(
        registry=registry,
        indexer=indexer,
        ingest_key=settings.ingest_key,
        max_body_bytes=settings.max_body_bytes,
    )

    @mcp.custom_route("/turns", methods=["POST"], include_in_schema=False)
    async def turns(request: Request) -> JSONResponse:
        return await ingest(request)

    @mcp.custom_route("/health", methods=["GET"], include_in_schema=False)
    async def health(request: Request) -> JSONResponse:
        ready = _home_ready(settings)
        return JSONResponse(
            {"status": "ok" if ready else "unavailable", "indexing": indexer.busy()},
            status_code=200 if ready else 503,
        )

    app = mcp.http_app(
        path="/mcp",
        stateless_http=True,
        json_response=True,
        middleware=[Middleware(RequestLog)],
    )
    app.state.ireneo = ServerState(settings, registry, indexer, recaller, mcp)
    return app


def _home_ready(settings: Settings) -> bool:
    try:
        settings.users_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return settings.users_dir.is_dir() and os.access(settings.users_dir, os.W_OK | os.X_OK)


class RequestLog:
    """One `request` log line per HTTP request: method, path, status, duration; no query string."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            log_event(
                log,
                "request",
                method=scope.get("method"),
                path=scope.get("path"),
                status=status,
                ms=round((time.monotonic() - started) * 1000, 1),
            )
