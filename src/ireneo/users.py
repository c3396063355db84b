"""What a user id may be: the one rule every door applies before a user id becomes a memory key.

A user id names whose memory is read or written: the `sub` of a bearer token (`/mcp`,
`/inspect`), the gateway's `user` (`POST /turns`), `/chat`'s `customer_id`, the operator's user
on `/inspect`. It is any text of 1 to `MAX_USER_CHARS` characters that is not blank, holds no
control character (C0, DEL, C1: no line breaks, no NUL) and is valid Unicode (no unpaired UTF-16
surrogate, which cannot be encoded as UTF-8 and so cannot be hashed into a key). Anything else is
refused at the door (401 for a token, 400 for a body field), never inside a tool.
"""

from __future__ import annotations

import re

MAX_USER_CHARS = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def user_problem(value: object) -> str | None:
    """Why `value` cannot be a user id, in words that follow the field's name; None if it can."""
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > MAX_USER_CHARS:
        return f"is longer than {MAX_USER_CHARS} characters"
    if not value.strip():
        return "is blank"
    found = _CONTROL.search(value)
    if found:
        return f"holds a control character (U+{ord(found.group()):04X})"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "holds an unpaired UTF-16 surrogate (\\ud800-\\udfff): not valid Unicode"
    return None


def is_user(value: object) -> bool:
    return user_problem(value) is None
