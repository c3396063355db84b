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

from ireneo.memory import Memory
from ireneo.server.tools import MemoryTools, Recaller, register_tools


class SingleMemory:
    """The one memory in `home`, opened on first use; absent until that directory exists."""

    def __init__(self, home: Path, *, model: str | None = None, rerank: str | None = None):
        self.home = Path(home)
        self.model, self.rerank = model, rerank
        self._memory: Memory | None = None
        self._lock = threading.Lock()

    @contextmanager
    def lease(self, *, create: bool = False) -> Iterator[Memory | None]:
        with self._lock:
            if self._memory is None and (create or self.home.exists()):
                self._memory = Memory(self.home, model=self.model, rerank=self.rerank)
            memory = self._memory
        yield memory

    def close(self) -> None:
        with self._lock:
            if self._memory is not None:
                self._memory.close()
                self._memory = None


def create_stdio_server(
    home: Path, recaller: Recaller, *, model: str | None = None, rerank: str | None = None
) -> FastMCP:
    single = SingleMemory(home, model=model, rerank=rerank)

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
        recaller,
        lambda: ("local", single.lease),
        memory_tools=MemoryTools(recaller),
        writer=lambda: ("local", functools.partial(single.lease, create=True)),
    )
    return mcp
