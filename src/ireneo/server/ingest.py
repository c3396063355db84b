"""`POST /turns`: the chat gateway's write path.

The route checks its own credential (FastMCP's bearer auth covers /mcp only): header
`x-ingest-key`, compared in constant time with IRENEO_INGEST_KEY. It reads at most
`max_body_bytes` of body whatever Content-Length says, validates the whole body before storing
anything, stores the conversation in the user's memory in one call (durable on return), then
schedules the user's index run and answers 202.

Admission is bounded: at most `concurrency` stores run at once, and at most `queue` requests are
admitted, running or waiting; past that a request is refused at once with 429 and `Retry-After`,
and the server answers again as soon as it drains. The stores run on threads of their own,
`nice` steps below the server's CPU priority (Linux; IRENEO_INGEST_NICE), as the indexer's do:
an agent waits for its recall while a user talks, the gateway for a finished conversation's 202,
so recall takes the cores first and posts what it leaves (docs/reliability.md).
The key is checked before the body is read; a request is admitted only once its whole body
has arrived, within IRENEO_READ_TIMEOUT (`BodyDeadline`, ireneo.server.deadlines; a late body is
answered 408), so a client that stalls mid-body costs one connection for that long, never a
place in the queue.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import logging
import time

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from ireneo.errors import FormatError, StorageFull, UnknownModel
from ireneo.formats.gateway import parse_gateway_body
from ireneo.formats.json_body import decode_json_body
from ireneo.server.deadlines import BodyTimeout, late_body_answer
from ireneo.server.indexer import Indexer
from ireneo.server.logs import log_event
from ireneo.server.memories import OpenMemories, user_key
from ireneo.server.returned import RETURNED
from ireneo.workers import on, pool

log = logging.getLogger("ireneo.server.ingest")


RETRY_AFTER_SECONDS = "1"


class BodyTooLarge(Exception):
    pass


class IngestRoute:
    def __init__(
        self,
        *,
        registry: OpenMemories,
        indexer: Indexer,
        ingest_key: str | None,
        max_body_bytes: int,
        concurrency: int = 4,
        nice: int = 0,
        queue: int = 64,
        read_timeout: float = 10.0,
    ):
        self.registry = registry
        self.indexer = indexer
        self._key = ingest_key or None
        self.max_body_bytes = max_body_bytes
        self.read_timeout = read_timeout  # BodyDeadline's, named in the 408
        self.queue = max(queue, concurrency)
        self._slots = asyncio.Semaphore(concurrency)
        self._threads = pool(f"ingest-{nice}", concurrency, nice=nice)
        self.admitted = 0  # requests past the key check, not yet answered
        self.refused = 0  # requests answered 429 since the server started

    async def __call__(self, request: Request) -> JSONResponse:
        started = time.monotonic()
        response, fields = await self._handle(request)
        log_event(
            log,
            "ingest",
            status=response.status_code,
            ms=round((time.monotonic() - started) * 1000, 1),
            **fields,
        )
        return response

    async def _handle(self, request: Request) -> tuple[JSONResponse, dict]:
        if not self._authorised(request):
            return _error(401, "unauthorized: send the ingest key in the x-ingest-key header"), {}
        try:
            raw = await self._read_body(request)
        except BodyTooLarge:
            return _error(413, f"body larger than {self.max_body_bytes} bytes"), {}
        except ClientDisconnect:
            return _error(400, "the client went away before its body arrived"), {}
        except BodyTimeout:
            status, body, headers = late_body_answer(self.read_timeout)
            return JSONResponse(body, status_code=status, headers=headers), {"outcome": "late"}
        if self.admitted >= self.queue:
            self.refused += 1
            response = _error(
                429, f"too many ingest requests at once (more than {self.queue}); retry shortly"
            )
            response.headers["retry-after"] = RETRY_AFTER_SECONDS
            return response, {"outcome": "overloaded"}
        self.admitted += 1
        try:
            return await self._admitted(raw)
        finally:
            self.admitted -= 1

    async def _admitted(self, raw: bytes) -> tuple[JSONResponse, dict]:
        try:
            user, conversation_id, turns = parse_gateway_body(decode_json_body(raw))
        except FormatError as exc:
            return _error(400, str(exc), field=exc.where), {"field": exc.where}

        key = user_key(user)
        try:
            async with self._slots:
                result = await on(self._threads, self._store, key, turns)
        except Exception as exc:
            status, message, reason = _store_failure(exc)
            log_event(
                log,
                "store_failed",
                level=logging.ERROR,
                user_key=key,
                error=type(exc).__name__,
                reason=reason,
            )
            return _error(status, message), {"user_key": key}
        if result.added or result.replaced:
            self.indexer.schedule(key)
        counts = {"added": result.added, "replaced": result.replaced, "unchanged": result.unchanged}
        return (
            JSONResponse({"stored": conversation_id, **counts}, status_code=202),
            {"user_key": key, "turns": len(turns), **counts},
        )

    def _authorised(self, request: Request) -> bool:
        return ingest_key_matches(request, self._key)

    async def _read_body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise BodyTooLarge
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise BodyTooLarge
            chunks.append(chunk)
        return b"".join(chunks)

    def _store(self, key: str, turns: list):
        with self.registry.lease(key, create=True) as memory:
            assert memory is not None
            RETURNED.flush(memory)  # what recall just showed, before an echo of it is stored
            return memory.store_turns(turns)


def ingest_key_matches(request: Request, key: str | None) -> bool:
    """The request's `x-ingest-key` is `key`, compared in constant time (no key: dev mode)."""
    if key is None:
        return True
    given = request.headers.get("x-ingest-key", "").encode("utf-8")
    return hmac.compare_digest(given, key.encode("utf-8"))


def _store_failure(exc: Exception) -> tuple[int, str, str]:
    """The answer to a store that failed: status, message, and the reason for the log."""
    if isinstance(exc, StorageFull) or (
        isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
    ):
        return (
            507,
            "storage full: nothing of this request was stored; send it again once space is freed",
            "storage_full",
        )
    if isinstance(exc, UnknownModel):
        return (
            503,
            "the embedding model cannot load: nothing was stored; send it again later",
            "model_unavailable",
        )
    return 503, "storage unavailable: nothing was stored; send it again later", "error"


def _error(status: int, message: str, *, field: str | None = None) -> JSONResponse:
    body = {"error": message}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status)
