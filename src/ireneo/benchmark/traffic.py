"""Synthetic gateway traffic for the load and crash harnesses: conversations that grow one turn
per post, each turn carrying a marker found nowhere else (`CK-<user><conv><turn>`), so that a
keyword recall of the marker must return that turn and no other.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ireneo import Memory

SITES = ["North", "South", "East", "West", "Harbour", "Ridge", "Valley", "Delta", "Mesa", "Cove"]
KINDS = ["pump", "compressor", "conveyor", "boiler", "mixer", "press", "turbine", "chiller"]
PEOPLE = ["Priya", "Tomas", "Aiko", "Marta", "Sven", "Lena", "Omar", "Ravi", "Chen", "Nadia"]
SYMPTOMS = [
    "the vibration alarm keeps coming back",
    "a seal is leaking under the housing",
    "the bearing is noisy at high load",
    "the pressure drops overnight",
    "the temperature creeps above the limit",
    "the motor trips on start",
]
TASKS = ["an inspection", "a calibration", "an oil change", "a filter swap", "a firmware update"]


def user_name(n: int) -> str:
    return f"load-user-{n:03d}"


def marker(user: int, conversation: int, turn: int) -> str:
    return f"CK-{user:03d}{conversation:06d}{turn:03d}"


def turn_text(user: int, conversation: int, turn: int) -> str:
    rng = random.Random(f"{user}/{conversation}/{turn}")
    return (
        f"Note {marker(user, conversation, turn)}: at the {rng.choice(SITES)} site the "
        f"{rng.choice(KINDS)} has a problem, {rng.choice(SYMPTOMS)}; {rng.choice(PEOPLE)} "
        f"will do {rng.choice(TASKS)} within {rng.randint(2, 40)} hours."
    )


@dataclass
class Conversation:
    """One conversation of one user, as the gateway would post it: the whole of it so far."""

    user: int
    number: int
    turns: int = 0
    acked: int = 0  # the longest post answered 202
    attempted: set[int] = field(default_factory=set)  # every length posted, answered or not

    @property
    def conversation_id(self) -> str:
        return f"conv-{self.user:03d}-{self.number:06d}"

    def body(self) -> dict:
        start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=self.number)
        return {
            "user": user_name(self.user),
            "conversation_id": self.conversation_id,
            "turns": [
                {
                    "ts": (start + timedelta(minutes=k)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "role": "user" if k % 2 == 0 else "assistant",
                    "text": turn_text(self.user, self.number, k),
                }
                for k in range(self.turns)
            ],
        }

    def grow(self) -> dict:
        self.turns += 1
        self.attempted.add(self.turns)
        return self.body()


class StoredMemories:
    """The traffic users' memories as the server stored them, read with the server stopped:
    directories under `home`, or rows in the PostgreSQL database at `database_url`."""

    def __init__(self, home: Path, pool=None):
        self.home = home
        self.pool = pool

    def _key(self, user: int) -> str:
        from ireneo.server.memories import user_key

        return user_key(user_name(user))

    def exists(self, user: int) -> bool:
        if self.pool is not None:
            from ireneo.store.postgres import has_memory

            return has_memory(self.pool, self._key(user))
        return (self.home / "users" / self._key(user)).exists()

    def open(self, user: int) -> Memory:
        from ireneo import Memory

        if self.pool is not None:
            return Memory(database=self.pool, user=self._key(user))
        return Memory(self.home / "users" / self._key(user))


@contextmanager
def stored_memories(home: Path, database_url: str | None) -> Iterator[StoredMemories]:
    """The traffic users' memories, with a pool of its own when they live in PostgreSQL."""
    pool = None
    if database_url:
        from ireneo.store.postgres import open_pool

        pool = open_pool(database_url, max_size=2)
    try:
        yield StoredMemories(home, pool)
    finally:
        if pool is not None:
            pool.close()


def stored_texts(memory: Memory, conversation_id: str) -> list[str]:
    """The texts of a conversation's stored turns, in order; none when it was never stored."""
    from ireneo.errors import NotFound

    try:
        return [turn.text for turn in memory.get(conversation_id)]
    except NotFound:
        return []
