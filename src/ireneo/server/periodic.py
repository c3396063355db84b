"""The server's periodic jobs (expiring memories, retention): run off the event loop, for ever."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ireneo.server.logs import log_event


async def every(
    interval: float, job: Callable[[], object], event: str, log: logging.Logger
) -> None:
    """Run `job` in a worker thread every `interval` seconds until cancelled. A run that fails
    is logged as `event` and the next one tries again."""
    while True:
        await asyncio.sleep(interval)
        try:
            await asyncio.to_thread(job)
        except Exception as exc:
            log_event(log, event, level=logging.ERROR, error=type(exc).__name__)
