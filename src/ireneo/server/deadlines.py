"""Read deadlines: a client slow to send its request costs one connection for a bounded time,
never a place in a queue.

- `ReadDeadlines` (over uvicorn's httptools protocol, which `ireneo serve` runs, or its h11
  protocol where httptools is not installed: `ReadDeadlineProtocol`): a request's head (request
  line and headers) must arrive within `read_timeout` seconds of the connection opening, or of
  its own first byte after an earlier response; its body within `read_timeout` (plus a short
  grace, for `BodyDeadline` to answer first) of the head. Else the connection is closed.
  uvicorn's own timer only runs between requests, and stops at the first byte.
- `BodyDeadline` (ASGI middleware, in every app `create_app` builds): the body must arrive within
  `read_timeout` seconds of the head, or the request is answered 408 and its connection closed.
  POST /turns reads its body before it takes a place in its admission queue, so a client that
  stalls mid-body costs one connection for that long, never a place in the queue.
- Writing has the same deadline: a client that reads nothing of its responses while the
  transport's buffer is full (uvicorn would wait for ever) has its connection dropped.
"""

from __future__ import annotations

import asyncio
import enum
import json

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE  # as uvicorn's h11 protocol
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools not installed (a platform without its wheel): h11 serves
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

BODY_GRACE = 2.0  # seconds the protocol waits past the deadline: BodyDeadline answers first
LATE_HEAD = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
# The most requests a connection may have waiting behind the one answered (httptools parses a
# whole read, and each request it finds costs a scope and a cycle; h11 keeps the bytes only).
MAX_PIPELINED = 64
# The most a head may hold: h11's own bound (which it answers 400), kept on httptools, whose
# parser has none and gathers a header's text by repeated concatenation.
MAX_HEAD = DEFAULT_MAX_INCOMPLETE_EVENT_SIZE  # 16 KiB
LARGE_HEAD = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n"
    b"connection: close\r\n\r\n"
)


class TooManyPipelined(Exception):
    """More than MAX_PIPELINED requests wait on one connection: its parser stops."""


class Reading(enum.Enum):
    """Where reading a connection's next request stands."""

    HEAD = "head"  # a head is awaited or arriving, no response running
    BODY = "body"  # a head is in, its body is arriving
    NONE = "none"  # nothing to wait for now: a response is running, or the request is all in


class ReadDeadlines:
    """Deadlines on reading a request's head and body, over one of uvicorn's HTTP/1.1 protocols
    (`H11Deadlines`, `HttpToolsDeadlines`), which says where reading stands (`_reading`) and
    whether the next head has begun arriving during the last response (`_next_head_begun`).

    Use `read_deadline_protocol(seconds)` for a class with the deadline set."""

    read_timeout: float = 10.0

    def _reading(self) -> Reading:
        raise NotImplementedError

    def _next_head_begun(self) -> bool:
        raise NotImplementedError

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._head_bytes = False
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            self._disarm()  # closed, or handed to another protocol (an upgrade)
            return
        reading = self._reading()
        if reading is Reading.HEAD:  # a head is arriving: its deadline runs from its first byte
            self._head_bytes = self._head_bytes or bool(data)
            self._arm_head()
            return
        self._cancel_head()
        if reading is Reading.BODY:
            self._arm_body()
        else:
            self._cancel_body()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if self.transport.is_closing():
            return
        # a pipelined request already partly here: its deadline runs from now
        reading = self._reading()
        if reading is Reading.HEAD and self._next_head_begun():
            self._head_bytes = True
            self._arm_head()
        elif reading is Reading.BODY:
            self._arm_body()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._cancel_write()
        super().connection_lost(exc)  # type: ignore[misc]

    def pause_writing(self) -> None:
        """The transport's buffer is full: the client must read some within the deadline."""
        super().pause_writing()  # type: ignore[misc]
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.read_timeout, self._write_late)

    def resume_writing(self) -> None:
        self._cancel_write()
        super().resume_writing()  # type: ignore[misc]

    def _cancel_write(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_late(self) -> None:
        """Nothing could be written for the deadline: drop the connection and what is unsent
        (close would wait for the buffer to drain); its response's next send returns."""
        self._write_timer = None
        self.logger.warning(
            "Client read no response for %g s; connection dropped.", self.read_timeout
        )
        self.transport.abort()

    def _arm_head(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.read_timeout, self._head_late)

    def _arm_body(self) -> None:
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.read_timeout + BODY_GRACE, self._body_late)

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
        if self.transport.is_closing() or self._reading() is not Reading.HEAD:
            return
        if self._head_bytes and (self.cycle is None or self.cycle.response_complete):
            self.transport.write(LATE_HEAD)
        self.transport.close()

    def _body_late(self) -> None:
        self._body_timer = None
        if not self.transport.is_closing() and self._reading() is Reading.BODY:
            self.transport.close()


