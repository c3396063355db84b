"""A request body as JSON, decoded strictly: what Python's `json` lets through and a store or
another parser would read differently is refused here, with `FormatError(where, reason)`.

Refused: bytes that are not UTF-8, duplicate keys in an object (which one wins differs between
parsers), NaN and Infinity (not JSON), integers too long to convert, nesting deeper than
`MAX_DEPTH`, and strings holding an unpaired UTF-16 surrogate (`"\\ud800"`: valid JSON, but no
Unicode text, so it cannot be stored as UTF-8). `where` names the bad field as the gateway does
(`turns[3].text`), or `body`.
"""

from __future__ import annotations

import json
from typing import Any

from ireneo.errors import FormatError

MAX_DEPTH = 32


def decode_json_body(raw: bytes) -> Any:
    """The decoded body, or FormatError naming what is wrong with it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError("body", "not valid JSON: the bytes are not UTF-8") from None
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except _DuplicateKey as exc:
        raise FormatError("body", f"not valid JSON: the key {exc.key!r} appears twice") from None
    except RecursionError:
        raise FormatError("body", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, integers past the digit limit
        reason = str(exc).split(":")[0] if not isinstance(exc, json.JSONDecodeError) else exc.msg
        raise FormatError("body", f"not valid JSON ({reason})") from None
    _check_tree(value)
    return value


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _check_tree(value: Any) -> None:
    """Depth and Unicode of every string, walked without recursion."""
    stack: list[tuple[Any, str, int]] = [(value, "body", 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise FormatError("body", f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, dict):
            for key, child in item.items():
                name = key if where == "body" else f"{where}.{key}"
                _check_text(key, f"{where} key")
                stack.append((child, name, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError(
            where, "holds an unpaired UTF-16 surrogate (\\ud800-\\udfff): not valid Unicode"
        ) from None
