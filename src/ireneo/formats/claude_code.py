"""Claude Code session transcripts: `~/.claude/projects/<project>/<session-uuid>.jsonl`.

One JSON record per line. Records of `type` `user` and `assistant` carry the conversation:
`uuid`, `parentUuid`, `sessionId`, `timestamp`, `cwd`, and `message.content`, either a string or
a list of blocks (`text`, `thinking`, `tool_use` with `name` and `input`, `tool_result` with
`tool_use_id` and `content`). Every other record type (`summary`, `system`,
`file-history-snapshot`, `queue-operation`, …) carries no turn and is skipped. The shapes covered
are described in docs/import.md.

One file is one conversation: its `session_id` is the file name without `.jsonl` (the session's
uuid); a subagent's file (`agent-<id>.jsonl`) becomes `<sessionId>-agent-<id>`. Each record with
something to say is one turn, in file order, keyed by its own `uuid`, so importing a grown or
unchanged file again changes nothing that was already stored.

A file is accepted or refused as a whole: the first damaged line raises
`FormatError("file:line", reason)` and nothing of the file is returned.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ireneo.errors import FormatError
from ireneo.formats import jsonl
from ireneo.model import Block, Turn, parse_ts

HARNESS = "claude_code"
SUFFIX = ".jsonl"


def default_dir() -> Path:
    """Where Claude Code keeps transcripts: `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`."""
    config = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(config).expanduser() if config else Path.home() / ".claude") / "projects"


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    """`.jsonl` files named, or found below named directories, in a stable order."""
    return jsonl.find_files(paths, SUFFIX)


def read_file(path: Path) -> list[Turn]:
    """Every turn of one transcript, in file order, or FormatError naming `file:line`."""
    records = jsonl.read_json_lines(path)
    session_id = _session_id(path, records)
    turns: list[Turn] = []
    seen: set[str] = set()
    tool_names: dict[str, str] = {}
    for number, record in records:
        where = f"{path}:{number}"
        kind = record.get("type")
        if not isinstance(kind, str):
            raise FormatError(where, "no record type: not a Claude Code transcript line")
        if kind not in ("user", "assistant"):
            continue  # summary, system, file-history-snapshot, queue-operation, …
        if record.get("isMeta") or record.get("isCompactSummary"):
            continue  # injected by Claude Code (caveats, compaction summaries), not said
        uuid = record.get("uuid")
        if not isinstance(uuid, str) or not uuid.strip():
            raise FormatError(where, f"a {kind} record needs a uuid")
        if uuid in seen:
            continue  # a record written again (resume, rewind): the first copy stands
        message = record.get("message")
        if not isinstance(message, dict) or "content" not in message:
            raise FormatError(where, f"a {kind} record needs a message with content")
        blocks = _blocks(message["content"], where, tool_names)
        if not blocks:
            continue
        seen.add(uuid)
        turns.append(
            Turn(
                session_id=session_id,
                turn_uuid=uuid,
                seq=len(turns),
                ts=_timestamp(record, where),
                role=_role(message, kind, blocks),
                harness=HARNESS,
                blocks=tuple(blocks),
            )
        )
    return turns


def _session_id(path: Path, records: list[tuple[int, dict[str, Any]]]) -> str:
    stem = path.name.removesuffix(SUFFIX)
    if stem.startswith("agent-"):  # a subagent's transcript: name it after its session
        parent = next(
            (r["sessionId"] for _, r in records if isinstance(r.get("sessionId"), str)), None
        )
        if parent and parent != stem:
            stem = f"{parent}-{stem}"
    if ":" in stem:
        raise FormatError(str(path), "the file name (the session id) may not contain ':'")
    return stem


def _timestamp(record: dict[str, Any], where: str):
    value = record.get("timestamp")
    if not isinstance(value, str):
        raise FormatError(where, "a message record needs a timestamp")
    try:
        return parse_ts(value)
    except ValueError as exc:
        raise FormatError(where, f"bad timestamp {value!r}: expected RFC 3339") from exc


def _role(message: dict[str, Any], kind: str, blocks: list[Block]) -> str:
    """The message's role; a user record that only returns tool results speaks for the tool."""
    if all(block.block_type == "tool_result" for block in blocks):
        return "tool"
    role = message.get("role")
    return role if isinstance(role, str) and role.strip() else kind


def _blocks(content: Any, where: str, tool_names: dict[str, str]) -> list[Block]:
    if isinstance(content, str):
        return [Block("text", content)] if content.strip() else []
    if not isinstance(content, list):
        raise FormatError(where, "message.content must be a string or a list of blocks")
    blocks: list[Block] = []
    for i, item in enumerate(content):
        if isinstance(item, str):  # seen in a few early transcripts
            if item.strip():
                blocks.append(Block("text", item))
            continue
        if not isinstance(item, dict):
            raise FormatError(where, f"message.content[{i}] must be an object")
        kind = item.get("type")
        if kind == "text":
            text = _string(item, "text", where, i)
            if text.strip():
                blocks.append(Block("text", text))
        elif kind == "thinking":
            text = _string(item, "thinking", where, i)
            if text.strip():
                blocks.append(Block("thinking", text))
        elif kind in ("tool_use", "server_tool_use"):
            name = item.get("name") if isinstance(item.get("name"), str) else None
            if name and isinstance(item.get("id"), str):
                tool_names[item["id"]] = name
            text = json.dumps(item.get("input", {}), ensure_ascii=False, separators=(",", ":"))
            blocks.append(Block("tool_use", text, name))
        elif kind == "tool_result":
            text = _flatten(item.get("content"))
            if text.strip():
                blocks.append(Block("tool_result", text, tool_names.get(item.get("tool_use_id"))))
        # image, document, redacted_thinking, web search results …: nothing to recall as text
    return blocks


def _string(item: dict[str, Any], key: str, where: str, i: int) -> str:
    value = item.get(key, "")
    if not isinstance(value, str):
        raise FormatError(where, f"message.content[{i}].{key} must be a string")
    return value


def _flatten(content: Any) -> str:
    """A tool result's content as text: a string as is, the text parts of a list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""
