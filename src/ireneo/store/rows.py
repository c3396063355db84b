"""How values are written into rows and read back, the same in every store."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable

from ireneo.model import Block, Turn

# The last turns a store read, by their whole row: parsing a row (its blocks' JSON, the Block
# and Turn objects) is most of what reading a turn costs, and a recall reads again the turns the
# recalls near it read. An equal row is an equal turn (every column is in the key, the user's own
# conversation and turn ids among them; a Turn cannot be changed). Bounded: at most KEPT_TURNS
# rows of at most KEPT_TURN_CHARS characters of blocks (docs/reliability.md).
KEPT_TURNS = 2048
KEPT_TURN_CHARS = 2048
BLOCKS = 6  # where a turn's row holds its blocks: session, uuid, seq, ts, role, harness, blocks


def blocks_json(blocks: tuple[Block, ...]) -> str:
    return json.dumps([[b.block_type, b.text, b.tool_name] for b in blocks], ensure_ascii=False)


def blocks(value: str) -> tuple[Block, ...]:
    return tuple(Block(kind, text, tool) for kind, text, tool in json.loads(value))


def turn_text(blocks_value: str) -> str:
    """A turn's text, its blocks' joined by spaces."""
    return " ".join(block.text for block in blocks(blocks_value))


def first_words(blocks_value: str, limit: int = 80) -> str:
    text = " ".join(
        " ".join(b.text.split()) for b in blocks(blocks_value) if b.block_type == "text"
    )
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def conversation_ref(salt: str, session_id: str) -> str:
    """A conversation's short public name: unguessable without the memory's salt."""
    return hashlib.sha256(f"{salt}:{session_id}".encode()).hexdigest()[:12]


def kept(parse: Callable[[tuple], Turn]) -> Callable[[tuple], Turn]:
    """`parse`, which makes a turn of its row, keeping the last KEPT_TURNS short turns it made."""
    keep = functools.lru_cache(KEPT_TURNS)(parse)

    def turn(row: tuple) -> Turn:
        return keep(row) if len(row[BLOCKS]) <= KEPT_TURN_CHARS else parse(row)

    return turn
