"""A cap on request bodies under one path: `/mcp` (IRENEO_MAX_MCP_BODY_BYTES, default 64 KiB).

The MCP library reads bodies of up to 4 MB; the largest call ireneo's tools accept (a memory of
8,000 characters with 20 tags) is far smaller, so anything bigger is refused with 413 before
it is parsed, validated or queued. A declared Content-Length over the cap is refused at once; a
body without one (chunked) is read up to the cap and refused when it goes past.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """ASGI middleware: bodies of requests under `path` hold at most `limit` bytes."""

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
