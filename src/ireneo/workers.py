"""Thread pools for work that releases the GIL (inference, BLAS, SQLite), one per purpose
(the server's recall calls run in "recall", ireneo.server.slots).

A pool never runs work that waits on its own pool, so pools cannot starve each other: that is
why each purpose has its own.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from ireneo.env import usable_cores

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
