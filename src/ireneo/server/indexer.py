"""The per-user debounced indexer: embeds stored turns off the request path.

After a store, `schedule(key)` marks the user dirty. One asyncio task per user waits
`debounce` seconds, clears the mark and runs `embed_pending` in a worker thread; if a store
marked the user again meanwhile, it goes round once more. So a burst of posts gives one run,
runs of one user never overlap, and a post during a run earns exactly one more run. At most
`concurrency` runs go at once over all users (embedding is CPU-bound: recall keeps a core).
Recall never waits for any of this: stored turns are keyword-searchable at once.

Runs embed on the process's "index" threads, `nice` steps below the server's CPU priority
(Linux; the parallel calls they fan out run on threads lowered as far, workers.helpers): they
get what recall leaves of the CPU, and all of it when recall is idle (docs/reliability.md).

A run takes turns with other users: once it has embedded for `slice_seconds` and another user
waits for a slot, it stops after its current (committed) batch and queues again behind them, so
a user backfilling a long history holds nobody's vectors back for longer than a slice.

At start, `catch_up` finds the memories with turns waiting for vectors by reading one counter
in each file (store.sqlite.pending_in), without opening them as memories: only the ones with
work are opened, one at a time as their runs come, within the registry's budget.

A run that fails because the disk is full is tried again every `full_retry` seconds until it
succeeds, so vectors come once space is back, without a restart or another post.

With `locks` (server/locks.py, one lock file per user), the processes that serve one home
(`ireneo serve --workers N`) never index one user at once: a run takes the user's lock first,
without waiting; a user whose lock another process holds is marked dirty again and tried one
debounce later (then finding nothing left, or what was stored after that process looked), so a
post answered by any process gets its vectors. Every process's `catch_up` schedules the users
with work; the locks spread them over the processes rather than run any twice at once.

What it did is kept as it goes: `runs` per user (logged at stop), `overlaps` (runs of one
user that overlapped: always 0 unless a bug), and the last 10,000 `events` (start and end of
each run, per user).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from ireneo.errors import StorageFull
from ireneo.server.locks import HomeLocks
from ireneo.server.logs import log_event
from ireneo.server.memories import OpenMemories
from ireneo.store.sqlite import pending_in
from ireneo.workers import on, pool

log = logging.getLogger("ireneo.server.indexer")

SLICE_SECONDS = 2.0  # how long a run embeds before it lets a waiting user go first


@dataclass
class _UserState:
    dirty: bool = False
    task: asyncio.Task | None = None
    running: int = 0


class IndexStopped(Exception):
    """Raised between two committed batches when the server shuts down."""


class IndexYielded(Exception):
    """Raised between two committed batches when a run has had its slice and another user
    waits: the rest of the user's work goes to the back of the queue. `done`: passages embedded."""

    def __init__(self, done: int):
        super().__init__(done)
        self.done = done


class Slice:
    """A run's progress callback: stops it between two committed batches when the server
    stops (IndexStopped), or when it has run `seconds` and `waiting()` says another user waits
    (IndexYielded)."""

    def __init__(
        self, seconds: float, waiting: Callable[[], bool], stopping: Callable[[], bool]
    ) -> None:
        self.seconds = seconds
        self.waiting = waiting
        self.stopping = stopping
        self.started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        if self.stopping():  # each batch is committed: stopping between two loses nothing
            raise IndexStopped
        # `done` may pass `total`: a run also embeds what is stored while it goes
        if time.monotonic() - self.started >= self.seconds and self.waiting():
            raise IndexYielded(done)


