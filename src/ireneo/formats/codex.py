"""Codex CLI rollout files: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`.

Two shapes, both one JSON object per line (docs/import.md lists the versions):

- the envelope (Codex CLI 0.3x and later): `{"timestamp", "type", "payload"}` per line; the first
  is `session_meta` (`payload.id`, `payload.cwd`, …); conversation lines are `response_item`s
  whose `payload.type` is `message`, `reasoning`, `function_call`, `function_call_output`,
  `custom_tool_call`, `custom_tool_call_output`, `local_shell_call` or `web_search_call`.
  `event_msg`, `turn_context` and `compacted` lines repeat or describe what the
  `response_item`s hold, and are skipped.
- the early shape (spring 2025): a first line `{"id", "timestamp", "instructions"}`, then bare
  response items and `{"record_type": "state"}` lines. Items carry no time of their own: each
  turn gets the session's start time.

One file is one conversation, named by the session's id. Messages keep their role; reasoning
summaries become `thinking` blocks of the assistant; tool calls are the assistant's `tool_use`
blocks and their outputs `tool_result` turns of role `tool`, named after the call. `developer`
and `system` messages, and the context Codex injects as user messages (`<environment_context>`,
`<user_instructions>`, AGENTS.md), are not what anybody said, and are skipped.

Codex only ever appends to a rollout, so a turn's id is its line number: importing a grown or
unchanged file again changes nothing that was already stored. A file is accepted or refused as
a whole: the first damaged line raises `FormatError("file:line", reason)`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from ireneo.errors import FormatError
from ireneo.formats import jsonl
from ireneo.model import Block, Turn, parse_ts

HARNESS = "codex"
SUFFIX = ".jsonl"
ITEM_TYPES = (
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "web_search_call",
)
# User messages that Codex writes itself before the user's first word.
INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")


def default_dir() -> Path:
    """Where Codex keeps rollouts: `$CODEX_HOME/sessions`, else `~/.codex/sessions`."""
    home = os.environ.get("CODEX_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".codex") / "sessions"


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    return jsonl.find_files(paths, SUFFIX)


def read_file(path: Path) -> list[Turn]:
    """Every turn of one rollout, in file order, or FormatError naming `file:line`."""
    records = jsonl.read_json_lines(path)
    if not records:
        return []
    first_line, first = records[0]
    if first.get("type") == "session_meta" or "payload" in first:
        session_id, items = _envelope(path, records)
    elif isinstance(first.get("id"), str) and "timestamp" in first and "type" not in first:
        session_id, items = _early(path, first_line, first, records[1:])
    else:
        raise FormatError(
            f"{path}:{first_line}",
            "not a Codex rollout: the first line is neither a session_meta record nor a "
            "session header",
        )
    turns: list[Turn] = []
    tool_names: dict[str, str] = {}
    for number, ts, item in items:
        where = f"{path}:{number}"
        spoken = _turn(item, where, tool_names)
        if spoken is None:
            continue
        role, blocks = spoken
        turns.append(
            Turn(
                session_id=session_id,
                turn_uuid=f"line-{number}",
                seq=len(turns),
                ts=ts,
                role=role,
                harness=HARNESS,
                blocks=tuple(blocks),
            )
        )
    return turns


# -- the two shapes: (session id, [(line, time, response item)]) ------------------------------
Items = list[tuple[int, datetime, dict[str, Any]]]


def _envelope(path: Path, records: list[tuple[int, dict[str, Any]]]) -> tuple[str, Items]:
    session_id: str | None = None
    items: Items = []
    for number, record in records:
        where = f"{path}:{number}"
        kind = record.get("type")
        if not isinstance(kind, str):
            raise FormatError(where, "not a Codex rollout line (expected timestamp, type, payload)")
        payload = record.get("payload")
        if kind == "session_meta" and session_id is None:
            if not isinstance(payload, dict):
                raise FormatError(where, "session_meta.payload must be an object")
            session_id = _session_id(payload.get("id"), where)
        elif kind == "response_item":
            if session_id is None:
                raise FormatError(where, "a response_item before the session_meta line")
            if not isinstance(payload, dict):
                raise FormatError(where, "response_item.payload must be an object")
            items.append((number, _timestamp(record.get("timestamp"), where), payload))
    if session_id is None:
        raise FormatError(str(path), "no session_meta line: not a Codex rollout")
    return session_id, items


def _early(
    path: Path, first_line: int, header: dict[str, Any], rest: list[tuple[int, dict[str, Any]]]
) -> tuple[str, Items]:
    where = f"{path}:{first_line}"
    session_id = _session_id(header.get("id"), where)
    started = _timestamp(header.get("timestamp"), where)
    items: Items = []
    for number, record in rest:
        if "record_type" in record:
            continue  # {"record_type": "state", …}
        if not isinstance(record.get("type"), str):
            raise FormatError(f"{path}:{number}", "not a Codex response item (no type)")
        items.append((number, started, record))
    return session_id, items


def _session_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise FormatError(where, "the session needs an id")
    if ":" in value:
        raise FormatError(where, "the session id may not contain ':'")
    return value


def _timestamp(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise FormatError(where, "the line needs a timestamp")
    try:
        return parse_ts(value)
    except ValueError as exc:
        raise FormatError(where, f"bad timestamp {value!r}: expected RFC 3339") from exc


# -- one response item: (role, blocks), or None when it says nothing --------------------------
def _turn(
    item: dict[str, Any], where: str, tool_names: dict[str, str]
) -> tuple[str, list[Block]] | None:
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        if not isinstance(role, str):
            raise FormatError(where, "a message needs a role")
        if role not in ("user", "assistant"):
            return None  # developer and system instructions
        texts = _message_texts(item.get("content"), where)
        if role == "user" and texts and texts[0].lstrip().startswith(INJECTED):
            return None
        blocks = [Block("text", text) for text in texts if text.strip()]
        return (role, blocks) if blocks else None
    if kind == "reasoning":
        parts = [
            part["text"]
            for key in ("summary", "content")
            for part in (item.get(key) or [])
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]  # encrypted_content is opaque and stays out
        text = "\n".join(parts)
        return ("assistant", [Block("thinking", text)]) if text.strip() else None
    if kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
        name, text = _call(item, kind)
        if isinstance(item.get("call_id"), str):
            tool_names[item["call_id"]] = name
        return "assistant", [Block("tool_use", text, name)]
    if kind in ("function_call_output", "custom_tool_call_output"):
        text = _output_text(item.get("output"))
        name = tool_names.get(item.get("call_id"))  # type: ignore[arg-type]
        return ("tool", [Block("tool_result", text, name)]) if text.strip() else None
    return None  # ghost_snapshot, compaction, image generation, …


def _message_texts(content: Any, where: str) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        raise FormatError(where, "message.content must be a list of parts")
    return [
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") in ("input_text", "output_text", "text")
        and isinstance(part.get("text"), str)
    ]


def _call(item: dict[str, Any], kind: str) -> tuple[str, str]:
    """A tool call's name and its input as text (verbatim when Codex wrote it as a string)."""
    if kind == "local_shell_call":
        return "local_shell", _json(item.get("action", {}))
    if kind == "web_search_call":
        return "web_search", _json(item.get("action", {}))
    name = item.get("name") if isinstance(item.get("name"), str) else kind
    value = item.get("arguments", item.get("input", ""))
    return name, value if isinstance(value, str) else _json(value)


def _output_text(output: Any) -> str:
    """A tool output as text: the command's output out of Codex's `{"output", "metadata"}`
    wrapper, a plain string as is, the text of `{"content": …}` or of a list of parts."""
    if output is None:
        return ""
    if isinstance(output, str):
        if output.startswith('{"output"'):
            try:
                wrapped = json.loads(output)
            except json.JSONDecodeError:
                return output
            if isinstance(wrapped, dict) and isinstance(wrapped.get("output"), str):
                return wrapped["output"]
        return output
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"]
    if isinstance(output, list):
        texts = [
            p["text"] for p in output if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        if texts:
            return "\n".join(texts)
    return _json(output)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
