"""The chat gateway's body for `POST /turns`: one whole conversation so far, as JSON.

    {"user": str, "conversation_id": "[A-Za-z0-9_-]{1,128}",
     "turns": [{"id"?: str, "ts": str, "role": str, "text": str}, ...]}

A body is accepted or refused as a whole: the first problem raises `FormatError(where, reason)`
with `where` the path of the bad field (`user`, `turns[3].ts`, ...), and nothing is returned.
Turn `seq` is the turn's position; `turn_uuid` is its `id`, or `<conversation_id>-<seq>`.

Names (`user`, `role`, `id`) hold no control characters; texts hold no NUL (other control
characters, such as a terminal's colour codes in a tool's output, are kept verbatim). A `ts` lies
between 1970 and 2100: anything else is a broken clock or a forged record, not a conversation.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from ireneo.errors import FormatError
from ireneo.model import Block, Turn, parse_ts
from ireneo.users import MAX_USER_CHARS as MAX_USER_CHARS
from ireneo.users import user_problem

HARNESS = "gateway"
CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
BODY_FIELDS = ("user", "conversation_id", "turns")
TURN_FIELDS = ("id", "ts", "role", "text")
MAX_ID_CHARS = 256
MAX_ROLE_CHARS = 64
EARLIEST_TS = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TS = datetime(2100, 1, 1, tzinfo=UTC)
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def parse_gateway_body(body: Any) -> tuple[str, str, list[Turn]]:
    """`(user, conversation_id, turns)` of a decoded request body, or FormatError."""
    if not isinstance(body, dict):
        raise FormatError("body", "must be a JSON object with user, conversation_id and turns")
    _no_unknown_fields(body, BODY_FIELDS, "body")
    user = body.get("user")
    if user is None:
        raise FormatError("user", "is required")
    problem = user_problem(user)  # the one rule for user ids (ireneo.users)
    if problem is not None:
        raise FormatError("user", problem)
    cid = body.get("conversation_id")
    if cid is None:
        raise FormatError("conversation_id", "is required")
    if not isinstance(cid, str) or not CONVERSATION_ID.fullmatch(cid):
        raise FormatError(
            "conversation_id", "must be 1 to 128 characters of A-Z, a-z, 0-9, '_' or '-'"
        )
    raw_turns = body.get("turns")
    if raw_turns is None:
        raise FormatError("turns", "is required")
    if not isinstance(raw_turns, list):
        raise FormatError("turns", "must be a list of turns")
    if not raw_turns:
        raise FormatError("turns", "must hold at least one turn")

    turns: list[Turn] = []
    seen: dict[str, int] = {}
    for seq, raw in enumerate(raw_turns):
        turn = _turn(cid, seq, raw)
        if turn.turn_uuid in seen:
            raise FormatError(
                f"turns[{seq}].id",
                f"id {turn.turn_uuid!r} is already used by turns[{seen[turn.turn_uuid]}]",
            )
        seen[turn.turn_uuid] = seq
        turns.append(turn)
    return user, cid, turns


def _turn(cid: str, seq: int, raw: Any) -> Turn:
    where = f"turns[{seq}]"
    if not isinstance(raw, dict):
        raise FormatError(where, "must be an object with ts, role and text")
    _no_unknown_fields(raw, TURN_FIELDS, where)

    turn_id = raw.get("id")
    if turn_id is None or turn_id == "":
        turn_id = f"{cid}-{seq}"
    elif not isinstance(turn_id, str) or not turn_id.strip():
        raise FormatError(f"{where}.id", "must be a non-empty string when given")
    elif len(turn_id) > MAX_ID_CHARS:
        raise FormatError(f"{where}.id", f"is longer than {MAX_ID_CHARS} characters")
    else:
        _no_control(turn_id, f"{where}.id")

    ts_value = raw.get("ts")
    if ts_value is None:
        raise FormatError(f"{where}.ts", "is required")
    if not isinstance(ts_value, str):
        raise FormatError(f"{where}.ts", "must be an RFC 3339 string, e.g. 2026-10-08T09:14:00Z")
    try:
        ts = parse_ts(ts_value)
    except (ValueError, OverflowError) as exc:  # OverflowError: year 1 or 9999 moved to UTC
        raise FormatError(
            f"{where}.ts", "is not an RFC 3339 timestamp with a zone, e.g. 2026-10-08T09:14:00Z"
        ) from exc
    if not EARLIEST_TS <= ts < LATEST_TS:
        raise FormatError(f"{where}.ts", "must lie between 1970 and 2100")

    role = _required_string(raw, "role", f"{where}.role", MAX_ROLE_CHARS)

    text = raw.get("text")
    if text is None:
        raise FormatError(f"{where}.text", "is required")
    if not isinstance(text, str):
        raise FormatError(f"{where}.text", "must be a string")
    if not text.strip():
        raise FormatError(f"{where}.text", "is empty")
    if "\x00" in text:
        raise FormatError(f"{where}.text", "holds a NUL character (\\u0000)")

    return Turn(
        session_id=cid,
        turn_uuid=turn_id,
        seq=seq,
        ts=ts,
        role=role,
        harness=HARNESS,
        blocks=(Block("text", text),),
    )


def _required_string(obj: dict, name: str, where: str, max_chars: int) -> str:
    value = obj.get(name)
    if value is None:
        raise FormatError(where, "is required")
    if not isinstance(value, str):
        raise FormatError(where, "must be a string")
    if not value.strip():
        raise FormatError(where, "is blank")
    if len(value) > max_chars:
        raise FormatError(where, f"is longer than {max_chars} characters")
    _no_control(value, where)
    return value


def _no_control(value: str, where: str) -> None:
    found = CONTROL.search(value)
    if found:
        raise FormatError(where, f"holds a control character (U+{ord(found.group()):04X})")


def _no_unknown_fields(obj: dict, known: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(key) for key in obj if key not in known)
    if unknown:
        raise FormatError(
            f"{where}.{unknown[0]}" if where != "body" else unknown[0],
            f"unknown field (expected only {', '.join(known)})",
        )