class Indexer:
    def __init__(
        self,
        registry: OpenMemories,
        *,
        debounce: float = 1.0,
        concurrency: int = 1,
        slice_seconds: float = SLICE_SECONDS,
        locks: HomeLocks | None = None,
        nice: int = 0,
    ):
        self.registry = registry
        # one thread per run at once; 0: threads at the priority of the rest of the server
        self._threads = pool(f"index-{nice}", max(1, concurrency), nice=nice)
        self.locks = locks
        self.debounce = debounce
        self.slice_seconds = slice_seconds
        self._waiting = 0  # users whose run waits for a slot
        self.full_retry = 30.0  # seconds between runs while the disk is full
        self._slots = asyncio.Semaphore(max(1, concurrency))  # runs at once, over all users
        self._users: dict[str, _UserState] = {}
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False
        self.runs: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.yielded = 0  # runs that stopped to let a waiting user go first
        self.overlaps = 0  # runs that started while another run of the same user was going
        self.elsewhere = 0  # runs put off because another process was indexing the user
        self.events: deque[tuple[str, str, float]] = deque(maxlen=10_000)

    # -- called from the event loop -------------------------------------------------------
    def schedule(self, key: str) -> None:
        """Ask for an index run of this user's memory soon. Call it on the event loop."""
        if self._stopping:
            return
        state = self._users.setdefault(key, _UserState())
        state.dirty = True
        if state.task is None or state.task.done():
            state.task = asyncio.get_running_loop().create_task(self._loop(key, state))
            self._tasks.add(state.task)
            state.task.add_done_callback(self._tasks.discard)

    def busy(self) -> int:
        """Users with an index task waiting or running."""
        return sum(1 for task in self._tasks if not task.done())

    async def wait_idle(self, timeout: float = 30.0) -> None:
        """Wait until no user has work scheduled (for tests and shutdown)."""
        deadline = time.monotonic() + timeout
        while self._tasks:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("indexer still busy")
            await asyncio.wait(set(self._tasks), timeout=remaining)

    async def catch_up(self) -> int:
        """Schedule every user whose memory has turns waiting for vectors (after a crash)."""
        started = time.monotonic()
        try:
            keys, checked = await asyncio.to_thread(self._keys_with_pending)
        except OSError as exc:
            log_event(log, "index_catch_up", level=logging.ERROR, error=type(exc).__name__)
            return 0
        for key in keys:
            self.schedule(key)
        log_event(
            log,
            "index_catch_up",
            users=len(keys),
            checked=checked,
            ms=round((time.monotonic() - started) * 1000, 1),
        )
        return len(keys)

    async def stop(self) -> None:
        """Stop scheduling, cancel waiting runs; a run in a thread stops after its current batch."""
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- internals ------------------------------------------------------------------------
    async def _loop(self, key: str, state: _UserState) -> None:
        pause = self.debounce
        while state.dirty and not self._stopping:
            await asyncio.sleep(pause)
            self._waiting += 1
            try:
                await self._slots.acquire()  # first come, first served
            finally:
                self._waiting -= 1
            try:
                state.dirty = False  # what is stored from here on waits for the next run
                outcome = await self._run(key, state)
            finally:
                self._slots.release()
            pause = self.debounce
            if outcome == "elsewhere":  # another process indexes the user: look again later
                state.dirty = True
            elif outcome == "yielded":  # the rest of its work, behind the users who waited
                state.dirty, pause = True, 0.0
            elif outcome == "storage_full" and not self._stopping:
                state.dirty = True
                await asyncio.sleep(self.full_retry)

    async def _run(self, key: str, state: _UserState) -> str:
        """One index run; its outcome (ok, yielded, stopped, storage_full, error, or elsewhere:
        another process holds the user's lock)."""
        lock = self.locks.index(key) if self.locks is not None else None
        try:
            if lock is not None and not lock.acquire():  # a syscall or two: fine on the loop
                self.elsewhere += 1
                return "elsewhere"
        except OSError as exc:  # the home's lock directory cannot be written: no run
            self.failures[key] += 1
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)  # tried again, as a full run is
            outcome = "storage_full" if full else "error"
            log_event(
                log,
                "index_run",
                level=logging.ERROR,
                user_key=key,
                outcome=outcome,
                error=type(exc).__name__,
            )
            return outcome
        try:
            return await self._run_locked(key, state)
        finally:
            if lock is not None:
                lock.release()

    async def _run_locked(self, key: str, state: _UserState) -> str:
        state.running += 1
        if state.running > 1:
            self.overlaps += 1
        self.runs[key] += 1
        started = time.monotonic()
        self.events.append((key, "start", started))
        fields: dict = {"user_key": key}
        level = logging.INFO
        try:
            fields["passages"] = await on(self._threads, self.embed, key)
            fields["outcome"] = "ok"
        except IndexYielded as exc:
            self.yielded += 1
            fields.update(passages=exc.done, outcome="yielded")
        except IndexStopped:
            fields["outcome"] = "stopped"
        except Exception as exc:
            self.failures[key] += 1
            level = logging.ERROR
            full = isinstance(exc, StorageFull) or (
                isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
            )
            fields.update(outcome="storage_full" if full else "error", error=type(exc).__name__)
        finally:
            state.running -= 1
            self.events.append((key, "end", time.monotonic()))
        fields["ms"] = round((time.monotonic() - started) * 1000, 1)
        log_event(log, "index_run", level=level, **fields)
        return str(fields["outcome"])

    def embed(self, key: str) -> int:
        """One index run, in a worker thread: embed what the user's memory has pending (or a
        slice of it: IndexYielded)."""
        progress = Slice(self.slice_seconds, lambda: self._waiting > 0, lambda: self._stopping)
        return self.registry.embed_pending(key, progress)

    def _keys_with_pending(self) -> tuple[list[str], int]:
        """The users with turns waiting for vectors, and how many memories were looked at.
        A memory file is read, not opened as a memory; one that cannot be read is scheduled,
        so its run opens it and logs what is wrong."""
        keys = self.registry.keys_on_disk()
        if self.registry.database is not None:  # rows, not files: ask each open memory
            return [key for key in keys if self._leased_pending(key)], len(keys)
        found = []
        for key in keys:
            try:
                pending = pending_in(self.registry.path(key))
            except Exception as exc:  # noqa: BLE001 - an odd file: its run will say what
                log_event(
                    log,
                    "index_catch_up",
                    level=logging.WARNING,
                    user_key=key,
                    error=type(exc).__name__,
                )
                pending = 1
            if pending:
                found.append(key)
        return found, len(keys)

    def _leased_pending(self, key: str) -> bool:
        try:
            with self.registry.lease(key, create=False) as memory:
                return memory is not None and memory.pending() > 0
        except Exception as exc:  # noqa: BLE001
            log_event(
                log, "index_catch_up", level=logging.ERROR, user_key=key, error=type(exc).__name__
            )
            return False
