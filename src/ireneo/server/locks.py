"""Locks between the processes that serve one home (`ireneo serve --workers N`).

Each lock is `flock` on a small file under `<home>/locks/`, taken without waiting: a process
that finds it held does something else (the indexer tries the user again one debounce later; a
periodic job skips its turn). The kernel lets a lock go when its file is closed, so when the
process holding it dies: a killed worker never leaves a user unindexable. One process's threads
exclude each other too (each `held` opens the file anew, and flock locks an open file).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

LOCKS_DIR = "locks"
DUE_SHARE = 0.9  # a job is due once this share of its interval has passed since its last run


class HomeLock:
    """One lock file, taken and let go by the same caller (see `held` for a block)."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock if no other process (or open of it) holds it; never waits."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is held already")
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # lets the lock go

    def last_run(self) -> float:
        """The time (epoch seconds) written by `mark_run`, 0 if none; read with the lock held."""
        assert self._fd is not None
        text = os.pread(self._fd, 32, 0).decode("ascii", "replace").strip()
        try:
            return float(text)
        except ValueError:
            return 0.0

    def mark_run(self, at: float) -> None:
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{at:.3f}\n".encode("ascii"), 0)


@contextmanager
def held(path: Path) -> Iterator[bool]:
    """True inside the block when the lock was taken (and is let go after it), False when
    another process holds it."""
    lock = HomeLock(path)
    try:
        yield lock.acquire()
    finally:
        lock.release()


class HomeLocks:
    """The lock files of one home: one per user for indexing, one per periodic job."""

    def __init__(self, home: Path):
        self.dir = Path(home) / LOCKS_DIR

    def index(self, key: str) -> HomeLock:
        return HomeLock(self.dir / f"index-{key}")

    def job(self, name: str) -> HomeLock:
        return HomeLock(self.dir / f"job-{name}")


def run_if_due(
    lock: HomeLock,
    interval: float,
    job: Callable[[], object],
    clock: Callable[[], float] = time.time,
) -> bool:
    """Run `job` unless another process is running it or ran it less than `DUE_SHARE` of
    `interval` ago (its last run is written in the lock file); whether it ran. Each process
    asks once per interval, so the home gets one run per interval however many processes serve
    it, and a run as long as one of them lives."""
    if not lock.acquire():
        return False
    try:
        if clock() - lock.last_run() < DUE_SHARE * interval:
            return False
        job()
        lock.mark_run(clock())
        return True
    finally:
        lock.release()
