"""Synthetic gateway traffic for the load and crash harnesses: conversations that grow one turn
per post, each turn carrying a marker found nowhere else (`CK-<user><conv><turn>`), so that a
keyword recall of the marker must return that turn and no other.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

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
    return f"CK-{user:03d}{conversation:04d}{turn:03d}"


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
        return f"conv-{self.user:03d}-{self.number:04d}"

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
