"""The server's periodic jobs (expiring memories, retention): run off the event loop, for ever.

With a home lock (server/locks.py), a job runs in one process at a time and once per interval
for the whole home, however many processes serve it (`ireneo serve --workers N`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from ireneo.server.locks import HomeLock, run_if_due
from ireneo.server.logs import log_event


async def every(
    interval: float,
    job: Callable[[], object],
    event: str,
    log: logging.Logger,
    *,
    lock: HomeLock | None = None,
) -> None:
    """Run `job` in a worker thread every `interval` seconds until cancelled; with `lock`, only
    when no other process runs it or ran it within the interval. A run that fails is logged as
    `event` and the next one tries again."""
    run = job if lock is None else functools.partial(run_if_due, lock, interval, job)
    while True:
        await asyncio.sleep(interval)
        try:
            await asyncio.to_thread(run)
        except Exception as exc:
            log_event(log, event, level=logging.ERROR, error=type(exc).__name__)
