"""A short way through for the hot MCP request: `tools/call` of a tool taking one string.

In stateless mode the MCP SDK answers each request with FastMCP's handler layers (its middleware
chain, provider lookup, visibility rules, telemetry spans, argument validation; for the 2026
protocol a `tools/list` run per call to check `Mcp-Param-*` headers; for 2024-2025 versions a
fresh transport, memory streams and a dispatcher task as well): more of the event loop's CPU
than the tool call itself when the tool answers at once (docs/reliability.md has the figures).
`DirectCalls` answers the one request agents send again and again, a well-formed `tools/call`
of a tool named in `tools`, by awaiting that tool's function (the one FastMCP calls) and
writing the very bytes the SDK writes; every other request (initialize, server/discover,
tools/list, other tools, any argument, `_meta` key or header it does not know, a caller
without a verified token) goes on to the SDK untouched, so answers, errors and refusals stay
the SDK's. The 2026 protocol's checks of the envelope are the SDK's own functions.
tests/test_server_direct.py compares the two paths byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pydantic_core
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.shared.inbound import (
    MCP_PARAM_HEADER_PREFIX,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import DEFAULT_NEGOTIATED_VERSION
from mcp_types import methods as _methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Tool = Callable[[str], Awaitable[str]]
"""A tool function of one string argument, returning its text."""
Tools = Mapping[str, tuple[str, Tool]]
"""The tools the direct path answers: name → (the argument's name, the function)."""

MAX_ID = 2**53  # a JSON-RPC id the direct path echoes; larger ones go to the SDK
SERVER_INFO = "io.modelcontextprotocol/serverInfo"  # the 2026 results' `_meta` stamp
# The `_meta` keys of a 2026 call the direct path knows (fastmcp.Client sends them all); a
# progress token and a log level ask for nothing of a tool that reports neither.
MODERN_META = frozenset(
    {
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/logLevel",
        "progressToken",
    }
)
_VERSION = b"mcp-protocol-version"
_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower().encode()
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_LEGACY_PARAMS = frozenset({"name", "arguments"})
_MODERN_PARAMS = frozenset({"name", "arguments", "_meta"})
_HEADERS = {"Content-Type": "application/json"}

Call = tuple[Any, Tool, str]  # the request's id, the tool's function, its argument


class DirectCalls:
    """ASGI middleware on `path`: answers a `tools/call` of one of `tools` itself, as the SDK
    in stateless JSON mode would; passes everything else on. It sits inside the auth
    middleware (it needs the verified caller in `scope["user"]`) and inside the body's limit
    and deadline (it reads the body). `server_info`: the 2026 results' stamp (the low-level
    server's `server_info_stamp`)."""

    def __init__(self, app: ASGIApp, *, path: str, tools: Tools, server_info: dict[str, Any]):
        self.app = app
        self.path = path
        self.tools = dict(tools)
        self.server_info = server_info
        self.answered = 0  # calls answered here (the tests read it)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        version = self._version(scope)
        if version is None:
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        body = b""
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        modern = version in MODERN_PROTOCOL_VERSIONS
        call = None
        if messages[-1]["type"] == "http.request":
            call = self._modern_call(scope, body) if modern else self._legacy_call(body, version)
        if call is None:
            await self.app(scope, _replay(messages, receive), send)
            return
        request_id, fn, argument = call
        self.answered += 1
        # The tools fail soft (a sentence, never an exception: server/tools.py's ToolCalls),
        # so there is no error result of FastMCP's to write here.
        text = await fn(argument)
        content = [{"text": text, "type": "text"}]
        if modern:  # the SDK's modern entry: json.dumps of the model's dump
            stamp = {SERVER_INFO: self.server_info}
            result = {"content": content, "isError": False, "resultType": "complete"}
            payload = {"jsonrpc": "2.0", "id": request_id, "result": result | {"_meta": stamp}}
            answer: bytes | str = json.dumps(payload, separators=(",", ":"))
        else:  # the SDK's transport: pydantic's JSON of the message
            result = {"content": content, "isError": False}
            answer = pydantic_core.to_json({"jsonrpc": "2.0", "id": request_id, "result": result})
        await Response(answer, headers=_HEADERS)(scope, receive, send)

    def _version(self, scope: Scope) -> str | None:
        """The protocol version the request is served at, or None when its head is not one
        the direct path takes (a POST to the path by a verified caller, JSON accepted and
        sent, no `Mcp-Param-*` header, a version the SDK serves)."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            return None
        if not isinstance(scope.get("user"), AuthenticatedUser):
            return None  # the SDK's 401
        version = accept = kind = None
        for name, value in scope["headers"]:
            if name.startswith(_PARAM_PREFIX):
                return None
            if name == _VERSION and version is None:  # the first of each, as Starlette reads
                version = value.decode("latin-1")
            elif name == b"accept" and accept is None:
                accept = value
            elif name == b"content-type" and kind is None:
                kind = value
        if kind is None or kind.split(b";")[0].strip() != b"application/json":
            return None  # the SDK's 400 or 415 (it compares case-sensitively)
        if accept is None or not _accepts_json(accept):
            return None
        if version is None:
            return DEFAULT_NEGOTIATED_VERSION  # the SDK's assumption for a 2025 client
        if version in HANDSHAKE_PROTOCOL_VERSIONS or version in MODERN_PROTOCOL_VERSIONS:
            return version
        return None

    def _legacy_call(self, body: bytes, version: str) -> Call | None:
        """A `tools/call` of one of the tools with exactly its one string argument, parsed as
        the SDK's transport parses; else None."""
        try:
            request = pydantic_core.from_json(body)
        except ValueError:
            return None
        call = self._call(request, _LEGACY_PARAMS)
        return call if call is not None and _valid(request, version) else None

    def _modern_call(self, scope: Scope, body: bytes) -> Call | None:
        """As `_legacy_call`, parsed and checked as the SDK's 2026 entry does (its envelope
        ladder, its duplicated routing headers: any refusal is the SDK's to write)."""
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            return None
        call = self._call(request, _MODERN_PARAMS)
        if call is None or not set(request["params"]["_meta"]) <= MODERN_META:
            return None
        headers = Headers(scope=scope)
        if find_duplicated_routing_header(headers.items()) is not None:
            return None
        verdict = classify_inbound_request(request, headers=dict(headers))
        if isinstance(verdict, InboundLadderRejection):
            return None
        return call if _valid(request, verdict.protocol_version) else None

    def _call(self, request: Any, params_keys: frozenset[str]) -> Call | None:
        if not isinstance(request, dict) or request.keys() != _REQUEST_KEYS:
            return None
        request_id, params = request["id"], request["params"]
        if request["jsonrpc"] != "2.0" or request["method"] != "tools/call":
            return None
        if not (type(request_id) is str or (type(request_id) is int and abs(request_id) < MAX_ID)):
            return None
        if not isinstance(params, dict) or params.keys() != params_keys:
            return None
        if "_meta" in params and not isinstance(params["_meta"], dict):
            return None
        tool, arguments = self.tools.get(params["name"]), params["arguments"]
        if tool is None or not isinstance(arguments, dict) or len(arguments) != 1:
            return None
        argument = arguments.get(tool[0])
        if type(argument) is not str:
            return None
        return request_id, tool[1], argument


def _valid(request: dict, version: str) -> bool:
    """The SDK's own check of a call's params at `version` (its INVALID_PARAMS otherwise)."""
    try:
        _methods.validate_client_request("tools/call", version, request["params"])
    except (ValueError, KeyError):  # pydantic's ValidationError is a ValueError
        return False
    return True


def _accepts_json(accept: bytes) -> bool:
    """The SDK's test (`check_accept_headers`): application/json, application/* or */*."""
    types = {part.split(b";")[0].strip().lower() for part in accept.split(b",")}
    return bool(types & {b"application/json", b"application/*", b"*/*"})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """`receive` giving `messages` again first (the body read already), then the rest."""
    queue = list(messages)

    async def replayed() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()

    return replayed
