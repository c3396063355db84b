"""Thread pools for work that releases the GIL (inference, BLAS, SQLite), one per purpose.

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


def pool(purpose: str) -> ThreadPoolExecutor:
    """The process's pool for `purpose`: one thread per usable core, started on first use."""
    with _lock:
        if purpose not in _pools:
            _pools[purpose] = ThreadPoolExecutor(
                usable_cores(), thread_name_prefix=f"ireneo-{purpose}"
            )
        return _pools[purpose]


if hasattr(os, "register_at_fork"):  # a forked child inherits the pools, not their threads
    os.register_at_fork(after_in_child=_pools.clear)
