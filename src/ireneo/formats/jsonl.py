"""What every line-per-record format shares: finding its files, and reading them strictly."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ireneo.errors import FormatError


def find_files(paths: Iterable[str | Path], suffix: str) -> list[Path]:
    """Files named, or found below named directories by `suffix`, resolved, in a stable order."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*" + suffix) if p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or directory")
    return list(dict.fromkeys(p.resolve() for p in found))


def read_utf8(path: Path) -> str:
    """A file's text, or FormatError naming the file (and the line of a bad byte)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FormatError(str(path), f"cannot read: {exc.strerror}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FormatError(f"{path}:{line}", "not valid UTF-8") from exc


def read_json_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """`(line number, object)` for every non-blank line, or FormatError naming `file:line`."""
    records = []
    for number, line in enumerate(read_utf8(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(
                f"{path}:{number}", f"not JSON ({exc.msg} at column {exc.colno})"
            ) from exc
        if not isinstance(obj, dict):
            raise FormatError(f"{path}:{number}", "a line must be a JSON object")
        records.append((number, obj))
    return records
