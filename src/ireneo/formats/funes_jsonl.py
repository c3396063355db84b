"""The `.funes.jsonl` format: one turn per line, as the funes project writes it.

A file is accepted or refused as a whole: the first bad line raises `FormatError("file:line",
reason)` and nothing of the file is returned.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ireneo.errors import FormatError
from ireneo.formats import jsonl
from ireneo.model import BLOCK_TYPES, Block, Turn, format_ts, parse_ts

SUFFIX = ".funes.jsonl"
REQUIRED = ("session_id", "turn_uuid", "seq", "ts", "role", "harness", "blocks")
_HARNESS = re.compile(r"[a-z0-9_-]+")


def read_file(path: Path) -> list[Turn]:
    """Every turn of one file, or FormatError naming `file:line`."""
    turns: list[Turn] = []
    seen: set[tuple[str, str]] = set()
    for number, record in jsonl.read_json_lines(path):
        where = f"{path}:{number}"
        turn = parse_record(record, where)
        key = (turn.session_id, turn.turn_uuid)
        if key in seen:
            raise FormatError(
                where, f"turn_uuid {turn.turn_uuid!r} appears twice in {turn.session_id!r}"
            )
        seen.add(key)
        turns.append(turn)
    return turns


def parse_record(obj: dict, where: str) -> Turn:
    missing = [name for name in REQUIRED if name not in obj]
    if missing:
        raise FormatError(where, f"missing field {missing[0]!r}")
    session_id = _string(obj, "session_id", where)
    if ":" in session_id:
        raise FormatError(where, "session_id may not contain ':'")
    seq = obj["seq"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise FormatError(where, f"seq must be a whole number ≥ 0, not {seq!r}")
    try:
        ts = parse_ts(_string(obj, "ts", where))
    except ValueError as exc:
        raise FormatError(
            where, f"bad ts {obj['ts']!r}: use RFC 3339, e.g. 2026-10-08T09:14:00Z"
        ) from exc
    harness = _string(obj, "harness", where)
    if not _HARNESS.fullmatch(harness):
        raise FormatError(where, f"harness {harness!r} must match [a-z0-9_-]+")
    return Turn(
        session_id=session_id,
        turn_uuid=_string(obj, "turn_uuid", where),
        seq=seq,
        ts=ts,
        role=_string(obj, "role", where),
        harness=harness,
        blocks=_blocks(obj["blocks"], where),
    )


def _string(obj: dict, name: str, where: str) -> str:
    value = obj[name]
    if not isinstance(value, str) or not value.strip():
        raise FormatError(where, f"{name} must be a non-empty string")
    return value


def _blocks(value: object, where: str) -> tuple[Block, ...]:
    if not isinstance(value, list):
        raise FormatError(where, "blocks must be a list")
    blocks = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise FormatError(where, f"blocks[{i}] must be an object")
        kind = item.get("block_type")
        if kind not in BLOCK_TYPES:
            raise FormatError(
                where, f"blocks[{i}].block_type {kind!r} is not one of {', '.join(BLOCK_TYPES)}"
            )
        text = item.get("text")
        if not isinstance(text, str):
            raise FormatError(where, f"blocks[{i}].text must be a string")
        tool_name = item.get("tool_name")
        if tool_name is not None and not isinstance(tool_name, str):
            raise FormatError(where, f"blocks[{i}].tool_name must be a string")
        blocks.append(Block(kind, text, tool_name))
    return tuple(blocks)


def to_record(turn: Turn) -> dict:
    """One turn as a `.funes.jsonl` object (`tool_name` only where there is one)."""
    blocks = []
    for block in turn.blocks:
        item = {"block_type": block.block_type, "text": block.text}
        if block.tool_name:
            item["tool_name"] = block.tool_name
        blocks.append(item)
    return {
        "session_id": turn.session_id,
        "turn_uuid": turn.turn_uuid,
        "seq": turn.seq,
        "ts": format_ts(turn.ts),
        "role": turn.role,
        "harness": turn.harness,
        "blocks": blocks,
    }


def to_line(turn: Turn) -> str:
    """One turn as a `.funes.jsonl` line (what ireneo writes, and what it reads back)."""
    return json.dumps(to_record(turn), ensure_ascii=False)
