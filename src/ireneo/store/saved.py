"""A store's in-memory copies as bytes, so that a fresh process reads them instead of building
them from every row.

At 10,000 conversations a fresh `ireneo recall` spent ~0.7 s building its copies from 60,000
rows (the layout's 1.5 million words turned into codes, 92 MB of float vectors quantized)
before its first search; reading them saved costs a few hundredths of that. The format is
numpy's own container (`.npz`, no pickle): arrays as they are, lists of strings as JSON.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np

_STRINGS = ".strings"  # the suffix of a part that is a list of strings


def pack(parts: dict[str, np.ndarray | list[str]]) -> memoryview:
    """Arrays and lists of strings as one blob (a view of the bytes written: not copied again,
    at 10,000 conversations a copy is 16 MB for the layout and 24 MB for the vectors)."""
    arrays = {}
    for name, part in parts.items():
        if isinstance(part, list):
            text = json.dumps(part, ensure_ascii=False).encode()
            arrays[name + _STRINGS] = np.frombuffer(text, dtype=np.uint8)
        else:
            arrays[name] = part
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getbuffer()


def unpack(data: bytes | memoryview) -> dict[str, np.ndarray | list[str]]:
    """What `pack` was given. ValueError for bytes it did not write."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as saved:
            parts: dict[str, np.ndarray | list[str]] = {}
            for name in saved.files:
                if name.endswith(_STRINGS):
                    parts[name.removesuffix(_STRINGS)] = json.loads(saved[name].tobytes())
                else:
                    parts[name] = saved[name]
            return parts
    except (OSError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise ValueError(f"not a saved copy: {exc}") from exc
