"""Read deadlines: a client slow to send its request costs one connection for a bounded time,
never a place in a queue.

- `ReadDeadlineProtocol` (uvicorn's h11 protocol, `ireneo serve` runs it): a request's head
  (request line and headers) must arrive within `read_timeout` seconds of the connection
  opening, or of its own first byte after an earlier response; its body within `read_timeout`
  (plus a short grace, for `BodyDeadline` to answer first) of the head. Else the connection is
  closed. uvicorn's own timer only runs between requests, and stops at the first byte.
- `BodyDeadline` (ASGI middleware, in every app `create_app` builds): the body must arrive within
  `read_timeout` seconds of the head, or the request is answered 408 and its connection closed.
  POST /turns reads its body before it takes a place in its admission queue, so a client that
  stalls mid-body costs one connection for that long, never a place in the queue.
"""

from __future__ import annotations

import asyncio
import json

import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

BODY_GRACE = 2.0  # seconds the protocol waits past the deadline: BodyDeadline answers first
LATE_HEAD = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class ReadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with deadlines on reading a request's head and body.

    Use `read_deadline_protocol(seconds)` for a class with the deadline set."""

    read_timeout: float = 10.0

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._head_bytes = False
        super().connection_made(transport)
        self._arm_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
            return
        state = self.conn.their_state
        if state is h11.IDLE:  # a head is arriving: its deadline runs from its first byte
            self._head_bytes = self._head_bytes or bool(data)
            self._arm_head()
            return
        self._cancel_head()
        if state is h11.SEND_BODY:
            if self._body_timer is None:
                self._body_timer = self.loop.call_later(
                    self.read_timeout + BODY_GRACE, self._body_late
                )
        else:
            self._cancel_body()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # a pipelined head already partly here: its deadline runs from now
        if (
            not self.transport.is_closing()
            and self.conn.their_state is h11.IDLE
            and self.conn.trailing_data[0]
        ):
            self._head_bytes = True
            self._arm_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm_head(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.read_timeout, self._head_late)

    def _cancel_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._head_bytes = False

    def _cancel_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _disarm(self) -> None:
        self._cancel_head()
        self._cancel_body()

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._head_bytes and (self.cycle is None or self.cycle.response_complete):
            self.transport.write(LATE_HEAD)
        self.transport.close()

    def _body_late(self) -> None:
        self._body_timer = None
        if not self.transport.is_closing() and self.conn.their_state is h11.SEND_BODY:
            self.transport.close()


def read_deadline_protocol(read_timeout: float) -> type[ReadDeadlineProtocol]:
    """The protocol class for uvicorn's `http=` option, with `read_timeout` seconds."""
    return type("ReadDeadlineProtocol", (ReadDeadlineProtocol,), {"read_timeout": read_timeout})


class BodyTimeout(Exception):
    """The request's body did not arrive within the read deadline."""


def late_body_answer(timeout: float) -> tuple[int, dict, dict]:
    """The 408 a route (or BodyDeadline) answers a late body with: status, body, headers."""
    return (
        408,
        {"error": f"the request body did not arrive within {timeout:g} s; send it again"},
        {"connection": "close"},
    )


class BodyDeadline:
    """A request's body must arrive within `timeout` seconds of its head: past that, the app's
    next wait for body raises BodyTimeout, which a route may answer itself (POST /turns does);
    otherwise this answers 408 and the connection is closed. Once the body is in, the app's
    later waits (for the client going away) have no deadline."""

    def __init__(self, app: ASGIApp, *, timeout: float):
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.timeout
        arrived = False
        started = False

        async def receive_by_deadline() -> Message:
            nonlocal arrived
            if arrived:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise BodyTimeout from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                arrived = True
            return message

        async def send_noting_start(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive_by_deadline, send_noting_start)
        except BodyTimeout:
            if started:
                raise
            status, body, headers = late_body_answer(self.timeout)
            await _answer(send, status, body["error"], close=True)


def _has_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return True
    return False


async def _answer(send: Send, status: int, message: str, *, close: bool = False) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
