"""What the MCP tools showed each user (echo detection, ireneo.echoes), recorded off the answer's
path.

A recall used to write its record before answering: a write transaction that waited for the
memory's write lock behind ingest and indexing, then a commit, while the agent waited and the
call held a recall slot. `RETURNED.note` queues the record instead; one thread writes the queue,
one transaction per memory for every record gathered meanwhile. Before a post's turns are stored
(`flush`), that memory's queued records are written, so an echo posted right after a recall is
still seen. A record that cannot be written (the memory closed meanwhile, a full disk) costs only
that record, as before; so does a queue past `MAX_QUEUED_TURNS` for one memory.
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
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: dict[int, tuple[Memory, list[tuple[str, int]], datetime]] = {}
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self.written = 0  # records' transactions written, for tests
        self.dropped = 0

    def note(self, memory: Memory, turns: Iterable[tuple[str, int]]) -> None:
        """Queue the record that `turns` were just shown from `memory`."""
        turns = list(turns)
        now = datetime.now(UTC)
        with self._lock:
            _, queued, _ = self._queued.get(id(memory), (memory, [], now))
            if len(queued) + len(turns) > MAX_QUEUED_TURNS:
                self.dropped += 1
                return
            self._queued[id(memory)] = (memory, queued + turns, now)
            self._idle.clear()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="ireneo-returned", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def flush(self, memory: Memory) -> None:
        """Write `memory`'s queued records now, in the calling thread."""
        with self._lock:
            entry = self._queued.pop(id(memory), None)
        if entry is not None:
            self._write(*entry)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Until every queued record is written (tests)."""
        return self._idle.wait(timeout)

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
            self.written += 1
        except Exception as exc:  # noqa: BLE001 - a record is worth less than the server
            log_event(log, "returned_not_recorded", level=logging.WARNING, error=type(exc).__name__)


RETURNED = ReturnedLog()  # the process's queue
