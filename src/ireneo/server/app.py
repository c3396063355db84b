"""The HTTP server: `POST /turns`, `/mcp` (bearer JWT), `GET /health`, and the chat loop's
`POST /chat` and `GET /memories/{customer_id}` (ireneo.server.chat); `GET /openapi.json`
describes the plain HTTP routes (resources/openapi.json).

`create_app(settings)` builds the ASGI app; `ireneo serve` runs it under uvicorn. The server
keeps no state beyond the memories on disk: open memories, index tasks and recall slots are
caches and limits, rebuilt on start (users with turns still waiting for vectors are indexed
again on start). A periodic job removes expired low-importance memories
(`IRENEO_MEMORY_EXPIRY_INTERVAL` seconds apart; the first run one interval after start), and,
with `IRENEO_RETENTION_DAYS` set, another forgets conversations older than that
(`IRENEO_RETENTION_INTERVAL`). `DELETE /conversations/{user}/{conversation_id}` and
`DELETE /users/{user}` forget (ireneo.server.forget).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING

from fastmcp import FastMCP
from fastmcp.server.dependencies import get_access_token
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ireneo import privacy
from ireneo.config import Settings
from ireneo.embed import DEFAULT_MODEL, load_embedder
from ireneo.extras import MissingExtra
from ireneo.memories import Memories, MemoryPolicy, utc_now
from ireneo.server.auth import build_verifier, caller_user
from ireneo.server.chat import ChatRoutes
from ireneo.server.deadlines import BodyDeadline, read_deadline_protocol
from ireneo.server.forget import AUDIT_FILE, AuditFile, ForgetRoutes, Forgetter, Retention
from ireneo.server.indexer import Indexer
from ireneo.server.ingest import IngestRoute
from ireneo.server.inspect import Inspector
from ireneo.server.limits import BodyLimit
from ireneo.server.logs import log_event
from ireneo.server.memories import MemoryRegistry, user_key
from ireneo.server.periodic import every
from ireneo.server.returned import RETURNED
from ireneo.server.tools import MemoryLease, MemoryTools, Recaller, register_tools
from ireneo.server.verified import remember_verified

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from ireneo.server.shared_indexer import SharedIndexer

log = logging.getLogger("ireneo.server")

INSTRUCTIONS = (
    "Verbatim recall of the current user's earlier conversations with this assistant. "
    "Call recall_my_conversations when the user refers to something discussed before. "
    "Save lasting facts about the user (preferences, decisions, resolutions) with store_memory "
    "and find them again with search_memories."
)


class ConfigError(ValueError):
    """Settings the server refuses to start with; the message lists every problem."""


@dataclass
class ServerState:
    """What one running server holds; `app.state.ireneo` (tests read its counters)."""

    settings: Settings
    registry: MemoryRegistry
    indexer: Indexer | SharedIndexer
    recaller: Recaller
    mcp: FastMCP
    chat: ChatRoutes | None = None
    expiry: MemoryExpiry | None = None
    memory_tools: MemoryTools | None = None
    forgetter: Forgetter | None = None
    retention: Retention | None = None
    ingest: IngestRoute | None = None


class MemoryExpiry:
    """The periodic job that removes expired low-importance memories of every user."""

    def __init__(
        self,
        registry: MemoryRegistry,
        policy: MemoryPolicy,
        clock: Callable[[], datetime],
        interval: float,
    ):
        self.registry = registry
        self.policy = policy
        self.clock = clock
        self.interval = interval
        self.runs = 0
        self.removed = 0

    def run_once(self) -> int:
        """One pass over every user's memory (blocking: call it in a worker thread)."""
        removed = users = 0
        for key in self.registry.keys_on_disk():
            try:
                with self.registry.lease(key, create=False) as memory:
                    if memory is None:
                        continue
                    count = Memories(memory, policy=self.policy, now=self.clock).expire()
            except Exception as exc:
                log_event(
                    log,
                    "memory_expiry",
                    level=logging.ERROR,
                    user_key=key,
                    error=type(exc).__name__,
                )
                continue
            removed += count
            users += bool(count)
        self.runs += 1
        self.removed += removed
        log_event(log, "memory_expiry", users=users, removed=removed)
        return removed

    async def run_forever(self) -> None:
        await every(self.interval, self.run_once, "memory_expiry", log)


def recaller_for(settings: Settings) -> Recaller:
    return Recaller(
        k=settings.recall_k,
        max_chars=settings.max_result_chars,
        max_query_chars=settings.max_query_chars,
        concurrency=settings.recall_concurrency,
        timeout=settings.recall_timeout,
    )


