"""The debounced indexer of replicas that share one PostgreSQL database.

The queue is the database's: storing passages writes (or bumps the generation of) the user's
row in `index_jobs`, in the same transaction, so no replica can lose the work. Every replica
polls for rows older than the debounce (and again as soon as one of its runs ends); to run one
it takes the user's advisory lock with `pg_try_advisory_lock` on a connection it holds for the
run: two replicas never index one user at once, and the lock of a replica that dies goes with
its connection, so another replica picks the row up again. A job found held by another replica
is passed over for a second, so an idle replica takes the next due user instead of waiting
behind a long run elsewhere. After a run the row is deleted if its generation is unchanged; a
write during the run bumped it, which earns exactly one more run, one debounce later.

A run takes turns with other users as `Indexer`'s do: once it has embedded for `slice_seconds`
while the last poll saw other users' jobs due, it stops after its current (committed) batch,
keeps its row and puts it behind the jobs due now (the queue is ordered by `requested_at`).

Same interface as `Indexer` (schedule, busy, wait_idle, catch_up, stop and the counters), so the
server does not know which one it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque

from psycopg_pool import ConnectionPool

from ireneo.server.indexer import SLICE_SECONDS, IndexStopped, IndexYielded, Slice
from ireneo.server.logs import log_event
from ireneo.server.memories import OpenMemories
from ireneo.store.pg_schema import SCHEMA
from ireneo.workers import on
from ireneo.workers import pool as threads

log = logging.getLogger("ireneo.server.indexer")

_LOCK = "hashtextextended('ireneo-index:' || %s, 0)"
DUE = (
    f"SELECT user_id FROM {SCHEMA}.index_jobs "
    "WHERE requested_at <= now() - make_interval(secs => %s) AND user_id <> ALL(%s) "
    "ORDER BY requested_at LIMIT %s"
)
ELSEWHERE_SECONDS = 1.0  # how long a job found held by another replica is passed over


class SharedIndexer:
    def __init__(
        self,
        registry: OpenMemories,
        pool: ConnectionPool,
        *,
        debounce: float = 1.0,
        concurrency: int = 1,
        poll: float | None = None,
        slice_seconds: float = SLICE_SECONDS,
        nice: int = 0,
    ):
        self.registry = registry
        self.pool = pool
        # one thread per run at once, `nice` steps below the server (as Indexer's)
        self._threads = threads(f"index-{nice}", max(1, concurrency), nice=nice)
        self.debounce = debounce
        self.poll = poll if poll is not None else min(1.0, max(0.05, debounce))
        self.concurrency = max(1, concurrency)
        self.slice_seconds = slice_seconds
        self._others_due = 0  # due jobs of users not indexed here, at the last poll
        self._wake: asyncio.Event | None = None
        self._poller: asyncio.Task | None = None
        self._running: set[asyncio.Task] = set()
        self._keys_running: Counter[str] = Counter()
        self._elsewhere: dict[str, float] = {}  # jobs another replica held: when found so
        self._stopping = False
        self.runs: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.skipped = 0  # due jobs another replica held
        self.yielded = 0  # runs that stopped to let other users' jobs go first
        self.overlaps = 0
        self.events: deque[tuple[str, str, float]] = deque(maxlen=10_000)

    # -- called from the event loop -------------------------------------------------------
    def schedule(self, key: str) -> None:
        """The store queued the work already; look for it sooner than the next poll."""
        if self._stopping:
            return
        self._ensure_poller()
        assert self._wake is not None
        self._wake.set()

    def busy(self) -> int:
        """Index runs going on in this replica."""
        return sum(1 for task in self._running if not task.done())

    async def wait_idle(self, timeout: float = 30.0) -> None:
        """Wait until no user's work is queued in the database nor running here."""
        deadline = time.monotonic() + timeout
        while True:
            queued = await asyncio.to_thread(self._queued)
            if not queued and not self.busy():
                return
            if time.monotonic() > deadline:
                raise TimeoutError("indexer still busy")
            self.schedule("")
            await asyncio.sleep(self.poll)

    async def catch_up(self) -> int:
        """Start polling; work queued before this replica started is in the table already."""
        self._ensure_poller()
        try:
            queued = await asyncio.to_thread(self._queued)
        except Exception as exc:
            log_event(log, "index_catch_up", level=logging.ERROR, error=type(exc).__name__)
            return 0
        if queued:
            log_event(log, "index_catch_up", users=queued)
        return queued

    async def stop(self) -> None:
        self._stopping = True
        if self._poller is not None:
            self._poller.cancel()
        tasks = [t for t in (self._poller, *self._running) if t is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- internals ------------------------------------------------------------------------
    def _ensure_poller(self) -> None:
        if self._poller is None and not self._stopping:
            self._wake = asyncio.Event()
            self._poller = asyncio.get_running_loop().create_task(self._poll_forever())

    async def _poll_forever(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.poll)
            self._wake.clear()
            free = self.concurrency - self.busy()
            now = time.monotonic()
            self._elsewhere = {
                key: at for key, at in self._elsewhere.items() if now - at < ELSEWHERE_SECONDS
            }
            try:  # asked even with no free slot: whether a run here should let others go first
                due = await asyncio.to_thread(
                    self._due, self.concurrency + self.busy(), list(self._elsewhere)
                )
            except Exception as exc:  # the database is away: try again at the next poll
                log_event(log, "index_poll", level=logging.ERROR, error=type(exc).__name__)
                continue
            others = [key for key in due if not self._keys_running[key]]
            self._others_due = len(others)
            for key in others:
                if free <= 0:
                    break
                free -= 1
                task = asyncio.get_running_loop().create_task(self._run(key))
                self._running.add(task)
                task.add_done_callback(self._running.discard)

    async def _run(self, key: str) -> None:
        self._keys_running[key] += 1
        if self._keys_running[key] > 1:
            self.overlaps += 1
        began = time.time()
        held: list[float] = []  # when the user's lock was taken and let go (_run_locked)
        fields: dict = {"user_key": key}
        level = logging.INFO
        try:
            done = await on(self._threads, self._run_locked, key, held)
            if done is None:  # another replica runs it: look past it at once
                self.skipped += 1
                self._elsewhere[key] = time.monotonic()
                if self._wake is not None:
                    self._wake.set()
                return
            self.runs[key] += 1
            fields.update(passages=done, outcome="ok")
        except IndexYielded as exc:
            self.runs[key] += 1
            self.yielded += 1
            fields.update(passages=exc.done, outcome="yielded")
            self.schedule(key)  # its row is due again: poll now, not in a second
        except IndexStopped:
            fields["outcome"] = "stopped"
        except Exception as exc:
            self.failures[key] += 1
            level = logging.ERROR
            fields.update(outcome="error", error=type(exc).__name__)
        finally:
            self._keys_running[key] -= 1
            if held and self._wake is not None:  # a slot is free: the next due job, now
                self._wake.set()
        # the lock's own span, in wall-clock time that replicas share: this thread's start and
        # end also hold a lock attempt and a hand-off back to the loop, so another replica's run
        # could appear to overlap one that had already let the lock go
        started, ended = held if len(held) == 2 else (began, time.time())
        self.events.append((key, "start", started))
        self.events.append((key, "end", ended))
        fields.update(started=round(started, 3), ended=round(ended, 3))
        fields["ms"] = round((ended - started) * 1000, 1)
        log_event(log, "index_run", level=level, **fields)

    def _run_locked(self, key: str, held: list[float]) -> int | None:
        """One run under the user's advisory lock; None when another replica holds it. `held`
        gets the times the lock was taken and let go."""
        with self.pool.connection() as conn:
            row = conn.execute(f"SELECT pg_try_advisory_lock({_LOCK})", (key,)).fetchone()
            if not row or not row[0]:
                return None
            held.append(time.time())
            try:
                job = conn.execute(
                    f"SELECT generation FROM {SCHEMA}.index_jobs WHERE user_id = %s", (key,)
                ).fetchone()
                if job is None:  # done by another replica between the poll and the lock
                    return 0
                try:
                    done = self._embed(key)
                except IndexYielded:  # due at once, behind the jobs due now
                    conn.execute(
                        f"UPDATE {SCHEMA}.index_jobs "
                        "SET requested_at = now() - make_interval(secs => %s) WHERE user_id = %s",
                        (self.debounce, key),
                    )
                    raise
                except IndexStopped:
                    raise
                except Exception:
                    conn.execute(  # try again one debounce later
                        f"UPDATE {SCHEMA}.index_jobs SET requested_at = now() WHERE user_id = %s",
                        (key,),
                    )
                    raise
                finished = conn.execute(
                    f"DELETE FROM {SCHEMA}.index_jobs WHERE user_id = %s AND generation = %s",
                    (key, job[0]),
                )
                if finished.rowcount == 0:  # written meanwhile: once more, one debounce later
                    conn.execute(
                        f"UPDATE {SCHEMA}.index_jobs SET requested_at = now() WHERE user_id = %s",
                        (key,),
                    )
                return done
            finally:
                held.append(time.time())
                conn.execute(f"SELECT pg_advisory_unlock({_LOCK})", (key,))

    def _embed(self, key: str) -> int:
        progress = Slice(self.slice_seconds, lambda: self._others_due > 0, lambda: self._stopping)
        return self.registry.embed_pending(key, progress)

    def _due(self, limit: int, elsewhere: list[str]) -> list[str]:
        with self.pool.connection() as conn:
            rows = conn.execute(DUE, (self.debounce, elsewhere, max(1, limit))).fetchall()
        return [key for (key,) in rows]

    def _queued(self) -> int:
        with self.pool.connection() as conn:
            row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.index_jobs").fetchone()
        return int(row[0]) if row else 0
