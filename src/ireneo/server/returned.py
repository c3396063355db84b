"""What the MCP tools showed each user (echo detection, ireneo.echoes), recorded off the answer's
path, so that a recall never waits for a memory's write lock.

`RETURNED.note` queues a record; one thread writes the queue, one transaction per memory for
every record gathered meanwhile. Before a post's turns are stored, `flush` writes that memory's
queued records, so an echo posted right after a recall is still seen. A record that cannot be
written (the memory closed meanwhile, a full disk), or that would take one memory's queue past
`MAX_QUEUED_TURNS`, is dropped with a warning: it costs only that record. docs/reliability.md
says what this bought.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ireneo.server.logs import log_event

if TYPE_CHECKING:
    from ireneo.memory import Memory

log = logging.getLogger("ireneo.server.returned")

MAX_QUEUED_TURNS = 10_000  # per memory


class ReturnedLog:
    """The process's queue of records to write (`RETURNED`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: dict[int, tuple[Memory, list[tuple[str, int]], datetime]] = {}
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None

    def note(self, memory: Memory, turns: Iterable[tuple[str, int]]) -> None:
        """Queue the record that `turns` were just shown from `memory`."""
        turns = list(turns)
        now = datetime.now(UTC)
        with self._lock:
            _, queued, _ = self._queued.get(id(memory), (memory, [], now))
            full = len(queued) + len(turns) > MAX_QUEUED_TURNS
            if not full:
                self._queued[id(memory)] = (memory, queued + turns, now)
                self._idle.clear()
                self._start_writer()
        if full:
            log_event(log, "returned_not_recorded", level=logging.WARNING, error="queue_full")
        else:
            self._wake.set()

    def flush(self, memory: Memory) -> None:
        """Write `memory`'s queued records now, in the calling thread."""
        with self._lock:
            entry = self._queued.pop(id(memory), None)
        if entry is not None:
            self._write(*entry)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Until every queued record is written (the server waits for them as it stops)."""
        return self._idle.wait(timeout)

    def _start_writer(self) -> None:
        """The writer thread, started on the first record (again if it ever ended); call under
        the lock."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="ireneo-returned", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                batch, self._queued = self._queued, {}
            for entry in batch.values():
                self._write(*entry)
            with self._lock:
                if not self._queued:
                    self._idle.set()

    def _write(self, memory: Memory, turns: list[tuple[str, int]], now: datetime) -> None:
        try:
            memory.note_returned(turns, now)
        except Exception as exc:  # noqa: BLE001 - a record is worth less than the server
            log_event(log, "returned_not_recorded", level=logging.WARNING, error=type(exc).__name__)


RETURNED = ReturnedLog()  # the process's queue
