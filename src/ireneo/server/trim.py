"""Give the heap memory freed in bulk back to the system (glibc's malloc_trim), now and then.

glibc keeps what a process frees for its next allocations: after a backfill (thousands of
memories opened and closed, posts parsed, embedding batches) a server holds hundreds of MB it
no longer uses. `Trim` calls `malloc_trim(0)` where memory is freed in bulk (after the registry
closes memories, after an index run), at most once every `interval` seconds, so a caller pays
one clock read most of the time. Elsewhere than on glibc (musl, macOS, Windows) it does
nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable

from ireneo.server.logs import log_event

log = logging.getLogger("ireneo.server.trim")

TRIM_INTERVAL = 10.0  # seconds between two trims at most
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def glibc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc's own symbol: musl has malloc_trim too
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def resident_pages() -> int:
    """The process's resident pages (Linux's /proc/self/statm), 0 where unknown."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0


class Trim:
    """`trim()` gives freed heap memory back at most every `interval` seconds; `trims` counts
    the calls made, `cpu_seconds` their CPU time (thread time) and `freed` the bytes of RSS
    they gave back, since it was made."""

    def __init__(self, interval: float = TRIM_INTERVAL, *, clock=time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._call = glibc_trim()
        self._lock = threading.Lock()
        self._next = clock() + interval
        self.trims = 0
        self.cpu_seconds = 0.0
        self.freed = 0

    @property
    def available(self) -> bool:
        return self._call is not None

    def __call__(self, *, force: bool = False) -> bool:
        """Trim if `interval` has passed since the last trim (or `force`); whether it did."""
        if self._call is None:
            return False
        now = self._clock()
        if not force and now < self._next:
            return False
        if not self._lock.acquire(blocking=False):  # another thread is trimming
            return False
        try:
            self._next = now + self.interval
            before, cpu = resident_pages(), time.thread_time()
            self._call(0)
            spent = time.thread_time() - cpu
            freed = max(0, before - resident_pages()) * PAGE
            self.trims += 1
            self.cpu_seconds += spent
            self.freed += freed
        finally:
            self._lock.release()
        log_event(
            log, "memory_trim", cpu_ms=round(spent * 1000, 2), freed_mb=round(freed / 2**20, 1)
        )
        return True