def create_app(settings: Settings, *, clock: Callable[[], datetime] | None = None) -> Starlette:
    """The server as an ASGI app. Raises ConfigError when the settings are not safe to serve.

    `clock` (default: the UTC time now) dates memories and the exchanges `/chat` retains, and
    decides expiry; tests pass a controllable one.
    """
    problems = settings.problems()
    if problems:
        raise ConfigError("; ".join(problems))

    pool = _database(settings)
    registry = MemoryRegistry(
        settings.users_dir,
        capacity=settings.max_open_memories,
        budget_bytes=settings.max_open_mb * 2**20,
        model=settings.model,
        rerank=settings.rerank,
        database=pool,
    )
    indexer: Indexer | SharedIndexer
    if pool is not None:
        from ireneo.server.shared_indexer import SharedIndexer  # PostgreSQL's: an extra

        indexer = SharedIndexer(
            registry,
            pool,
            debounce=settings.index_debounce,
            concurrency=settings.index_concurrency,
        )
    else:
        indexer = Indexer(
            registry, debounce=settings.index_debounce, concurrency=settings.index_concurrency
        )
    recaller = recaller_for(settings)
    clock = clock or utc_now
    expiry = MemoryExpiry(registry, settings.memory_policy, clock, settings.memory_expiry_interval)
    forgetter = Forgetter(registry, AuditFile(settings.home / AUDIT_FILE), clock)
    retention = Retention(forgetter, settings.retention_days, settings.retention_interval)

    @asynccontextmanager
    async def lifespan(server: FastMCP):
        if pool is None:
            settings.users_dir.mkdir(parents=True, exist_ok=True)
        warm_up = asyncio.get_running_loop().create_task(_warm_up(settings.model))
        catch_up = asyncio.get_running_loop().create_task(indexer.catch_up())
        expiring = asyncio.get_running_loop().create_task(expiry.run_forever())
        retaining = asyncio.get_running_loop().create_task(retention.run_forever())
        log_event(
            log,
            "server_start",
            dev=settings.dev,
            auth=settings.jwt_algorithm,
            store="postgresql" if pool is not None else "sqlite",
        )
        try:
            yield {}
        finally:
            warm_up.cancel()
            catch_up.cancel()
            expiring.cancel()
            retaining.cancel()
            await indexer.stop()
            await asyncio.to_thread(RETURNED.wait_idle, 5.0)  # the tools' last records
            await asyncio.to_thread(registry.close_all)
            if pool is not None:
                await asyncio.to_thread(pool.close)
            log_event(log, "server_stop", index_runs=sum(indexer.runs.values()))

    verifier = remember_verified(build_verifier(settings))  # ireneo.server.verified
    mcp = FastMCP(
        "ireneo",
        instructions=INSTRUCTIONS,
        auth=verifier,
        lifespan=lifespan,
    )

    def caller() -> tuple[str, MemoryLease] | None:
        user = caller_user(get_access_token())
        if user is None:
            return None
        key = user_key(user)
        return key, lambda: registry.lease(key, create=False)

    def writer() -> tuple[str, MemoryLease] | None:
        """The caller, with a lease that creates their memory (store_memory)."""
        user = caller_user(get_access_token())
        if user is None:
            return None
        key = user_key(user)
        return key, lambda: registry.lease(key, create=True)

    memory_tools = MemoryTools(recaller, policy=settings.memory_policy, clock=clock)
    register_tools(
        mcp,
        recaller,
        caller,
        memory_tools=memory_tools if settings.memory_tools else None,
        writer=writer,
    )

    ingest = IngestRoute(
        registry=registry,
        indexer=indexer,
        ingest_key=settings.ingest_key,
        max_body_bytes=settings.max_body_bytes,
        concurrency=settings.ingest_concurrency,
        queue=settings.ingest_queue,
        read_timeout=settings.read_timeout,
    )

    @mcp.custom_route("/turns", methods=["POST"], include_in_schema=False)
    async def turns(request: Request) -> JSONResponse:
        return await ingest(request)

    forget = ForgetRoutes(forgetter, settings.ingest_key)

    @mcp.custom_route(
        "/conversations/{user}/{conversation_id}", methods=["DELETE"], include_in_schema=False
    )
    async def forget_conversation(request: Request) -> JSONResponse:
        return await forget.conversation(request)

    @mcp.custom_route("/users/{user}", methods=["DELETE"], include_in_schema=False)
    async def forget_user(request: Request) -> JSONResponse:
        return await forget.user(request)

    inspector = Inspector(
        registry=registry,
        forgetter=forgetter,
        verifier=verifier,
        admin_key=settings.admin_key,
        recall_k=settings.recall_k,
    )
    for path, methods, handler in (
        ("/inspect", ["GET"], inspector.home),
        ("/inspect/sign-in", ["POST"], inspector.sign_in),
        ("/inspect/sign-out", ["POST"], inspector.sign_out),
        ("/inspect/search", ["GET"], inspector.search),
        ("/inspect/c/{ref}", ["GET"], inspector.conversation),
        ("/inspect/forget", ["POST"], inspector.forget),
    ):
        mcp.custom_route(path, methods=methods, include_in_schema=False)(handler)

    chat = ChatRoutes(
        settings=settings, registry=registry, indexer=indexer, recaller=recaller, clock=clock
    )

    @mcp.custom_route("/chat", methods=["POST"], include_in_schema=False)
    async def chat_route(request: Request) -> JSONResponse:
        return await chat.chat(request)

    @mcp.custom_route("/memories/{customer_id:path}", methods=["GET"], include_in_schema=False)
    async def audit_route(request: Request) -> JSONResponse:
        return await chat.audit(request)

    @mcp.custom_route("/openapi.json", methods=["GET"], include_in_schema=False)
    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(_openapi())

    @mcp.custom_route("/health", methods=["GET"], include_in_schema=False)
    async def health(request: Request) -> JSONResponse:
        ready = await asyncio.to_thread(_database_ready, pool) if pool else _home_ready(settings)
        return JSONResponse(
            {"status": "ok" if ready else "unavailable", "indexing": indexer.busy()},
            status_code=200 if ready else 503,
        )

    app = mcp.http_app(
        path="/mcp",
        stateless_http=True,
        json_response=True,
        middleware=[
            Middleware(RequestLog),
            Middleware(BodyDeadline, timeout=settings.read_timeout),
            Middleware(BodyLimit, path="/mcp", limit=settings.max_mcp_body_bytes),
        ],
    )
    app.state.ireneo = ServerState(
        settings,
        registry,
        indexer,
        recaller,
        mcp,
        chat,
        expiry,
        memory_tools,
        forgetter,
        retention,
        ingest,
    )
    return app


