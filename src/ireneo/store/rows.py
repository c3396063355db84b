"""How values are written into rows and read back, the same in every store."""

from __future__ import annotations

import hashlib
import json

from ireneo.model import Block


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
