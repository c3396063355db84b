"""The chat loop: recall, prompt, retain; and its audit route.

`POST /chat {customer_id, message}` (header `x-ingest-key`, the gateway's key):

1. recall: the customer's explicit memories (`IRENEO_CHAT_MEMORIES`, 5) and earlier conversations
   (`IRENEO_CHAT_CONVERSATIONS`, 3) that match the message, the message itself as the query;
2. prompt: an OpenAI-compatible chat completions endpoint (`IRENEO_LLM_BASE_URL`,
   `IRENEO_LLM_MODEL`, `IRENEO_LLM_API_KEY`), with a system prompt that allows using the recalled
   text and forbids inventing memories;
3. retain: the exchange, stored as a two-turn conversation of the customer's, durable before the
   answer `{reply, memories_used}` (and embedded by the indexer afterwards).

The customer's memory is picked once per request by `customer_scope`, and that one value is used
to read and to write, so the two cannot drift apart. A customer id is the same user id that the
gateway posts to `/turns` and that a token's `sub` names on `/mcp`: one memory per person.

When the model times out or fails, the reply is a fixed sentence (`FALLBACK_REPLY`, with
`"degraded": true`) and nothing is retained: no text of anyone's memory is in it.

`GET /memories/{customer_id}` (header `x-admin-key`, `IRENEO_ADMIN_KEY`) lists what is retained
about a customer, for audit. Without an admin key configured it is off (403), never open.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

import httpx2
from starlette.requests import Request
from starlette.responses import JSONResponse

from ireneo.config import Settings
from ireneo.errors import FormatError
from ireneo.formats.json_body import decode_json_body
from ireneo.memories import Clock, ExplicitMemories, MemoryHit, memory_to_dict, render_memory_hits
from ireneo.model import Block, Hit, Turn, format_ts
from ireneo.render import render_hits
from ireneo.server.indexer import Indexer
from ireneo.server.logs import log_event
from ireneo.server.memories import OpenMemories, user_key
from ireneo.server.tools import Recaller, note_returned, returned_turns
from ireneo.users import MAX_USER_CHARS, user_problem

log = logging.getLogger("ireneo.server.chat")

SYSTEM_PROMPT = """\
You are a helpful and professional customer support agent.

Use previous customer memories when they are relevant.
Do not invent memories.

Previous relevant memories:
{memories}"""
NO_MEMORIES_BLOCK = "(none)"
FALLBACK_REPLY = "Sorry, I can't answer right now. Please send your message again in a few minutes."
HARNESS = "chat"
MAX_CUSTOMER_ID_CHARS = MAX_USER_CHARS
AUDIT_CONVERSATIONS = 20
AUDIT_MEMORIES = 100


class ModelError(Exception):
    """The chat model answered with something other than a reply."""


# -- the one place a customer becomes a memory --------------------------------------------------


@dataclass(frozen=True)
class CustomerScope:
    """The memory of one customer: what the chat loop reads and writes, and nothing else."""

    key: str  # the user key of the memory directory (ireneo.server.memories.user_key)


def customer_scope(customer_id: str) -> CustomerScope:
    """The customer's memory: the same as that of the gateway user and token subject of that id."""
    return CustomerScope(user_key(customer_id))


# -- the model ------------------------------------------------------------------------------------


class ChatModel:
    """An OpenAI-compatible chat completions endpoint: `POST {base_url}/chat/completions`."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout: float):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout

    async def reply(self, messages: list[dict[str, str]]) -> str:
        """The model's answer; TimeoutError past `timeout` seconds, ModelError on a bad answer."""
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = {"model": self.model, "messages": messages}
        async with asyncio.timeout(self.timeout):
            async with httpx2.AsyncClient(timeout=self.timeout) as client:
                try:
                    response = await client.post(self.url, json=body, headers=headers)
                except httpx2.TimeoutException as exc:
                    raise TimeoutError from exc
                except httpx2.HTTPError as exc:
                    raise ModelError(type(exc).__name__) from exc
        if response.status_code != 200:
            raise ModelError(f"status {response.status_code}")
        try:
            text = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelError("not a chat completion") from exc
        if not isinstance(text, str) or not text.strip():
            raise ModelError("empty reply")
        return text.strip()


# -- the routes -----------------------------------------------------------------------------------


@dataclass
class Recalled:
    memories: list[MemoryHit]
    conversations: list[Hit]

    @property
    def count(self) -> int:
        return len(self.memories) + len(self.conversations)


class BadRequest(Exception):
    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


