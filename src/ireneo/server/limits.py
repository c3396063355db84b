"""The bounds every tool and route applies: one frozen `Limits`, built from the settings.

`Limits.from_settings(settings)` is the one place the server reads its bounds and timeouts;
the MCP tools, the /mcp body cap and the routes take this object, never the environment. The
explicit memories' bounds are fixed (`ireneo.memories` checks them); they are here so that the
tools' schemas advertise what is checked.

`BodyLimit` caps the body of a request to `/mcp` (`max_mcp_body_bytes`, default 64 KiB). The
MCP library reads bodies of up to 4 MB; the largest call the tools accept (a memory of 8,000
characters with 20 tags) is far smaller, so anything bigger is refused with 413 before it is
parsed, validated or queued.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ireneo.memories import MAX_CONTENT_CHARS, MAX_SOURCE_CHARS, MAX_TAG_CHARS, MAX_TAGS

if TYPE_CHECKING:
    from ireneo.config import Settings


@dataclass(frozen=True)
class Limits:
    """How much one call may ask for, how many run at once, and how long each may take."""

    recall_k: int = 3  # passages a recall returns
    max_query_chars: int = 500  # a recall's or a memory search's query
    max_result_chars: int = 4000  # the text one tool answers with
    max_body_bytes: int = 1024 * 1024  # one POST /turns or /chat body
    max_mcp_body_bytes: int = 64 * 1024  # one /mcp request
    recall_concurrency: int = 4  # tool calls running at once, fair between users
    recall_timeout: float = 10.0  # seconds one tool call may take, waiting included
    read_timeout: float = 10.0  # seconds to send a request's head, then its body
    # fixed: no ref or memory id comes near 64 characters; turn numbers are bounded before use
    max_ref_chars: int = field(default=64, init=False)
    max_id_chars: int = field(default=64, init=False)
    max_turn: int = field(default=10**9, init=False)
    # fixed: what ireneo.memories checks of an explicit memory
    max_content_chars: int = field(default=MAX_CONTENT_CHARS, init=False)
    max_tags: int = field(default=MAX_TAGS, init=False)
    max_tag_chars: int = field(default=MAX_TAG_CHARS, init=False)
    max_source_chars: int = field(default=MAX_SOURCE_CHARS, init=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            recall_k=settings.recall_k,
            max_query_chars=settings.max_query_chars,
            max_result_chars=settings.max_result_chars,
            max_body_bytes=settings.max_body_bytes,
            max_mcp_body_bytes=settings.max_mcp_body_bytes,
            recall_concurrency=settings.recall_concurrency,
            recall_timeout=settings.recall_timeout,
            read_timeout=settings.read_timeout,
        )

    def with_(self, **changes: object) -> Limits:
        return replace(self, **changes)  # type: ignore[arg-type]

    def query_problem(self, query: str) -> str | None:
        """Why a query is refused before any work (its length), or None."""
        if len(query) > self.max_query_chars:
            return (
                f"query holds at most {self.max_query_chars} characters; "
                "use a few key words instead"
            )
        return None


class BodyLimit:
    """ASGI middleware: bodies of requests under `path` hold at most `limit` bytes. A declared
    Content-Length over it is refused at once; a chunked body is read up to it and refused when
    it goes past."""

    def __init__(self, app: ASGIApp, *, path: str, limit: int):
        self.app = app
        self.path = path.rstrip("/")
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._covers(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: a disconnect, when it comes

        await self.app(scope, replay, send)

    def _covers(self, path: str) -> bool:
        return path == self.path or path.startswith(self.path + "/")

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {
                "error": f"body larger than {self.limit} bytes: a request to {self.path} holds "
                f"at most {self.limit} bytes"
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
