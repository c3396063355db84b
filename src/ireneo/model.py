"""The values that travel through the pipeline: turns in, hits out."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

BLOCK_TYPES = ("text", "thinking", "tool_use", "tool_result")


@dataclass(frozen=True)
class Block:
    block_type: str
    text: str
    tool_name: str | None = None

    def render(self) -> str:
        """The block as a person reads it: text as is, other kinds under a one-line label."""
        if self.block_type == "text":
            return self.text
        label = self.block_type + (f" {self.tool_name}" if self.tool_name else "")
        return f"[{label}]\n{self.text}"


@dataclass(frozen=True)
class Turn:
    """One message of one conversation, exactly as it was said."""

    session_id: str
    turn_uuid: str
    seq: int
    ts: datetime
    role: str
    harness: str
    blocks: tuple[Block, ...]
    echo: bool = False  # a recall echo (ireneo.echoes): kept, but not recalled by default

    @property
    def text(self) -> str:
        return "\n\n".join(block.render() for block in self.blocks if block.text)

    def as_context(self) -> ContextTurn:
        return ContextTurn(self.seq, self.role, self.ts, self.text)


@dataclass(frozen=True)
class ContextTurn:
    """A neighbouring turn shown around a hit."""

    seq: int
    role: str
    ts: datetime
    text: str


@dataclass
class Hit:
    """One recalled turn, best first, with its neighbours for context."""

    session_id: str
    turn_uuid: str
    seq: int
    ts: datetime
    role: str
    text: str
    score: float
    context: list[ContextTurn] = field(default_factory=list)
    kind: str = "conversation"

    def to_dict(self) -> dict:
        return {
            "session_id": self.session_id,
            "turn_uuid": self.turn_uuid,
            "seq": self.seq,
            "ts": format_ts(self.ts),
            "role": self.role,
            "text": self.text,
            "score": round(self.score, 6),
            "context": [{"seq": c.seq, "role": c.role, "text": c.text} for c in self.context],
        }


@dataclass(frozen=True)
class ConversationSummary:
    """One conversation in a listing."""

    session_id: str
    first_ts: datetime
    last_ts: datetime
    turns: int
    first_words: str

    def to_dict(self) -> dict:
        return {
            "session_id": self.session_id,
            "first_ts": format_ts(self.first_ts),
            "last_ts": format_ts(self.last_ts),
            "turns": self.turns,
            "first_words": self.first_words,
        }


def format_ts(ts: datetime) -> str:
    """RFC 3339 in UTC with a Z, to the second: the one timestamp form ireneo writes."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_ts(value: str) -> datetime:
    """Parse an RFC 3339 timestamp; a naive one is refused, since its zone is a guess."""
    ts = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if ts.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no time zone (add Z or +00:00)")
    return ts.astimezone(UTC)
