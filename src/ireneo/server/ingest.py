"""`POST /turns`: the chat gateway's write path.

The route checks its own credential (FastMCP's bearer auth covers /mcp only): header
`x-ingest-key`, compared in constant time with IRENEO_INGEST_KEY. It reads at most
`max_body_bytes` of body whatever Content-Length says, validates the whole body before storing
anything, stores the conversation in the user's memory in one call (durable on return), then
schedules the user's index run and answers 202.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time

from starlette.requests import Request
from starlette.responses import JSONResponse

from ireneo.errors import FormatError
from ireneo.formats.gateway import parse_gateway_body
from ireneo.formats.json_body import decode_json_body
from ireneo.server.indexer import Indexer
from ireneo.server.logs import log_event
from ireneo.server.memories import MemoryRegistry, user_key

log = logging.getLogger("ireneo.server.ingest")


class BodyTooLarge(Exception):
    pass


class IngestRoute:
    def __init__(
        self,
        *,
        registry: MemoryRegistry,
        indexer: Indexer,
        ingest_key: str | None,
        max_body_bytes: int,
    ):
        self.registry = registry
        self.indexer = indexer
        self._key = ingest_key.encode("utf-8") if ingest_key else None
        self.max_body_bytes = max_body_bytes

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
        try:
            user, conversation_id, turns = parse_gateway_body(decode_json_body(raw))
        except FormatError as exc:
            return _error(400, str(exc), field=exc.where), {"field": exc.where}

        key = user_key(user)
        try:
            result = await asyncio.to_thread(self._store, key, turns)
        except Exception as exc:
            log_event(
                log, "store_failed", level=logging.ERROR, user_key=key, error=type(exc).__name__
            )
            return _error(503, "storage unavailable, try again later"), {"user_key": key}
        if result.added or result.replaced:
            self.indexer.schedule(key)
        counts = {"added": result.added, "replaced": result.replaced, "unchanged": result.unchanged}
        return (
            JSONResponse({"stored": conversation_id, **counts}, status_code=202),
            {"user_key": key, "turns": len(turns), **counts},
        )

    def _authorised(self, request: Request) -> bool:
        if self._key is None:  # dev mode without a key
            return True
        given = request.headers.get("x-ingest-key", "").encode("utf-8")
        return hmac.compare_digest(given, self._key)

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
            return memory.store_turns(turns)


def _error(status: int, message: str, *, field: str | None = None) -> JSONResponse:
    body = {"error": message}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status)
