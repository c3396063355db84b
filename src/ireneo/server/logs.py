"""Structured logs: one JSON object per line, through the logging module.

Events carry counts, durations, outcomes and the hashed user key, never conversation text,
queries, user ids or tokens. `log_event` is the only way the server logs an event.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any


def log_event(
    logger: logging.Logger, event: str, *, level: int = logging.INFO, **fields: Any
) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"ireneo_fields": fields})


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "event", ...fields}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "ireneo_fields", None)
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
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
        return json.dumps(out, ensure_ascii=False, default=str)


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
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "fastmcp", "mcp"):
        lib = logging.getLogger(name)
        for old in list(lib.handlers):
            lib.removeHandler(old)
        lib.propagate = True
