"""The periodic job that removes every user's expired low-importance saved memories."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from ireneo.memories import ExplicitMemories, MemoryPolicy
from ireneo.server.logs import log_event
from ireneo.server.memories import MemoryRegistry
from ireneo.server.periodic import every

log = logging.getLogger("ireneo.server")


class MemoryExpiry:
    """Every `interval` seconds, one pass over every user's memory. `runs` and `removed` count
    the passes made and the memories they removed since the server started."""

    def __init__(
        self,
        registry: MemoryRegistry,
        policy: MemoryPolicy,
        clock: Callable[[], datetime],
        interval: float,
    ):
        self.registry = registry
        self.policy = policy
        self.clock = clock
        self.interval = interval
        self.runs = 0
        self.removed = 0

    def run_once(self) -> int:
        """One pass over every user's memory (blocking: call it in a worker thread)."""
        removed = users = 0
        for key in self.registry.keys_on_disk():
            try:
                with self.registry.lease(key, create=False) as memory:
                    if memory is None:
                        continue
                    count = ExplicitMemories(memory, policy=self.policy, now=self.clock).expire()
            except Exception as exc:
                log_event(
                    log,
                    "memory_expiry",
                    level=logging.ERROR,
                    user_key=key,
                    error=type(exc).__name__,
                )
                continue
            removed += count
            users += bool(count)
        self.runs += 1
        self.removed += removed
        log_event(log, "memory_expiry", users=users, removed=removed)
        return removed

    async def run_forever(self) -> None:
        await every(self.interval, self.run_once, "memory_expiry", log)
