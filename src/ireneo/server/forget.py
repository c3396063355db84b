"""Forgetting on the server: the gateway's routes, the inspector, and the retention job.

- `DELETE /conversations/{user}/{conversation_id}`: forget one conversation of a user;
- `DELETE /users/{user}`: forget everything of a user and remove their memory directory.

Both take the gateway's `x-ingest-key` (compared in constant time), like `POST /turns`. Neither
is an MCP tool: an agent cannot forget on its own. Each forget is recorded twice, without any
text: in the memory's own audit table (`ireneo.store`), and as one JSON line in
`IRENEO_HOME/audit.jsonl` with the user's key (never the id), which survives the deletion of a
whole user. `Retention` is the periodic job that forgets conversations older than
`IRENEO_RETENTION_DAYS`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse

from ireneo.formats.gateway import CONVERSATION_ID, MAX_USER_CHARS
from ireneo.server.ingest import ingest_key_matches
from ireneo.server.logs import log_event
from ireneo.server.memories import OpenMemories, user_key
from ireneo.server.periodic import every
from ireneo.store.base import AuditEntry, Forgotten, conversation_digest

log = logging.getLogger("ireneo.server.forget")

AUDIT_FILE = "audit.jsonl"


class AuditFile:
    """`IRENEO_HOME/audit.jsonl`: one line per forget, appended and synced before answering."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def append(self, key: str, entry: AuditEntry) -> None:
        line = json.dumps({"user_key": key, **entry.to_dict()}, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)

    def entries(self) -> list[dict]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]


class Forgetter:
    """Every forget the server does goes through here (blocking: call it in a worker thread)."""

    def __init__(self, registry: OpenMemories, audit: AuditFile, clock: Callable[[], datetime]):
        self.registry = registry
        self.audit = audit
        self.clock = clock

    def conversation(self, key: str, session_id: str, actor: str) -> Forgotten:
        now = self.clock()
        with self.registry.lease(key, create=False) as memory:
            if memory is None:
                return Forgotten()
            forgotten = memory.forget(session_id, actor=actor, now=now)
        if forgotten.turns:
            self._record(
                key,
                AuditEntry(
                    now,
                    "forget_conversation",
                    actor,
                    forgotten,
                    conversation=conversation_digest(session_id),
                ),
            )
        return forgotten

    def user(self, key: str, actor: str) -> Forgotten:
        """Everything of the user, then their directory: the memory is gone, not just empty."""
        now = self.clock()
        with self.registry.lease(key, create=False) as memory:
            if memory is None:
                return Forgotten()
            forgotten = memory.forget_all(actor=actor, now=now)
        self.registry.remove(key)
        self._record(key, AuditEntry(now, "forget_all", actor, forgotten))
        return forgotten

    def older_than(self, key: str, days: float, actor: str) -> Forgotten:
        now = self.clock()
        with self.registry.lease(key, create=False) as memory:
            if memory is None:
                return Forgotten()
            forgotten = memory.forget_older_than(days, actor=actor, now=now)
        if forgotten.turns:
            before = now - timedelta(days=days)
            self._record(key, AuditEntry(now, "forget_before", actor, forgotten, before=before))
        return forgotten

    def _record(self, key: str, entry: AuditEntry) -> None:
        self.audit.append(key, entry)
        log_event(log, entry.action, user_key=key, actor=entry.actor, **entry.forgotten.to_dict())


class ForgetRoutes:
    """The gateway's two DELETE routes (the ingest key, as on `POST /turns`)."""

    def __init__(self, forgetter: Forgetter, ingest_key: str | None):
        self.forgetter = forgetter
        self._key = ingest_key

    async def conversation(self, request: Request) -> JSONResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        user = request.path_params["user"]
        conversation_id = request.path_params["conversation_id"]
        if not CONVERSATION_ID.fullmatch(conversation_id):
            return _error(400, "conversation_id: must match [A-Za-z0-9_-]{1,128}")
        if not _valid_user(user):
            return _error(400, f"user: must be 1 to {MAX_USER_CHARS} characters, not blank")
        forgotten = await asyncio.to_thread(
            self.forgetter.conversation, user_key(user), conversation_id, "route"
        )
        return JSONResponse({"forgotten": conversation_id, **forgotten.to_dict()})

    async def user(self, request: Request) -> JSONResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        user = request.path_params["user"]
        if not _valid_user(user):
            return _error(400, f"user: must be 1 to {MAX_USER_CHARS} characters, not blank")
        key = user_key(user)
        forgotten = await asyncio.to_thread(self.forgetter.user, key, "route")
        return JSONResponse({"forgotten_user": key, **forgotten.to_dict()})

    def _refused(self, request: Request) -> JSONResponse | None:
        if ingest_key_matches(request, self._key):
            return None
        return _error(401, "unauthorized: send the ingest key in the x-ingest-key header")


class Retention:
    """The periodic job that forgets conversations older than `days` in every user's memory."""

    def __init__(self, forgetter: Forgetter, days: float | None, interval: float):
        self.forgetter = forgetter
        self.days = days
        self.interval = interval
        self.runs = 0
        self.forgotten = 0  # conversations, over all runs

    def run_once(self) -> int:
        """One pass over every user (blocking); the number of conversations forgotten."""
        if self.days is None:
            return 0
        conversations = users = 0
        for key in self.forgetter.registry.keys_on_disk():
            try:
                forgotten = self.forgetter.older_than(key, self.days, "retention")
            except Exception as exc:
                log_event(
                    log, "retention", level=logging.ERROR, user_key=key, error=type(exc).__name__
                )
                continue
            conversations += forgotten.conversations
            users += bool(forgotten.conversations)
        self.runs += 1
        self.forgotten += conversations
        log_event(log, "retention", days=self.days, users=users, conversations=conversations)
        return conversations

    async def run_forever(self) -> None:
        if self.days is not None:
            await every(self.interval, self.run_once, "retention", log)


def _valid_user(user: str) -> bool:
    return bool(user.strip()) and len(user) <= MAX_USER_CHARS


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
