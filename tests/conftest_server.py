"""Helpers for the server tests: a real server on 127.0.0.1 (uvicorn in a thread), real tokens,
the official MCP client over streamable HTTP. Imported by the tests/test_server*.py modules."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx2
import jwt
import psycopg
import uvicorn
from fastmcp import Client

from ireneo.benchmark.server_process import free_port
from ireneo.config import Settings
from ireneo.server.app import ServerState, create_app
from ireneo.server.auth import mint_token
from ireneo.server.memories import user_key

INGEST_KEY = "test-ingest-key-0123456789"
JWT_SECRET = "test-jwt-secret-" + "0123456789abcdef" * 4
ISSUER = "https://issuer.test"
AUDIENCE = "ireneo-test"
SRC = str(Path(__file__).resolve().parent.parent / "src")
# The environment `ireneo serve` needs, for servers started as processes.
SERVER_ENV = {
    "IRENEO_INGEST_KEY": INGEST_KEY,
    "IRENEO_JWT_SECRET": JWT_SECRET,
    "IRENEO_JWT_ISSUER": ISSUER,
    "IRENEO_JWT_AUDIENCE": AUDIENCE,
}


def make_settings(home: Path, **changes: Any) -> Settings:
    base = Settings(
        home=home,
        ingest_key=INGEST_KEY,
        jwt_secret=JWT_SECRET,
        jwt_issuer=ISSUER,
        jwt_audience=AUDIENCE,
        index_debounce=0.05,
    )
    return base.with_(**changes)


class RunningServer:
    """`create_app(settings)` served by uvicorn on a free loopback port, in a thread."""

    def __init__(self, settings: Settings, *, clock: Any = None, direct: bool = True):
        self.settings = settings
        self.app = create_app(settings, clock=clock, direct=direct)
        self.state: ServerState = self.app.state.ireneo
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.http = httpx2.Client(base_url=self.url, timeout=30)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._server.serve())

    def close(self) -> None:
        self.http.close()
        self._server.should_exit = True
        self._thread.join(timeout=20)
        self.loop.close()

    # -- the server's own loop -----------------------------------------------------------
    def on_loop(self, coro: Coroutine, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def wait_indexed(self, timeout: float = 60) -> None:
        self.on_loop(self.state.indexer.wait_idle(timeout), timeout + 5)

    # -- ingest --------------------------------------------------------------------------
    def post(
        self, body: Any = None, *, key: str | bytes | None = INGEST_KEY, **kwargs: Any
    ) -> httpx2.Response:
        headers = dict(kwargs.pop("headers", {}))
        if key is not None:
            headers["x-ingest-key"] = key
        if body is not None:
            kwargs["json"] = body
        return self.http.post("/turns", headers=headers, **kwargs)

    def memory_dir(self, user: str) -> Path:
        return self.state.registry.path(user_key(user))

    def stored_turns(self, user: str, conversation_id: str) -> list:
        """What the user's memory holds for a conversation ([] if nothing)."""
        from ireneo.errors import NotFound

        with self.state.registry.lease(user_key(user), create=False) as memory:
            if memory is None:
                return []
            try:
                return memory.get(conversation_id)
            except NotFound:
                return []

    # -- MCP -----------------------------------------------------------------------------
    def token(self, user: str, **settings_changes: Any) -> str:
        return mint_token(self.settings.with_(**settings_changes), user)

    def call(self, token: str, tool: str, **arguments: Any) -> str:
        return asyncio.run(call_tool(f"{self.url}/mcp", token, tool, arguments))

    def recall(self, user: str, query: str) -> str:
        return self.call(self.token(user), "recall_my_conversations", query=query)


async def call_tool(url: str, token: str, tool: str, arguments: dict) -> str:
    async with Client(url, auth=token, timeout=30) as client:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error
        return result.content[0].text


def raw_token(claims: dict, secret: str = JWT_SECRET, algorithm: str = "HS256") -> str:
    return jwt.encode(claims, secret, algorithm=algorithm)


def good_claims(user: str = "alice", **changes: Any) -> dict:
    now = int(time.time())
    claims = {"sub": user, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    claims.update(changes)
    return {key: value for key, value in claims.items() if value is not None}


def conversation(
    cid: str, texts: list[str], *, day: str = "2026-10-08", user: str = "alice"
) -> dict:
    return {
        "user": user,
        "conversation_id": cid,
        "turns": [
            {
                "ts": f"{day}T09:{i:02d}:00Z",
                "role": "user" if i % 2 == 0 else "assistant",
                "text": t,
            }
            for i, t in enumerate(texts)
        ],
    }


REF = re.compile(r"ref ([0-9A-Za-z_-]+)")


def refs_in(text: str) -> list[str]:
    return REF.findall(text)


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a child `python` that must import this checkout's ireneo."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRENEO_")}
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


PYTHON = sys.executable


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """`ireneo serve` as a process of its own on a free port, its output piped; and its URL."""
    port = free_port()
    process = subprocess.Popen(
        [PYTHON, "-m", "ireneo.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, f"http://127.0.0.1:{port}"


def wait_ready(process: subprocess.Popen, url: str, timeout: float = 90) -> None:
    """Until /health answers 200; fails with the server's output if it exits first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx2.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.1)


def stop_server(process: subprocess.Popen, timeout: float = 30) -> str:
    """SIGINT, as an operator stops it (SIGKILL after `timeout` s); returns what it wrote to
    stderr."""
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    return stderr


# Servers on PostgreSQL: the first recall loads the model on a busy machine; index runs come quickly.
POSTGRES_SERVER_ENV = {
    **SERVER_ENV,
    "IRENEO_INDEX_DEBOUNCE": "0.2",
    "IRENEO_RECALL_TIMEOUT": "120",
}


def pending(database_url: str, user: str) -> int:
    """The user's passages not embedded yet, read as the application role."""
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction():
        conn.execute("SELECT set_config('app.user_id', %s, true)", (user_key(user),))
        row = conn.execute(
            "SELECT count(*) FROM ireneo.passages WHERE user_id = %s AND embedding IS NULL",
            (user_key(user),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def wait_for(condition: Callable[[], object], timeout: float = 15, what: str = "it") -> None:
    """Until `condition()` is true; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def json_events(stderr: str) -> list[dict]:
    """The server's log events: its JSON lines."""
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
