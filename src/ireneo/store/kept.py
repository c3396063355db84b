"""A store's in-memory copy of some rows (its vectors, its passages' layout), kept up to date.

The store keeps two counters by trigger: the rows it holds and the rows it ever deleted (an
edited or forgotten turn's). After a deletion the copy is read again whole, so nothing forgotten
stays in RAM; else only the rows after the last id held are read. A count off after that read
is asked again (rows may have been stored since it was read); where ids commit out of order
(PostgreSQL's sequences), a count still off means an older id landed late: the copy is read
again whole.

A store may also keep a saved copy (store/saved.py): a fresh copy then starts from it, when it
was saved at the same count of deletions, and reads only the rows after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

import numpy as np


class Copy(Protocol):
    def __len__(self) -> int: ...

    @property
    def last_id(self) -> int: ...


C = TypeVar("C", bound=Copy)


class KeptCopy(Generic[C]):
    """`empty()` makes an empty copy; `grow(copy)` returns the copy with the rows after its last
    id appended; `saved(deletes)`, if given, the copy saved at that count of deletions, or None."""

    def __init__(
        self, empty: Callable[[], C], saved: Callable[[int], C | None] | None = None
    ) -> None:
        self._empty = empty
        self._saved = saved
        self._copy = empty()
        self._deletes: int | None = None
        self._bytes: int | None = None  # array_bytes(self._copy), measured when first asked
        self._lock = threading.Lock()

    def current(self, counters: Callable[[], tuple[int, int]], grow: Callable[[C], C]) -> C:
        """The copy, brought up to date; `counters()` gives (rows held, rows ever deleted)."""
        with self._lock:
            count, deletes = counters()
            for asked in (1, 2):
                if deletes != self._deletes:
                    start = self._saved(deletes) if self._saved else None
                    self._copy, self._deletes = start or self._empty(), deletes
                    self._bytes = None
                if count != len(self._copy):
                    self._copy, self._bytes = grow(self._copy), None
                if len(self._copy) == count or asked == 2:
                    break
                # Off after the read: rows stored since the counters were read (a store may
                # answer with counters read a moment before), a deletion since, or an older id
                # landed late. Counters read again tell; only the last needs the whole read.
                count, deletes = counters()
            if len(self._copy) != count:
                self._copy, self._bytes = grow(self._empty()), None
            return self._copy

    @property
    def read(self) -> bool:
        """Whether `current` has brought the copy up to date at least once in this process."""
        return self._deletes is not None

    def nbytes(self) -> int:
        """The bytes of the copy's arrays (`array_bytes`), measured once per copy: the server
        asks after every lease of a memory, and walking the copy's parts cost ~50 us each time.
        What a search caches on a copy later (a few bytes a passage) counts from its next one."""
        with self._lock:
            if self._bytes is None:
                self._bytes = array_bytes(self._copy)
            return self._bytes

    def state(self) -> tuple[C, int | None]:
        """The copy as it is, with the count of deletions it reflects (None before the first
        `current`): a pair read together, for saving."""
        with self._lock:
            return self._copy, self._deletes


def array_bytes(copy: object, depth: int = 2) -> int:
    """The bytes of the numpy arrays a copy holds (and of the arrays and names its parts hold):
    an estimate, which leaves out Python's own overheads but for a flat 64 bytes a name."""
    if isinstance(copy, np.ndarray):
        return copy.nbytes
    if depth == 0:
        return 0
    if isinstance(copy, tuple):
        return sum(array_bytes(part, depth - 1) for part in copy)
    if isinstance(copy, list):
        return 64 * len(copy)
    if not hasattr(copy, "__dict__"):
        return 0
    return sum(array_bytes(part, depth - 1) for part in vars(copy).values())