class ChatRoutes:
    def __init__(
        self,
        *,
        settings: Settings,
        registry: OpenMemories,
        indexer: Indexer,
        recaller: Recaller,
        clock: Clock,
    ):
        self.settings = settings
        self.registry = registry
        self.indexer = indexer
        self.recaller = recaller
        self.clock = clock
        self._ingest_key = settings.ingest_key.encode() if settings.ingest_key else None
        self._admin_key = settings.admin_key.encode() if settings.admin_key else None
        self.model = (
            ChatModel(
                settings.llm_base_url,
                settings.llm_model,
                settings.llm_api_key,
                settings.llm_timeout,
            )
            if settings.llm_base_url and settings.llm_model
            else None
        )

    # -- POST /chat -------------------------------------------------------------------------
    async def chat(self, request: Request) -> JSONResponse:
        return await _logged("chat", self._chat, request)

    async def _chat(self, request: Request, fields: dict[str, Any]) -> JSONResponse:
        if not _key_matches(request, "x-ingest-key", self._ingest_key, open_without_key=True):
            return _error(401, "unauthorized: send the ingest key in the x-ingest-key header")
        if self.model is None:
            return _error(503, self.settings.chat_model_problem or "no chat model configured")
        body = await _json_body(request, self.settings.max_body_bytes)
        customer_id, message = self._parse(body)

        scope = customer_scope(customer_id)  # computed once: the read and the write below
        fields["user_key"] = scope.key
        recalled, fields["recall"] = await self._recall(scope, message)
        fields["memories_used"] = recalled.count

        prompt = SYSTEM_PROMPT.format(memories=self._memory_block(recalled))
        messages = [{"role": "system", "content": prompt}, {"role": "user", "content": message}]
        try:
            reply = await self.model.reply(messages)
        except (TimeoutError, ModelError) as exc:
            fields["outcome"] = "model_timeout" if isinstance(exc, TimeoutError) else "model_error"
            if isinstance(exc, ModelError):
                fields["error"] = str(exc)  # e.g. "status 401": never text of the exchange
            answer = {"reply": FALLBACK_REPLY, "memories_used": recalled.count, "degraded": True}
            return JSONResponse(answer)

        try:
            await asyncio.to_thread(self._retain, scope, message, reply)
            self.indexer.schedule(scope.key)
            fields["outcome"] = "ok"
        except Exception as exc:  # the customer still gets the answer; the log says it was lost
            fields.update(outcome="retain_failed", error=type(exc).__name__)
        return JSONResponse({"reply": reply, "memories_used": recalled.count})

    def _parse(self, body: Any) -> tuple[str, str]:
        if not isinstance(body, dict):
            raise BadRequest(
                400, "body: must be a JSON object with customer_id and message", "body"
            )
        unknown = sorted(str(key) for key in body if key not in ("customer_id", "message"))
        if unknown:
            raise BadRequest(
                400, f"{unknown[0]}: unknown field (expected customer_id, message)", unknown[0]
            )
        customer_id = _customer_id(body.get("customer_id"))
        message = body.get("message")
        if not isinstance(message, str) or not message.strip():
            raise BadRequest(400, "message: must be a non-empty string", "message")
        if len(message) > self.settings.chat_max_message_chars:
            raise BadRequest(
                400,
                f"message: is longer than {self.settings.chat_max_message_chars} characters",
                "message",
            )
        return customer_id, message

    async def _recall(self, scope: CustomerScope, message: str) -> tuple[Recalled, str]:
        """What the customer's memory holds about the message; nothing (and why) on failure."""
        try:
            recalled = await self.recaller.calls.run(
                functools.partial(self._recall_sync, scope, message), scope.key
            )
        except TimeoutError:
            return Recalled([], []), "timeout"
        except Exception as exc:
            log_event(log, "chat_recall_failed", level=logging.ERROR, error=type(exc).__name__)
            return Recalled([], []), "error"
        return recalled, "ok"

    def _recall_sync(self, scope: CustomerScope, message: str) -> Recalled:
        query = message[: self.settings.max_query_chars]
        with self.registry.lease(scope.key, create=False) as memory:
            if memory is None:
                return Recalled([], [])
            memories = ExplicitMemories(memory, policy=self.settings.memory_policy, now=self.clock)
            found = memories.search(query, self.settings.chat_memories) if memories.count() else []
            conversations = memory.recall(query, k=self.settings.chat_conversations)
            note_returned(memory, returned_turns(conversations), self.clock())
        return Recalled(found, conversations)

    def _memory_block(self, recalled: Recalled) -> str:
        """The recalled text for the system prompt: explicit memories, then earlier conversations,
        within IRENEO_CHAT_MAX_CONTEXT_CHARS."""
        budget = self.settings.chat_max_context_chars
        parts = []
        if recalled.memories:
            text = render_memory_hits(recalled.memories, max_chars=budget)
            parts.append("Saved memories:\n" + text)
            budget -= len(parts[-1])
        if recalled.conversations and budget > 200:
            parts.append(
                "Earlier conversations:\n"
                + render_hits(recalled.conversations, max_chars=budget - 30)
            )
        return "\n\n".join(parts) or NO_MEMORIES_BLOCK

    def _retain(self, scope: CustomerScope, message: str, reply: str) -> None:
        now = self.clock()
        conversation_id = f"chat-{now:%Y%m%dT%H%M%S}-{secrets.token_hex(4)}"
        turns = [
            Turn(
                conversation_id,
                f"{conversation_id}-{seq}",
                seq,
                now,
                role,
                HARNESS,
                (Block("text", text),),
            )
            for seq, (role, text) in enumerate((("user", message), ("assistant", reply)))
        ]
        with self.registry.lease(scope.key, create=True) as memory:
            assert memory is not None
            memory.store_turns(turns)

    # -- GET /memories/{customer_id} ------------------------------------------------------------
    async def audit(self, request: Request) -> JSONResponse:
        return await _logged("audit", self._audit, request)

    async def _audit(self, request: Request, fields: dict[str, Any]) -> JSONResponse:
        if self._admin_key is None:
            return _error(403, "the audit route is off: set IRENEO_ADMIN_KEY to turn it on")
        if not _key_matches(request, "x-admin-key", self._admin_key, open_without_key=False):
            return _error(401, "unauthorized: send the admin key in the x-admin-key header")
        customer_id = _customer_id(request.path_params.get("customer_id"))
        scope = customer_scope(customer_id)
        fields["user_key"] = scope.key
        answer = await asyncio.to_thread(self._audit_sync, scope)
        return JSONResponse({"customer_id": customer_id, **answer})

    def _audit_sync(self, scope: CustomerScope) -> dict:
        with self.registry.lease(scope.key, create=False) as memory:
            if memory is None:
                return {
                    "memory_count": 0,
                    "memories": [],
                    "conversation_count": 0,
                    "conversations": [],
                }
            records = ExplicitMemories(
                memory, policy=self.settings.memory_policy, now=self.clock
            ).all()
            sessions = sorted(memory.sessions(), key=lambda s: s.last_ts, reverse=True)
            conversations = []
            for summary in sessions[:AUDIT_CONVERSATIONS]:
                turns = memory.get(summary.session_id)
                conversations.append(
                    {
                        "conversation_id": summary.session_id,
                        "first_ts": format_ts(summary.first_ts),
                        "last_ts": format_ts(summary.last_ts),
                        "turns": [
                            {"seq": t.seq, "ts": format_ts(t.ts), "role": t.role, "text": t.text}
                            for t in turns
                        ],
                    }
                )
        return {
            "memory_count": len(records),
            "memories": [memory_to_dict(r) for r in records[:AUDIT_MEMORIES]],
            "conversation_count": len(sessions),
            "conversations": conversations,
        }


