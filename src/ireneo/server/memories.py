"""One memory per user, kept open in a bounded registry.

A user's memory lives in `<home>/users/<key>`, where `key = sha256(user)[:24]`: the directory
name never shows the user id. The registry keeps at most `capacity` memories open (least
recently used first out); a memory that is evicted while someone still uses it is closed when
the last lease ends, and a lease on it meanwhile gets the same object back, so one directory is
never open twice.

With a PostgreSQL `database` (a connection pool shared by every memory), a user's memory is the
rows keyed by that same key, and no directory is made.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ireneo.memory import Memory
from ireneo.server.logs import log_event

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

log = logging.getLogger("ireneo.server.memories")

KEY_CHARS = 24
_KEY = re.compile(rf"[0-9a-f]{{{KEY_CHARS}}}")


def user_key(user: str) -> str:
    """The name of a user's memory directory, and the user's name in logs."""
    return hashlib.sha256(user.encode("utf-8")).hexdigest()[:KEY_CHARS]


@dataclass
class _Entry:
    key: str
    memory: Memory
    leases: int = 0
    retired: bool = False


class MemoryRegistry:
    def __init__(
        self,
        users_dir: Path,
        *,
        capacity: int = 64,
        model: str | None = None,
        rerank: str | None = None,
        opener: Callable[..., Memory] = Memory,
        database: ConnectionPool | None = None,
    ):
        self.users_dir = Path(users_dir)
        self.database = database
        self.capacity = max(1, capacity)
        self.model, self.rerank = model, rerank
        self._opener = opener
        self._lock = threading.Lock()
        self._open: OrderedDict[str, _Entry] = OrderedDict()
        self._retiring: dict[str, _Entry] = {}
        self.opened = 0
        self.closed = 0

    def path(self, key: str) -> Path:
        if not _KEY.fullmatch(key):
            raise ValueError("not a user key")
        return self.users_dir / key

    def exists(self, key: str) -> bool:
        if self.database is not None:
            from ireneo.store.postgres import has_memory

            return has_memory(self.database, key)
        return self.path(key).exists()

    def keys_on_disk(self) -> list[str]:
        """Keys of every user who has a memory (directory, or rows in the database)."""
        if self.database is not None:
            from ireneo.store.postgres import users

            return users(self.database)
        try:
            return sorted(p.name for p in self.users_dir.iterdir() if _KEY.fullmatch(p.name))
        except FileNotFoundError:
            return []

    @contextmanager
    def lease(self, key: str, *, create: bool) -> Iterator[Memory | None]:
        """The user's open memory for the block's duration; None if it has none and not `create`.

        Blocking (it may open a database): call it from a worker thread.
        """
        entry = self._acquire(key, create)
        if entry is None:
            yield None
            return
        try:
            yield entry.memory
        finally:
            self._release(entry)

    def remove(self, key: str) -> None:
        """Close the user's memory (now, or when its last lease ends) and delete its directory.

        Call it after forgetting everything in it: deleting files does not scrub them.
        """
        path = self.path(key)
        with self._lock:
            entry = self._open.pop(key, None) or self._retiring.pop(key, None)
            if entry is not None:
                entry.retired = True
            idle = entry is not None and entry.leases == 0
        if idle:
            self._close(entry)
        shutil.rmtree(path, ignore_errors=True)

    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    def close_all(self) -> None:
        """Close every memory now, or when its last lease ends."""
        with self._lock:
            entries = [*self._open.values(), *self._retiring.values()]
            self._open.clear()
            self._retiring.clear()
            idle = []
            for entry in entries:
                entry.retired = True
                if entry.leases:
                    self._retiring[entry.key] = entry
                else:
                    idle.append(entry)
        for entry in idle:
            self._close(entry)

    # -- internals ------------------------------------------------------------------------
    def _acquire(self, key: str, create: bool) -> _Entry | None:
        # a key names rows in the database (any the store holds) or a directory (checked)
        path = self.path(key) if self.database is None else None
        evicted: list[_Entry] = []
        with self._lock:
            entry = self._open.get(key)
            if entry is None and key in self._retiring:
                entry = self._retiring.pop(key)
                entry.retired = False
                self._open[key] = entry
            if entry is None:
                started = time.monotonic()
                if not create and not self.exists(key):
                    return None
                if self.database is not None:
                    memory = self._opener(
                        database=self.database, user=key, model=self.model, rerank=self.rerank
                    )
                else:
                    assert path is not None
                    created = create and not path.exists()
                    if create:
                        path.mkdir(mode=0o700, parents=True, exist_ok=True)
                    try:
                        memory = self._opener(path, model=self.model, rerank=self.rerank)
                    except BaseException:
                        if created:  # a full disk: leave no empty memory behind
                            shutil.rmtree(path, ignore_errors=True)
                        raise
                self.opened += 1
                # a memory opened (the bench counts the recalls that paid for one)
                log_event(
                    log,
                    "memory_open",
                    user_key=key,
                    ms=round((time.monotonic() - started) * 1000, 1),
                    open=len(self._open) + 1,
                )
                entry = _Entry(key, memory)
                self._open[key] = entry
            self._open.move_to_end(key)
            entry.leases += 1
            while len(self._open) > self.capacity:
                old_key, old = self._open.popitem(last=False)
                old.retired = True
                if old.leases:
                    self._retiring[old_key] = old
                else:
                    evicted.append(old)
        for old in evicted:
            self._close(old)
        return entry

    def _release(self, entry: _Entry) -> None:
        close = False
        with self._lock:
            entry.leases -= 1
            if entry.retired and entry.leases == 0:
                key = entry.key
                if self._retiring.get(key) is entry:
                    del self._retiring[key]
                close = True
        if close:
            self._close(entry)

    def _close(self, entry: _Entry) -> None:
        try:
            entry.memory.close()
        finally:
            with self._lock:
                self.closed += 1
