"""One memory per user, kept open in a bounded registry.

A user's memory lives in `<home>/users/<key>`, where `key = sha256(user)[:24]`: the directory
name never shows the user id. The registry keeps memories open within two bounds, least recently
used first out: at most `capacity` of them (and, on SQLite, no more than a third of the file
descriptors the process may hold: each open file is three), and at most `budget_bytes` of RAM
by their own estimate (Memory.resident_bytes: search's copies, SQLite's page cache and the words
kept for the echo test), so a server holds many small memories or a few large ones. A memory
that is evicted while someone still uses it is closed when the last lease ends, and a lease on
it meanwhile gets the same object back, so one directory is never open twice.

A memory is opened outside the registry's lock (one opener per key; the others wait for it): a
cold open, which may read a database, never holds up the leases of other users. Once it has
closed memories, the registry gives the heap memory they freed back to the system (`trim`, at
most every few seconds: server/trim.py).

Another process serving the same home (`ireneo serve --workers N`) may delete a user's directory
(DELETE /users/...) and a post may make it again: a lease first checks that the directory is the
one its open memory was opened from (its file's inode), else closes that memory and opens the new one,
so no write goes to a deleted file.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ireneo.index import Progress
from ireneo.memory import Memory
from ireneo.server.logs import log_event
from ireneo.server.trim import Trim
from ireneo.store.sqlite import DB_NAME

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
    bytes: int = 0  # its estimate of the RAM it holds, as of its last lease
    identity: tuple[int, int] | None = None  # its file's (device, inode), on SQLite


@dataclass
class _Gate:
    """One opener of a key at a time; `waiting` counts who holds or waits for it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0


FD_PER_MEMORY = 3  # an open SQLite memory: its file, its write-ahead log, its shared memory
FD_SPARE = 256  # descriptors left for sockets, the model, logs


