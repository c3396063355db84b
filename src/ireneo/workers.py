"""Thread pools for work that releases the GIL (inference, BLAS, SQLite), one per purpose
(the server's recall calls run in "recall", ireneo.server.slots), and the cores they may use.

A pool never runs work that waits on its own pool, so pools cannot starve each other: that is
why each purpose has its own.

Background work (the indexer's embedding) runs in a pool whose threads carry a lower CPU
priority (Linux's per-thread nice), so it takes only what interactive work leaves; the parallel
calls such a thread fans out go to `helpers()`, threads at that same priority.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


@functools.cache
def usable_cores() -> int:
    """Cores this process may really use: the affinity mask, capped by a cgroup CPU quota.

    A container limited to 2 CPUs on a 64-core host still sees 64 cores in its affinity
    mask; 64 inference threads sharing 2 CPUs would thrash.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, -(-int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return cores


_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


_background = threading.local()  # .nice: how far this thread was lowered


def pool(purpose: str, threads: int | None = None, *, nice: int = 0) -> ThreadPoolExecutor:
    """The process's pool for `purpose`, started on first use: `threads` threads (default: one
    per usable core), each lowered by `nice` as it starts (0: left as it is). Asked again with
    more threads, the same pool may start that many."""
    wanted = threads or usable_cores()
    with _lock:
        if purpose not in _pools:
            _pools[purpose] = ThreadPoolExecutor(
                wanted,
                thread_name_prefix=f"ireneo-{purpose}",
                initializer=lower_priority if nice > 0 else None,
                initargs=(nice,) if nice > 0 else (),
            )
        executor = _pools[purpose]
        if executor._max_workers < wanted:  # threads start only when work waits for one
            executor._max_workers = wanted
        return executor


async def on(executor: ThreadPoolExecutor, fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)` on one of `executor`'s threads, awaited: `asyncio.to_thread` on a pool of
    one's choosing (the context's variables go along, as there)."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(executor, call)


def lower_priority(nice: int) -> bool:
    """Lower the calling thread's CPU priority `nice` steps below the process's (its main
    thread's nice + `nice`, at most 19; threads it starts later inherit it); True if it now
    runs there or lower. Linux only: elsewhere, or where the OS refuses, nothing changes and
    False comes back. A thread's priority is never raised again (that needs privileges), so
    only threads kept for background work are lowered."""
    if nice <= 0 or sys.platform != "linux":  # elsewhere a thread id is not a PRIO_PROCESS id
        return False
    tid = threading.get_native_id()
    try:
        target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + nice)
        if os.getpriority(os.PRIO_PROCESS, tid) < target:
            os.setpriority(os.PRIO_PROCESS, tid, target)
    except OSError:
        return False
    _background.nice = nice
    return True


def helpers(default: ThreadPoolExecutor) -> ThreadPoolExecutor:
    """Where the calling thread sends the parallel calls it waits for: `default`, or from a
    lowered thread, the "background" pool (as many threads, lowered as far), so that its
    work is not done by interactive threads at theirs."""
    nice = getattr(_background, "nice", 0)
    if nice <= 0 or threading.current_thread().name.startswith("ireneo-background"):
        return default  # a helper never waits on its own pool
    return pool(f"background-{nice}", default._max_workers, nice=nice)


if hasattr(os, "register_at_fork"):  # a forked child inherits the pools, not their threads
    os.register_at_fork(after_in_child=_pools.clear)
