"""Fair recall slots: one user cannot take more than their share of recall capacity.

At most `total` calls run at once, and at most `per_user` (half of `total`, rounded up) of them
for one user; a call that cannot run yet waits in its user's queue, and freed slots go to the
waiting users in turn (round robin), so another user's call never waits behind one user's
flood. A user with `waiting` calls queued already is refused at once (`Busy`).

A worker thread cannot be stopped from outside, so a call past its deadline keeps running until
its thread ends. It keeps its user's share (that user cannot start more meanwhile) but gives its
place in the total back, so others are not starved; at most `total` such overdue calls are
given back at once (past that they hold their place as running calls do), which bounds the
threads to twice `total`. Calls run in a pool of their own (ireneo.workers), never in the
event loop's default pool that ingest and everything else share.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ireneo import workers

T = TypeVar("T")

_ANYONE = None  # calls made for no one user: only the total bounds them

# What a tool answers when its user already has too many calls waiting.
BUSY = (
    "Too many of your memory lookups are waiting already; use the answers you have, "
    "or try again in a moment."
)


class Busy(Exception):
    """The user already has the most calls waiting that one user may have."""


@dataclass
class _Call:
    user: str | None
    overdue: bool = False


class FairSlots:
    def __init__(self, total: int, *, per_user: int | None = None, waiting: int | None = None):
        self.total = max(1, total)
        self.per_user = per_user or max(1, math.ceil(self.total / 2))
        self.waiting = waiting or 4 * self.total
        self.running = 0  # calls counted in the total
        self.overdue = 0  # calls past their deadline, thread still running, out of the total
        self.peak = 0  # the most calls that have run at once (in the total)
        self.busy = 0  # calls refused with Busy
        self._held: Counter[str | None] = Counter()  # per user: running and overdue calls
        self._queues: dict[str | None, deque[asyncio.Future[None]]] = {}  # in turn order
        self._pool = workers.pool("recall", threads=2 * self.total)

    @property
    def active(self) -> int:
        """Calls whose thread is running, overdue ones included."""
        return self.running + self.overdue

    def held(self, user: str | None) -> int:
        return self._held[user]

    async def run(self, user: str | None, fn: Callable[[], T], timeout: float) -> T:
        """`fn()` in a worker thread, once a slot is free for `user`, within `timeout` seconds
        in all (waiting included). Raises TimeoutError past it, Busy when `user` has too many
        calls waiting."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self._acquire(user, deadline)
        call = _Call(user)
        try:
            future = loop.run_in_executor(self._pool, fn)
        except BaseException:
            self._release(call)
            raise
        future.add_done_callback(lambda done: self._finished(call, done))
        try:
            async with asyncio.timeout_at(deadline):
                return await asyncio.shield(future)
        except (TimeoutError, asyncio.CancelledError):
            if not future.done():
                self._give_back(call)
            raise

    # -- the accounting (all on the event loop's thread) ---------------------------------------
    def _cap(self, user: str | None) -> int:
        return self.total if user is _ANYONE else self.per_user

    def _free_for(self, user: str | None) -> bool:
        return self.running < self.total and self._held[user] < self._cap(user)

    async def _acquire(self, user: str | None, deadline: float) -> None:
        queue = self._queues.get(user)
        if not queue and self._free_for(user):
            self._take(user)
            return
        if queue is not None and len(queue) >= self.waiting:
            self.busy += 1
            raise Busy
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(user, deque()).append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():  # granted just as we gave up
                self._release(_Call(user))
            else:
                self._forget(user, waiter)
            raise

    def _take(self, user: str | None) -> None:
        self.running += 1
        self._held[user] += 1
        self.peak = max(self.peak, self.running)

    def _forget(self, user: str | None, waiter: asyncio.Future[None]) -> None:
        queue = self._queues.get(user)
        if queue is not None:
            if waiter in queue:
                queue.remove(waiter)
            if not queue:
                del self._queues[user]

    def _give_back(self, call: _Call) -> None:
        """The caller stopped waiting for a call still running: its place in the total goes
        back (within the budget of overdue calls); its user's share stays held."""
        if call.overdue or self.overdue >= self.total:
            return
        call.overdue = True
        self.running -= 1
        self.overdue += 1
        self._wake()

    def _finished(self, call: _Call, done: asyncio.Future) -> None:
        if not done.cancelled():
            done.exception()  # retrieved: an abandoned failure is not reported twice
        self._release(call)

    def _release(self, call: _Call) -> None:
        if call.overdue:
            self.overdue -= 1
        else:
            self.running -= 1
        self._held[call.user] -= 1
        if self._held[call.user] <= 0:
            del self._held[call.user]
        self._wake()

    def _wake(self) -> None:
        """Grant free slots to waiting users in turn: the first user in the order who may run
        gets one and moves to the back; until no one waiting may run."""
        granted = True
        while granted and self.running < self.total and self._queues:
            granted = False
            for user in list(self._queues):
                if not self._free_for(user):
                    continue
                queue = self._queues.pop(user)
                waiter = queue.popleft()
                if queue:
                    self._queues[user] = queue  # to the back of the order
                if waiter.done():  # gave up meanwhile (removed on its own side too)
                    granted = True
                    break
                waiter.set_result(None)
                self._take(user)
                granted = True
                break
