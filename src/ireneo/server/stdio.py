"""`ireneo mcp`: one memory over MCP on stdio, for a desktop client. No auth: it is the local
user's own memory, and the same tools as the HTTP server serve it."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from fastmcp import FastMCP

from ireneo.config import Settings
from ireneo.memory import Memory
from ireneo.server.limits import Limits
from ireneo.server.tools import MemoryTools, Recaller, ToolCalls, register_tools


class SingleMemory:
    """The one memory in `home`, opened on first use; absent until that directory exists."""

    def __init__(self, home: Path, settings: Settings):
        self.home = Path(home)
        self.settings = settings
        self._memory: Memory | None = None
        self._lock = threading.Lock()

    @contextmanager
    def lease(self, *, create: bool = False) -> Iterator[Memory | None]:
        with self._lock:
            if self._memory is None and (create or self.home.exists()):
                self._memory = Memory(self.home, settings=self.settings)
            memory = self._memory
        yield memory

    def close(self) -> None:
        with self._lock:
            if self._memory is not None:
                self._memory.close()
                self._memory = None


def create_stdio_server(settings: Settings) -> FastMCP:
    """The MCP tools on the one memory in `settings.home`, within the settings' limits."""
    single = SingleMemory(settings.home, settings)
    calls = ToolCalls(Limits.from_settings(settings))

    @asynccontextmanager
    async def lifespan(server: FastMCP):
        try:
            yield {}
        finally:
            await asyncio.to_thread(single.close)

    mcp = FastMCP(
        "ireneo",
        instructions=(
            "Verbatim recall of this user's earlier conversations. Call recall_my_conversations "
            "when the user refers to something discussed before."
        ),
        lifespan=lifespan,
    )
    register_tools(
        mcp,
        Recaller(calls.limits, calls=calls),
        lambda: ("local", single.lease),
        memory_tools=MemoryTools(calls, policy=settings.memory_policy),
        writer=lambda: ("local", functools.partial(single.lease, create=True)),
    )
    return mcp