def fd_room() -> int:
    """How many SQLite memories this process can keep open, by its file descriptor limit."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, ValueError, OSError):
        return 1 << 30
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max(1, (soft - FD_SPARE) // FD_PER_MEMORY)


class OpenMemories:
    def __init__(
        self,
        users_dir: Path,
        *,
        capacity: int = 64,
        budget_bytes: int | None = None,
        model: str | None = None,
        rerank: str | None = None,
        opener: Callable[..., Memory] = Memory,
        database: ConnectionPool | None = None,
        trim: Trim | None = None,
    ):
        self.users_dir = Path(users_dir)
        self.database = database
        self.capacity = max(1, capacity if database is not None else min(capacity, fd_room()))
        self.budget_bytes = budget_bytes
        self.model, self.rerank = model, rerank
        self._opener = opener
        self._trim = trim
        self._lock = threading.Lock()
        self._open: OrderedDict[str, _Entry] = OrderedDict()
        self._retiring: dict[str, _Entry] = {}
        self._gates: dict[str, _Gate] = {}
        self._bytes = 0  # the sum of the open entries' bytes
        self.opened = 0  # memories opened since the registry was made
        self.closed = 0  # memories closed since

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
        with self._gate(key):  # no open of this key is under way meanwhile
            with self._lock:
                entry = self._open.pop(key, None)
                if entry is not None:
                    self._bytes -= entry.bytes
                else:
                    entry = self._retiring.pop(key, None)
                if entry is not None:
                    entry.retired = True
                idle = entry is not None and entry.leases == 0
            if idle:
                self._close(entry)
            shutil.rmtree(path, ignore_errors=True)
        self.trim()

    def embed_pending(self, key: str, progress: Progress) -> int:
        """One index run (both indexers'), in a worker thread: embed what the user's memory has
        pending, or the slice `progress` allows; then give the run's freed batches back."""
        try:
            with self.lease(key, create=False) as memory:
                return 0 if memory is None else memory.embed_pending(progress=progress)
        finally:
            self.trim()

    def trim(self) -> None:
        """Give the heap memory freed by work done in bulk back to the system (at most every
        few seconds, on glibc; see server.trim): called after closing memories, after an index
        run."""
        if self._trim is not None:
            self._trim()

    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    def held_bytes(self) -> int:
        """The open memories' estimate of the RAM they hold."""
        with self._lock:
            return self._bytes

    def close_all(self) -> None:
        """Close every memory now, or when its last lease ends."""
        with self._lock:
            entries = [*self._open.values(), *self._retiring.values()]
            self._open.clear()
            self._retiring.clear()
            self._bytes = 0
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
    def _leased(self, key: str) -> _Entry | None:
        """The key's entry, open or retiring, with one more lease; call under the lock."""
        entry = self._open.get(key)
        if entry is None and key in self._retiring:
            entry = self._retiring.pop(key)
            entry.retired = False
            self._open[key] = entry
            self._bytes += entry.bytes
        if entry is not None:
            self._open.move_to_end(key)
            entry.leases += 1
        return entry

    @contextmanager
    def _gate(self, key: str) -> Iterator[None]:
        with self._lock:
            gate = self._gates.setdefault(key, _Gate())
            gate.waiting += 1
        try:
            with gate.lock:
                yield
        finally:
            with self._lock:
                gate.waiting -= 1
                if not gate.waiting:
                    del self._gates[key]

    def _acquire(self, key: str, create: bool) -> _Entry | None:
        # a key names rows in the database (any the store holds) or a directory (checked)
        path = self.path(key) if self.database is None else None
        # outside the lock: a stat gives the interpreter's lock away, and the holder of ours
        # would then wait for it back while every other lease waited for ours
        identity = _identity(path) if path is not None else None
        with self._lock:
            stale = self._drop_stale(key, path, identity)
            entry = self._leased(key)
        if stale is not None:
            self._close(stale)
        if entry is not None:
            return entry
        with self._gate(key):
            with self._lock:  # opened by whoever held the gate before
                entry = self._leased(key)
            if entry is not None:
                return entry
            started = time.monotonic()
            if not create and not self.exists(key):
                return None
            memory = self._open_memory(key, path, create)
            identity = _identity(path) if path is not None else None
            with self._lock:
                self.opened += 1
                entry = _Entry(key, memory, leases=1, identity=identity)
                self._open[key] = entry
                held = len(self._open)
                evicted = self._evict()
        # a memory opened (the bench counts the recalls that paid for one)
        log_event(
            log,
            "memory_open",
            user_key=key,
            ms=round((time.monotonic() - started) * 1000, 1),
            open=held,
        )
        for old in evicted:
            self._close(old)
        if evicted:
            self.trim()
        return entry

    def _drop_stale(
        self, key: str, path: Path | None, identity: tuple[int, int] | None
    ) -> _Entry | None:
        """Retire the key's memory if its directory was deleted or made again since it was
        opened (by another process), as `identity` (its file's now) tells; returns it when
        nobody uses it, to close outside the lock. Call under the lock."""
        entry = self._open.get(key) or self._retiring.get(key)
        if path is None or entry is None or identity == entry.identity:
            return None
        if self._open.get(key) is entry:
            del self._open[key]
            self._bytes -= entry.bytes
        else:
            del self._retiring[key]
        entry.retired = True
        return entry if entry.leases == 0 else None

    def _open_memory(self, key: str, path: Path | None, create: bool) -> Memory:
        if self.database is not None:
            return self._opener(
                database=self.database, user=key, model=self.model, rerank=self.rerank
            )
        assert path is not None
        created = create and not path.exists()
        if create:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            return self._opener(path, model=self.model, rerank=self.rerank)
        except BaseException:
            if created:  # a full disk: leave no empty memory behind
                shutil.rmtree(path, ignore_errors=True)
            raise

    def _evict(self) -> list[_Entry]:
        """Retire the least recently used memories past the bounds (never the last one used);
        returns those nobody uses, to close outside the lock. Call under the lock."""
        idle = []
        while len(self._open) > 1 and (
            len(self._open) > self.capacity
            or (self.budget_bytes is not None and self._bytes > self.budget_bytes)
        ):
            old_key, old = self._open.popitem(last=False)
            self._bytes -= old.bytes
            old.retired = True
            if old.leases:
                self._retiring[old_key] = old
            else:
                idle.append(old)
        return idle

    def _release(self, entry: _Entry) -> None:
        size = _resident_bytes(entry.memory)  # it may have read its copies meanwhile
        close, evicted = False, []
        with self._lock:
            entry.leases -= 1
            if not entry.retired and self._open.get(entry.key) is entry:
                self._bytes += size - entry.bytes
                evicted = self._evict()
            entry.bytes = size
            if entry.retired and entry.leases == 0:
                key = entry.key
                if self._retiring.get(key) is entry:
                    del self._retiring[key]
                close = True
        for old in evicted:
            self._close(old)
        if close and entry not in evicted:
            self._close(entry)
        if close or evicted:
            self.trim()

    def _close(self, entry: _Entry) -> None:
        try:
            entry.memory.close()
        finally:
            with self._lock:
                self.closed += 1


def _identity(path: Path) -> tuple[int, int] | None:
    """The (device, inode) of the memory's file in the user's directory `path`: the file, not
    the directory, since an open memory holds its file open, so its inode cannot be reused by
    a new file while the old memory is open (a freed directory's inode can be, at once)."""
    try:
        found = (path / DB_NAME).stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _resident_bytes(memory: Memory) -> int:
    try:
        return int(memory.resident_bytes())
    except Exception:  # noqa: BLE001 - an estimate: a closed or odd store counts nothing
        return 0
