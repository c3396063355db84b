"""Helpers for the hostile-input and isolation tests: what a server's memories hold, taken
through the Python API (so the same check reads any store), and the probe count they report."""

from __future__ import annotations

import hashlib
from collections import Counter

from tests.conftest_server import RunningServer


def memory_snapshot(server: RunningServer, key: str) -> str | None:
    """A digest of everything one user's memory holds (turns, refs, explicit memories), or None
    when the user has no memory."""
    digest = hashlib.sha256()
    with server.state.registry.lease(key, create=False) as memory:
        if memory is None:
            return None
        for summary in memory.sessions():
            digest.update(
                f"session {summary.session_id} {memory.session_ref(summary.session_id)}\n".encode()
            )
            for turn in memory.get(summary.session_id):
                digest.update(f"{turn.turn_uuid} {turn.seq} {turn.ts} {turn.role}\n".encode())
                digest.update(turn.text.encode("utf-8") + b"\n")
        for record in memory.store.memory_records():
            digest.update(f"memory {record.memory_id} {record.updated_at}\n".encode())
            digest.update(record.content.encode("utf-8") + b"\n")
    return digest.hexdigest()


def store_snapshot(server: RunningServer) -> dict[str, str | None]:
    """Every user's memory digest, by user key."""
    return {key: memory_snapshot(server, key) for key in server.state.registry.keys_on_disk()}


class ProbeLedger:
    """Counts probes by kind and records leaks; the isolation tests report it at the end."""

    def __init__(self) -> None:
        self.probes: Counter[str] = Counter()
        self.leaks: list[str] = []

    def check(self, kind: str, answer: str, markers: list[str]) -> None:
        self.probes[kind] += 1
        leaked = [marker for marker in markers if marker in answer]
        if leaked:
            self.leaks.append(f"{kind}: {leaked} in {answer[:200]!r}")

    def record(self, kind: str, leaked: bool, detail: str = "") -> None:
        self.probes[kind] += 1
        if leaked:
            self.leaks.append(f"{kind}: {detail}")

    @property
    def total(self) -> int:
        return sum(self.probes.values())
