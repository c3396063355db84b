"""The periodic job that removes every user's expired low-importance explicit memories.

A pass first asks which users have an explicit memory old enough to expire, without opening
any memory: on SQLite by reading each file (store.sqlite.expirable_in), on PostgreSQL by one
question per user in that user's row-level-security scope, many users to a round trip
(store.postgres.expirable). It opens only those memories, so an hourly pass over thousands of
users neither reopens them all nor pushes the ones in use out of the registry. With a home
lock, one process of those serving a home makes the pass (server/periodic.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from ireneo.memories import ExplicitMemories, MemoryPolicy
from ireneo.server.locks import HomeLock
from ireneo.server.logs import log_event
from ireneo.server.memories import OpenMemories
from ireneo.server.periodic import every
from ireneo.store.sqlite import expirable_in

log = logging.getLogger("ireneo.server")


class MemoryExpiry:
    """Every `interval` seconds, one pass over every user's memory. `runs` and `removed` count
    the passes made and the memories they removed since the server started."""

    def __init__(
        self,
        registry: OpenMemories,
        policy: MemoryPolicy,
        clock: Callable[[], datetime],
        interval: float,
        lock: HomeLock | None = None,
    ):
        self.registry = registry
        self.policy = policy
        self.clock = clock
        self.interval = interval
        self.lock = lock
        self.runs = 0
        self.removed = 0

    def run_once(self) -> int:
        """One pass over every user's memory (blocking: call it in a worker thread)."""
        removed = users = 0
        for key in self._candidates():
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

    def _candidates(self) -> list[str]:
        """The users whose memory may hold something to expire."""
        days = self.policy.low_max_age_days
        if days <= 0:  # nothing ever expires
            return []
        keys = self.registry.keys_on_disk()
        cutoff = self.clock() - timedelta(days=days)
        if self.registry.database is not None:
            from ireneo.store.postgres import expirable

            return expirable(self.registry.database, keys, cutoff)
        found = []
        for key in keys:
            try:
                if expirable_in(self.registry.path(key), cutoff):
                    found.append(key)
            except Exception:  # noqa: BLE001 - an odd file: the pass opens it and logs why
                found.append(key)
        return found

    async def run_forever(self) -> None:
        await every(self.interval, self.run_once, "memory_expiry", log, lock=self.lock)