class H11Deadlines(ReadDeadlines, H11Protocol):
    """uvicorn's h11 protocol (pure Python) with the read deadlines."""

    def _reading(self) -> Reading:
        state = self.conn.their_state
        if state is h11.IDLE:
            return Reading.HEAD
        return Reading.BODY if state is h11.SEND_BODY else Reading.NONE

    def _next_head_begun(self) -> bool:
        return bool(self.conn.trailing_data[0])


if HttpToolsProtocol is not None:

    class HttpToolsDeadlines(ReadDeadlines, HttpToolsProtocol):
        """uvicorn's httptools protocol (llhttp's C parser) with the read deadlines. The parser
        reads on past a request into the next one (h11 holds it until the response is sent), so
        where reading stands is kept from its callbacks; a pipelined request waits its turn with
        reading paused, and like a head begun while a response runs, its deadline starts once
        the responses before it are sent; reading stays paused while any wait (uvicorn reads on
        at each response, and a client pipelining cheap requests grew the queue without bound,
        by one read's worth per response), and past `MAX_PIPELINED` waiting the connection is
        dropped. llhttp bounds no head, so a head still incomplete
        past `MAX_HEAD` bytes (plus the rest of the read it began in) is answered 431 and closed
        (unbounded, a header streamed for the deadline grows the server and stalls its loop)."""

        _phase = Reading.HEAD  # the parser's place: HEAD until a head is in, BODY until its end

        def connection_made(self, transport) -> None:  # type: ignore[override]
            self._phase = Reading.HEAD
            self._begun = False
            self._head_size = 0  # bytes read of a head still arriving, after its first read
            self._begun_now = False  # the head began in the read being parsed
            self._too_many = False  # more than MAX_PIPELINED requests wait
            super().connection_made(transport)

        def data_received(self, data: bytes) -> None:
            self._begun_now = False
            super().data_received(data)
            if self._begun and not self._begun_now and not self.transport.is_closing():
                self._head_size += len(data)  # all of this read is the incomplete head
                if self._head_size > MAX_HEAD:
                    self.logger.warning("Request head larger than %d bytes.", MAX_HEAD)
                    self._disarm()
                    self.transport.write(LARGE_HEAD)
                    self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._phase = Reading.HEAD
            self._begun = True
            self._begun_now = True
            self._head_size = 0

        def on_headers_complete(self) -> None:
            self._phase = Reading.BODY
            self._begun = False
            super().on_headers_complete()
            if len(self.pipeline) > MAX_PIPELINED:  # stops the parser: data_received's 400
                self._too_many = True
                raise TooManyPipelined

        def send_400_response(self, msg: str) -> None:
            if not self._too_many:
                super().send_400_response(msg)
                return
            self.logger.warning(
                "More than %d requests pipelined; connection dropped.", MAX_PIPELINED
            )
            self.transport.abort()  # a response may be part-sent: no 400 after it

        def on_message_complete(self) -> None:
            self._phase = Reading.HEAD
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # resumes reading, starts the next queued request
            if self.pipeline and not self.transport.is_closing():
                self.flow.pause_reading()  # read on once the queued requests are answered

        def _reading(self) -> Reading:
            if self.pipeline:  # requests waiting their turn: reading is paused
                return Reading.NONE
            if self._phase is Reading.BODY:
                return Reading.BODY
            if self.cycle is not None and not self.cycle.response_complete:
                return Reading.NONE
            return Reading.HEAD

        def _next_head_begun(self) -> bool:
            return self._begun

    ReadDeadlineProtocol: type[ReadDeadlines] = HttpToolsDeadlines
else:
    ReadDeadlineProtocol = H11Deadlines


def read_deadline_protocol(
    read_timeout: float, base: type[ReadDeadlines] = ReadDeadlineProtocol
) -> type[ReadDeadlines]:
    """The protocol class for uvicorn's `http=` option, with `read_timeout` seconds: on
    httptools where it is installed, h11 otherwise (or `base`)."""
    return type(base.__name__, (base,), {"read_timeout": read_timeout})


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