# -- helpers ----------------------------------------------------------------------------------------


def _key_matches(
    request: Request, header: str, key: bytes | None, *, open_without_key: bool
) -> bool:
    """Constant-time comparison of a header with a key; no key configured: `open_without_key`."""
    if key is None:
        return open_without_key
    return hmac.compare_digest(request.headers.get(header, "").encode("utf-8"), key)


def _customer_id(value: Any) -> str:
    problem = user_problem(value)  # the one rule for user ids (ireneo.users)
    if problem is not None:
        raise BadRequest(400, f"customer_id: {problem}", "customer_id")
    return value


async def _json_body(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"body larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"body larger than {limit} bytes")
        chunks.append(chunk)
    try:
        return decode_json_body(b"".join(chunks))
    except FormatError as exc:
        raise BadRequest(400, str(exc), exc.where) from None


async def _logged(event: str, handler, request: Request) -> JSONResponse:
    """Run a route's handler; a BadRequest becomes its error answer; one log line either way."""
    started = time.monotonic()
    fields: dict[str, Any] = {}
    try:
        response = await handler(request, fields)
    except BadRequest as exc:
        response = _error(exc.status, exc.message, field=exc.field)
    fields["ms"] = round((time.monotonic() - started) * 1000, 1)
    log_event(log, event, status=response.status_code, **fields)
    return response


def _error(status: int, message: str, *, field: str | None = None) -> JSONResponse:
    body = {"error": message}
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status)
