"""Structured logs: one JSON object per line, through the logging module.

Events carry counts, durations, outcomes and the hashed user key, never conversation text,
queries, user ids or tokens. `log_event` is the only way the server logs an event.

The HTTP server's access log is dropped as soon as the server's code is loaded: its lines hold
the raw path and query (`GET /memories/victor%40example.com`). uvicorn's `access_log=False`
is not enough: some versions decide per connection from whether the `uvicorn.access` logger
has any handler, and any logging setup may give it one. A filter on that logger drops its
records whatever handlers it has; the server logs each request itself (`RequestLog`: the
route's template, never the path it was called with).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ACCESS_LOGGER = "uvicorn.access"


class _DropAll(logging.Filter):
    """Refuses every record of the logger it is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


_DROP_ACCESS = _DropAll()


def silence_access_log() -> None:
    """Drop every record of the HTTP server's access log (idempotent)."""
    logging.getLogger(ACCESS_LOGGER).addFilter(_DROP_ACCESS)


silence_access_log()


def log_event(
    logger: logging.Logger, event: str, *, level: int = logging.INFO, **fields: Any
) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"ireneo_fields": fields})


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "event", ...fields}` on one line. Every request writes one or
    two such lines on the event loop's thread: the encoder is made once, and the time's
    seconds are formatted once a second."""

    def __init__(self) -> None:
        super().__init__()
        self._encode = json.JSONEncoder(ensure_ascii=False, default=str).encode
        self._stamp = (-1, "")  # a second and its text, replaced whole (threads share it)

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "ireneo_fields", None)
        second, stamp = self._stamp
        if second != int(record.created):
            second = int(record.created)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._stamp = (second, stamp)
        out: dict[str, Any] = {
            "ts": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        if fields is not None:
            out["event"] = record.msg
            out.update(fields)
        else:
            out["message"] = _message(record)
            if record.exc_info:
                out["error"] = record.exc_info[0].__name__ if record.exc_info[0] else "unknown"
        return self._encode(out)


def _message(record: logging.LogRecord) -> str:
    """A library's message; FastMCP's token rejections name the client (the user): not here."""
    args = record.args
    if isinstance(args, tuple) and args and "client %s" in str(record.msg):
        try:
            return str(record.msg) % ("[redacted]", *args[1:])
        except (TypeError, ValueError):
            return str(record.msg)
    return record.getMessage()


def configure_logging(level: int = logging.INFO) -> None:
    """Send every log record to stderr as JSON lines (the server's and its libraries')."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", ACCESS_LOGGER, "fastmcp", "mcp"):
        lib = logging.getLogger(name)
        for old in list(lib.handlers):
            lib.removeHandler(old)
        lib.propagate = True
    silence_access_log()


class RequestLog:
    """ASGI middleware: one `request` log line per HTTP request (method, the route's template,
    status, duration), never the path's ids nor the query string."""

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
                _server_log,
                "request",
                method=scope.get("method"),
                path=loggable_path(scope.get("path")),
                status=status,
                ms=round((time.monotonic() - started) * 1000, 1),
            )


_server_log = logging.getLogger("ireneo.server")


def loggable_path(path: str | None) -> str | None:
    """The path, without the user or customer ids that some routes carry."""
    for prefix, template in (
        ("/memories/", "/memories/{customer_id}"),
        ("/conversations/", "/conversations/{user}/{conversation_id}"),
        ("/users/", "/users/{user}"),
    ):
        if path and path.startswith(prefix):
            return template
    return path