def uvicorn_options(settings: Settings) -> dict:
    """How `ireneo serve` runs uvicorn: its h11 protocol with read deadlines on every request's
    head and body (ireneo.server.deadlines), no access log of its own (RequestLog logs)."""
    return {
        "log_config": None,
        "access_log": False,
        "lifespan": "on",
        "http": read_deadline_protocol(settings.read_timeout),
    }


async def _warm_up(name: str | None) -> None:
    """Load at start what the first post would otherwise wait for: the secret detectors (~0.2 s)
    and the embedding model. An operator learns at once, in one log line, that the model cannot
    load (recall then answers with the fail-soft sentence and ingest with 503 until it can: each
    request tries again)."""
    if privacy.enabled_by_default():
        await asyncio.to_thread(privacy.load_detectors)
    try:
        embedder = await asyncio.to_thread(load_embedder, name)
    except Exception as exc:
        log_event(
            log,
            "model_unavailable",
            level=logging.ERROR,
            model=name or DEFAULT_MODEL,
            error=type(exc).__name__,
            reason=str(exc)[:300],
        )
        return
    log_event(log, "model_ready", model=embedder.name)


@functools.cache
def _openapi() -> dict:
    """The OpenAPI description of the plain HTTP routes (/mcp is described by MCP itself)."""
    return json.loads(resources.files("ireneo.resources").joinpath("openapi.json").read_text())


def _database(settings: Settings) -> ConnectionPool | None:
    """The pool every memory shares when the server runs on PostgreSQL (upgrading the schema
    first when IRENEO_DB_UPGRADE asks, as the owner when IRENEO_DATABASE_OWNER_URL is given)."""
    if not settings.database_url:
        return None
    try:
        from ireneo.store import pg_schema
        from ireneo.store.postgres import SchemaOutdated, open_pool
    except MissingExtra as exc:
        raise ConfigError(str(exc)) from None
    try:
        if settings.db_upgrade:
            applied = pg_schema.upgrade(
                settings.database_owner_url or settings.database_url, settings.database_app_role
            )
            log_event(log, "db_upgrade", applied=applied)
        size = settings.recall_concurrency + 2 * settings.index_concurrency + 4
        return open_pool(settings.database_url, max_size=size)
    except (pg_schema.SchemaError, SchemaOutdated) as exc:
        raise ConfigError(str(exc)) from None


def _database_ready(pool: ConnectionPool) -> bool:
    try:
        with pool.connection(timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception:
        return False
    return True


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
                path=_loggable_path(scope.get("path")),
                status=status,
                ms=round((time.monotonic() - started) * 1000, 1),
            )


def _loggable_path(path: str | None) -> str | None:
    """The path, without the user or customer ids that some routes carry."""
    for prefix, template in (
        ("/memories/", "/memories/{customer_id}"),
        ("/conversations/", "/conversations/{user}/{conversation_id}"),
        ("/users/", "/users/{user}"),
    ):
        if path and path.startswith(prefix):
            return template
    return path
