"""Thread pools for work that releases the GIL (inference, BLAS, SQLite), one per purpose
(the server's recall calls run in "recall", ireneo.server.slots), and the cores they may use.

A pool never runs work that waits on its own pool, so pools cannot starve each other: that is
why each purpose has its own.
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


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


def pool(purpose: str, threads: int | None = None) -> ThreadPoolExecutor:
    """The process's pool for `purpose`, started on first use: `threads` threads (default: one
    per usable core). Asked again with more threads, the same pool may start that many."""
    wanted = threads or usable_cores()
    with _lock:
        if purpose not in _pools:
            _pools[purpose] = ThreadPoolExecutor(wanted, thread_name_prefix=f"ireneo-{purpose}")
        executor = _pools[purpose]
        if executor._max_workers < wanted:  # threads start only when work waits for one
            executor._max_workers = wanted
        return executor


if hasattr(os, "register_at_fork"):  # a forked child inherits the pools, not their threads
    os.register_at_fork(after_in_child=_pools.clear)
