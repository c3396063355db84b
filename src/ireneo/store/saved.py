"""A store's in-memory copies as bytes, so that a fresh process reads them instead of building
them from every row.

At 10,000 conversations a fresh `ireneo recall` spent ~0.7 s building its copies from 60,000
rows (the layout's 1.5 million words turned into codes, 92 MB of float vectors quantized)
before its first search; reading them saved costs a few hundredths of that. The format is
numpy's own container (`.npz`, no pickle): arrays as they are, lists of strings as JSON.
"""

from __future__ import annotations

import functools
import io
import json
import math
import re
import struct
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
    """What `pack` was given. ValueError for bytes it did not write.

    Each array is copied out of `data` once, so `data` can be freed. np.load reads an entry in
    chunks and checks its CRC: at 10,000 conversations that took ~15 ms of the ~35 ms it took to
    read the vectors. Views of `data` would save the copy, but keep the whole blob alive."""
    view = memoryview(data)
    parts: dict[str, np.ndarray | list[str]] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for entry in archive.infolist():
                array = _stored_array(view, entry)
                name = entry.filename.removesuffix(".npy")
                if name.endswith(_STRINGS):
                    parts[name.removesuffix(_STRINGS)] = _strings(array.tobytes(), name)
                else:
                    parts[name] = array
    except (OSError, EOFError, zipfile.BadZipFile, UnicodeDecodeError, struct.error) as exc:
        raise ValueError(f"not a saved copy: {exc}") from exc
    return parts


def _strings(text: bytes, name: str) -> list[str]:
    """A list of strings as `pack` wrote it. JSON nested deeper than Python's recursion limit
    (no list `pack` writes) raises RecursionError, and anything but a list is not `pack`'s."""
    try:
        strings = json.loads(text)
    except RecursionError as exc:
        raise ValueError(f"{name} is nested too deep") from exc
    if not isinstance(strings, list):
        raise ValueError(f"{name} is not a list")
    return strings


_LOCAL_HEADER = struct.Struct("<4s22xHH")  # a zip entry's signature, its name's and extra's sizes
_HEADER_MOST = 2**16 + 12  # the longest .npy header of version 1.0, which pack writes


def _stored_array(view: memoryview, entry: zipfile.ZipInfo) -> np.ndarray:
    """The .npy array an uncompressed zip entry holds (what np.savez writes)."""
    signature, name_size, extra_size = _LOCAL_HEADER.unpack_from(view, entry.header_offset)
    if signature != b"PK\x03\x04" or entry.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{entry.filename} is not stored as np.savez stores it")
    start = entry.header_offset + _LOCAL_HEADER.size + name_size + extra_size
    end = start + entry.file_size
    shape, fortran_order, dtype, offset = _array_header(view, start, end, entry.filename)
    if dtype.hasobject:
        raise ValueError(f"{entry.filename} holds objects")  # pack never writes them
    count = math.prod(shape)
    if offset + count * dtype.itemsize != end:
        raise ValueError(f"{entry.filename} is cut short")
    array = np.frombuffer(view, dtype, count, offset)
    return array.reshape(shape, order="F" if fortran_order else "C").copy(order="K")


# The header np.save writes (format 1.0), read without numpy's parser: numpy reads it with
# ast.literal_eval, ~70 us an array, which was most of reading a small memory's saved copies
# (17 arrays: ~1.2 ms of a cold open's CPU). Anything else is left to numpy's reader.
_NPY_HEADER = re.compile(
    rb"\{'descr': '([<>|=]?[a-z]\d+)', 'fortran_order': (True|False), "
    rb"'shape': \(((?:\d+, )*\d+,?|)\), \} *\n"
)
_MAGIC = b"\x93NUMPY\x01\x00"


def _array_header(
    view: memoryview, start: int, end: int, name: str
) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """An .npy header's shape, order and dtype, and where its array starts."""
    if bytes(view[start : start + 8]) == _MAGIC:
        (size,) = struct.unpack_from("<H", view, start + 8)
        found = _NPY_HEADER.fullmatch(bytes(view[start + 10 : start + 10 + size]))
        if found is not None:
            descr, fortran_order, shape = found.groups()
            dimensions = tuple(int(n) for n in shape.split(b",") if n.strip())
            return dimensions, fortran_order == b"True", _dtype(descr), start + 10 + size
    header = io.BytesIO(view[start : min(end, start + _HEADER_MOST)])  # not the array: a copy
    version = np.lib.format.read_magic(header)
    read_header = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }.get(version)
    if read_header is None:
        raise ValueError(f"{name}: .npy version {version}")
    try:
        shape, fortran_order, dtype = read_header(header)
    except ValueError:
        raise
    except Exception as exc:  # numpy's parser on a damaged header: TokenError, TypeError...
        raise ValueError(f"{name}: an unreadable header ({type(exc).__name__})") from exc
    return shape, fortran_order, dtype, start + header.tell()


@functools.lru_cache(maxsize=64)  # pack writes a handful; a damaged file may name any number
def _dtype(descr: bytes) -> np.dtype:
    try:
        return np.dtype(descr.decode())
    except TypeError as exc:
        raise ValueError(f"not a dtype: {descr!r}") from exc
