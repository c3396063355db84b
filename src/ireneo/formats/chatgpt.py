"""ChatGPT's data export: `conversations.json` (Settings → Data controls → Export data).

The file is a list of conversations (or `{"conversations": [...]}`). Each conversation has an
`id` (or `conversation_id`), a `create_time`, a `current_node` and a `mapping` of nodes
`{id, parent, children, message}`; a message has `id`, `author.role` (`user`, `assistant`,
`tool`, `system`), `author.name` (a tool's name), `create_time` (Unix seconds, may be null),
`recipient` (`all`, or the tool an assistant message calls) and `content` with a
`content_type` and its `parts` (or `text`, or `thoughts`). docs/import.md lists the shapes.

A conversation's turns are the branch the user last saw: from `current_node` back to the root,
then in order. Edited or regenerated branches are left out. System messages, messages hidden from
the conversation and the user's custom instructions are skipped; images leave their text parts.
Each turn is keyed by its message id, so importing the same export (or a later one) again
changes nothing that was already stored.

The export may be given as the `.json` file, the export's `.zip`, or the directory that holds
`conversations.json`. It is accepted or refused as a whole: the first damaged conversation raises
`FormatError("file:conversations[i]", reason)` and nothing of the file is returned.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ireneo.errors import FormatError
from ireneo.model import Block, Turn

HARNESS = "chatgpt"
FILE_NAME = "conversations.json"
# Content kinds that are ChatGPT's own state, not something said.
SKIPPED_CONTENT = ("user_editable_context", "model_editable_context", "reasoning_recap")


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    """The export files named: a `.json` or `.zip` file, or a directory holding the export."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            inside = path / FILE_NAME
            if not inside.is_file():
                raise FileNotFoundError(f"{path}: no {FILE_NAME} in this directory")
            found.append(inside)
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return list(dict.fromkeys(p.resolve() for p in found))


def read_file(path: Path) -> list[list[Turn]]:
    """The turns of every conversation in the export (one list each), or FormatError."""
    data = _load(path)
    if isinstance(data, dict) and isinstance(data.get("conversations"), list):
        data = data["conversations"]
    if not isinstance(data, list):
        raise FormatError(str(path), "not a ChatGPT export: expected a list of conversations")
    conversations = []
    seen: dict[str, int] = {}
    for i, conversation in enumerate(data):
        where = f"{path}:conversations[{i}]"
        turns = _conversation(conversation, where)
        if turns:
            sid = turns[0].session_id
            if sid in seen:
                raise FormatError(
                    where, f"conversation id {sid!r} is also conversations[{seen[sid]}]"
                )
            seen[sid] = i
        conversations.append(turns)
    return conversations


def _load(path: Path) -> Any:
    name = str(path)
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                members = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == FILE_NAME]
                if not members:
                    raise FormatError(name, f"no {FILE_NAME} in this archive")
                member = min(members, key=len)  # the top-level one
                name = f"{path}!{member}"
                raw = archive.read(member)
        else:
            raw = path.read_bytes()
    except (OSError, zipfile.BadZipFile) as exc:
        raise FormatError(name, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from exc
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FormatError(name, "not valid UTF-8") from exc
    except json.JSONDecodeError as exc:
        raise FormatError(
            name, f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc


def _conversation(conversation: Any, where: str) -> list[Turn]:
    if not isinstance(conversation, dict):
        raise FormatError(where, "a conversation must be an object")
    session_id = conversation.get("conversation_id") or conversation.get("id")
    if not isinstance(session_id, str) or not session_id.strip():
        raise FormatError(where, "a conversation needs an id")
    if ":" in session_id:
        raise FormatError(where, "the conversation id may not contain ':'")
    where = f"{where} (id {session_id})"
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        raise FormatError(where, "mapping must be an object of message nodes")
    current = conversation.get("current_node")
    if current is None and not mapping:
        return []  # a chat opened and never used
    if current not in mapping:
        raise FormatError(where, f"current_node {current!r} is not in the mapping")

    branch = []  # from current_node up to the root
    node_id: Any = current
    while node_id is not None:
        if node_id not in mapping:
            raise FormatError(where, f"node {node_id!r} has no entry in the mapping")
        if len(branch) > len(mapping):
            raise FormatError(where, "the parent links of the mapping form a loop")
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise FormatError(where, f"mapping[{node_id!r}] must be an object")
        branch.append((node_id, node.get("message")))
        node_id = node.get("parent")

    turns: list[Turn] = []
    last_ts = _time(conversation.get("create_time"), where, "create_time")
    for node_id, message in reversed(branch):
        if message is None:
            continue  # the root, and placeholders
        spoken = _message(message, f"{where} message {node_id}")
        ts = _time(message.get("create_time"), where, f"message {node_id} create_time")
        last_ts = ts or last_ts  # a message without a time takes the one before it
        if spoken is None:
            continue
        if last_ts is None:
            raise FormatError(
                where, f"message {node_id} has no create_time, nor has its conversation"
            )
        role, blocks = spoken
        message_id = message.get("id") if isinstance(message.get("id"), str) else node_id
        turns.append(
            Turn(
                session_id=session_id,
                turn_uuid=message_id,
                seq=len(turns),
                ts=last_ts,
                role=role,
                harness=HARNESS,
                blocks=tuple(blocks),
            )
        )
    return turns


def _message(message: Any, where: str) -> tuple[str, list[Block]] | None:
    """A message's role and blocks; None for what nobody said, or what has no text."""
    if not isinstance(message, dict):
        raise FormatError(where, "must be an object")
    author = message.get("author")
    if not isinstance(author, dict) or not isinstance(author.get("role"), str):
        raise FormatError(where, "needs author.role")
    content = message.get("content")
    if not isinstance(content, dict):
        raise FormatError(where, "content must be an object")
    role = author["role"]
    metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
    kind = content.get("content_type")
    if (
        role == "system"
        or metadata.get("is_visually_hidden_from_conversation")
        or kind in SKIPPED_CONTENT
    ):
        return None
    if kind == "thoughts":
        text = "\n\n".join(
            "\n".join(t[key] for key in ("summary", "content") if isinstance(t.get(key), str))
            for t in content.get("thoughts") or []
            if isinstance(t, dict)
        )
        return ("assistant", [Block("thinking", text)]) if text.strip() else None
    text = _text(content)
    if not text.strip():
        return None
    if role == "tool":
        name = author.get("name") if isinstance(author.get("name"), str) else None
        return "tool", [Block("tool_result", text, name)]
    recipient = message.get("recipient")
    if role == "assistant" and isinstance(recipient, str) and recipient not in ("all", ""):
        return "assistant", [Block("tool_use", text, recipient)]
    return role, [Block("text", text)]


def _text(content: dict[str, Any]) -> str:
    """The readable text of a content object: its string parts, else `text`, else `result`."""
    parts = content.get("parts")
    if isinstance(parts, list):
        texts = []
        for part in parts:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])  # image and audio pointers have none
        return "\n".join(t for t in texts if t.strip())
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return content[key]
    return ""


def _time(value: Any, where: str, name: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatError(where, f"{name} must be Unix seconds, not {value!r}")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise FormatError(where, f"{name} {value!r} is not a time") from exc
