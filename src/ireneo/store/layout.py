"""Where every passage of a memory sits, in RAM: the same in every store.

A recall scores the windows around a few dozen candidate passages: for each it needs the turns
within reach (same conversation, seq ± reach), what the filters look at, and each passage's
terms, counted against the query's. Read from the store per query that was ~300 rows of SQL
and ~9,000 words split and looked up in Python; held here as arrays (a conversation and seq per
passage, terms as ids), it is a few searchsorted and bincount calls.
The keyword candidates come from here too: BM25 over postings (each term's passages) built from
the same ids, ~0.5 ms a query where FTS5's bm25() ordering took 3-5 ms (it scores every row that
matches; the rarer terms of a query still match ~2,000 rows at 60,000 passages).
At 60,000 passages of 26 terms it is ~18 MB; it is read once per process (~0.4 s at that size
from the rows, the postings ~0.1 s more; ~0.05 s for both from a saved copy, `saved`) and then
extended as passages arrive, like the vectors (store/kept.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from itertools import chain, islice
from typing import NamedTuple

import numpy as np

from ireneo.store.base import BM25_B, BM25_K1, Filters
from ireneo.store.saved import pack, unpack

_SEQ_OFFSET = 2**31  # a turn key is conversation * 2**32 + seq + 2**31: seq may be negative
_ROWS_CHUNK = 4096  # rows read into arrays at once


# what a saved layout holds besides its codes and postings (the first six: one value a passage)
_SAVED_COLUMNS = ("ids", "turn_keys", "ts", "roles", "block_types", "echo", "offsets", "tokens")


class PassageRow(NamedTuple):
    """One passage as a store reads it for the layout."""

    passage_id: int
    session_id: str
    seq: int
    ts: int  # seconds since the epoch, UTC
    role: str
    block_type: str
    terms: str
    echo: bool  # or 0/1, as SQLite gives it


class Codes:
    """Small integers for strings (conversations, roles, block types, terms), only ever added
    to, so every layout built from it stays valid while a newer one grows it."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.code: dict[str, int] = {}

    def of(self, name: str) -> int:
        code = self.code.get(name)
        if code is None:
            code = self.code[name] = len(self.names)
            self.names.append(name)
        return code

    @classmethod
    def of_names(cls, names: list[str]) -> Codes:
        """The codes whose names, in code order, are `names` (as a saved copy lists them)."""
        codes = cls()
        codes.names = names
        codes.code = {name: code for code, name in enumerate(names)}
        if len(codes.code) != len(names):
            raise ValueError("a name is listed twice")
        return codes

    def all(self, names: list[str]) -> np.ndarray:
        """The codes of many names (1.5 million words at 10,000 conversations): one call per
        distinct name, the rest in C."""
        for name in dict.fromkeys(names):
            self.of(name)
        return np.fromiter(map(self.code.__getitem__, names), np.int32, len(names))


class PassageLayout:
    """Passages by id, ascending, with their turn keys, filter columns and terms. Never changed
    once built (but for `written` and `capitals`, caches): a store swaps in a new one as passages
    arrive (and rebuilds after a deletion)."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)
        self.turn_keys = np.zeros(0, dtype=np.int64)
        self.ts = np.zeros(0, dtype=np.int64)
        self.roles = np.zeros(0, dtype=np.int32)
        self.block_types = np.zeros(0, dtype=np.int32)
        self.echo = np.zeros(0, dtype=bool)
        # the terms of the passage at position i: tokens[offsets[i]:offsets[i + 1]]
        self.offsets = np.zeros(1, dtype=np.int64)
        self.tokens = np.zeros(0, dtype=np.int32)
        self.sessions, self.names, self.vocabulary = Codes(), Codes(), Codes()
        self._by_turn = np.zeros(0, dtype=np.int64)  # positions ordered by turn key
        self._sorted_keys = np.zeros(0, dtype=np.int64)
        self._postings: _Postings | None = None  # built at the first keyword search
        # what search read of each turn's text, by turn key (search.names_in_memory): kept while
        # the turn's passages are, which a new layout built after a deletion starts without
        self.written: dict[int, object] = {}
        # the capitalised runs of each turn's text, by turn key (search._without_numbered_names),
        # kept and dropped as `written` is
        self.capitals: dict[int, object] = {}

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def last_id(self) -> int:
        return int(self.ids[-1]) if len(self.ids) else 0

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def extended(self, rows: Iterable[PassageRow]) -> PassageLayout:
        """This layout with rows appended, whose ids all follow the last one held.

        Rows are taken a chunk at a time, so reading 60,000 of them never holds more than a
        few thousand as Python objects (the 1.5 million words of their terms would be ~100 MB).
        """
        columns: list[list[np.ndarray]] = [[] for _ in range(8)]
        rows = iter(rows)
        while chunk := list(islice(rows, _ROWS_CHUNK)):
            words, counts = _words(chunk)
            sessions = self.sessions.all([row.session_id for row in chunk]).astype(np.int64)
            seqs = np.fromiter((row.seq for row in chunk), np.int64, len(chunk))
            for column, values in zip(
                columns,
                (
                    np.fromiter((row.passage_id for row in chunk), np.int64, len(chunk)),
                    _turn_key(sessions, seqs),
                    np.fromiter((row.ts for row in chunk), np.int64, len(chunk)),
                    self.names.all([row.role for row in chunk]),
                    self.names.all([row.block_type for row in chunk]),
                    np.fromiter((bool(row.echo) for row in chunk), bool, len(chunk)),
                    counts,
                    self.vocabulary.all(words),
                ),
                strict=True,
            ):
                column.append(values)
        if not columns[0]:
            return self
        ids, keys, ts, roles, block_types, echo, counts, tokens = map(np.concatenate, columns)
        new = PassageLayout()
        new.sessions, new.names, new.vocabulary = self.sessions, self.names, self.vocabulary
        new.ids = np.concatenate([self.ids, ids])
        new.turn_keys = np.concatenate([self.turn_keys, keys])
        new.ts = np.concatenate([self.ts, ts])
        new.roles = np.concatenate([self.roles, roles])
        new.block_types = np.concatenate([self.block_types, block_types])
        new.echo = np.concatenate([self.echo, echo])
        new.offsets = np.concatenate([self.offsets, self.offsets[-1] + np.cumsum(counts)])
        new.tokens = np.concatenate([self.tokens, tokens])
        new._order_turns()
        new._postings = self._postings  # still true of the passages it covers
        added = np.unique(keys).tolist() if self.written or self.capitals else []
        if self.written:  # a turn that gained passages may have been stored again
            new.written = dict(self.written)  # at once: recalls may still add to this one's
            for key in added:
                new.written.pop(key, None)
        if self.capitals:
            new.capitals = dict(self.capitals)
            for key in added:
                new.capitals.pop(key, None)
        return new

    def saved(self) -> memoryview:
        """This layout and its postings as bytes (store/saved.py): what `from_saved` reads."""
        postings = self._current_postings()
        return pack(
            {
                **{column: getattr(self, column) for column in _SAVED_COLUMNS},
                "sessions": self.sessions.names,
                "names": self.names.names,
                "vocabulary": self.vocabulary.names,
                "postings_passages": postings.passages,
                "postings_starts": postings.starts,
                "postings_tokens": np.array(postings.tokens),
            }
        )

    @classmethod
    def from_saved(cls, data: bytes | memoryview) -> PassageLayout:
        """The layout `saved` wrote. ValueError for bytes that do not hold one whole."""
        parts = unpack(data)
        try:
            layout = cls()
            for column in _SAVED_COLUMNS:
                setattr(layout, column, parts[column])
            layout.sessions = Codes.of_names(parts["sessions"])
            layout.names = Codes.of_names(parts["names"])
            layout.vocabulary = Codes.of_names(parts["vocabulary"])
            layout._postings = _Postings(
                int(parts["postings_tokens"]), parts["postings_passages"], parts["postings_starts"]
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a saved layout lacks {exc}") from exc
        rows = len(layout.ids)
        if any(len(getattr(layout, c)) != rows for c in _SAVED_COLUMNS[:6]) or (
            len(layout.offsets) != rows + 1 or layout.offsets[-1] != len(layout.tokens)
        ):
            raise ValueError("a saved layout's columns disagree")
        layout._order_turns()
        return layout

    def _order_turns(self) -> None:
        """The positions ordered by turn key, and the keys in that order (for `near`)."""
        self._by_turn = np.argsort(self.turn_keys, kind="stable")
        self._sorted_keys = self.turn_keys[self._by_turn]

    def positions(self, passage_ids: Iterable[int]) -> np.ndarray:
        """The positions of those of `passage_ids` that are held, ascending."""
        # a recall asks for a few dozen: sorted in Python, a third of np.unique's time
        wanted = np.array(sorted(set(passage_ids)), dtype=np.int64)
        if not len(self.ids) or not len(wanted):
            return np.zeros(0, dtype=np.int64)
        found = np.minimum(np.searchsorted(self.ids, wanted), len(self.ids) - 1)
        return found[self.ids[found] == wanted]

    def near(self, positions: np.ndarray, reach: int) -> np.ndarray:
        """Every passage of the turns within `reach` turns of each given passage's turn (in the
        same conversation), as positions, each once, ascending."""
        if not len(positions):
            return np.zeros(0, dtype=np.int64)
        keys = np.unique(self.turn_keys[positions])
        starts = np.searchsorted(self._sorted_keys, keys - reach, side="left")
        ends = np.searchsorted(self._sorted_keys, keys + reach, side="right")
        return np.unique(self._by_turn[ranges(starts, ends)])

    def bm25(
        self,
        term_ids: list[int],
        weights: np.ndarray,
        average_length: float,
        limit: int,
        filters: Filters,
    ) -> np.ndarray:
        """The `limit` passages holding any of the terms that Okapi BM25 (k1 1.2, b 0.75, each
        term weighted: its IDF) ranks best, among those the filters admit; as positions, best
        first. The candidates a recall scores windows around."""
        postings = self._current_postings()
        found = [self._occurrences(postings, term) for term in term_ids]
        holders = np.concatenate([np.zeros(0, dtype=np.int64), *found])
        if not len(holders):
            return holders
        column = np.repeat(np.arange(len(found)), [len(f) for f in found])
        pairs, tf = np.unique(holders * len(found) + column, return_counts=True)
        holder, column = pairs // len(found), pairs % len(found)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * self.lengths[holder] / (average_length or 1.0))
        parts = weights[column] * tf * (BM25_K1 + 1) / (tf + norm)
        passages, which = np.unique(holder, return_inverse=True)
        scores = np.bincount(which, weights=parts)
        keep = self.admitted(passages, filters) & self._of_block_types(passages, filters)
        passages, scores = passages[keep], scores[keep]
        best = np.lexsort((passages, -scores))[:limit]  # ties: the earlier passage
        return passages[best]

    def holding(self, term_ids: list[int], limit: int, filters: Filters) -> np.ndarray:
        """Up to `limit` passages holding every one of the terms (the latest: a name said often
        is asked about as it is now), among those the filters admit; as positions, ascending.
        Found from the rarest term's postings, so a common word in a name ("Depot" in "Carrow
        Depot 8") costs nothing."""
        wanted = sorted(set(term_ids))
        if not wanted or wanted[0] < 0:
            return np.zeros(0, dtype=np.int64)
        postings = self._current_postings()
        rarest = min(wanted, key=postings.count)
        candidates = _distinct(self._occurrences(postings, rarest))
        # Newest first, in chunks that grow: a common name's postings are long, and the
        # latest few that hold every term are all that is wanted.
        found: list[np.ndarray] = []
        end, chunk, total = len(candidates), max(64, 4 * limit), 0
        while end > 0 and total < limit:
            passages = candidates[max(0, end - chunk) : end]
            end, chunk = end - len(passages), 4 * chunk
            if len(wanted) > 1:
                tokens, owner, _ = self.tokens_of(passages)
                held = np.zeros(len(passages), dtype=np.int64)  # how many of the terms each has
                for term in wanted:
                    held += np.bincount(owner[tokens == term], minlength=len(passages)) > 0
                passages = passages[held == len(wanted)]
            keep = self.admitted(passages, filters) & self._of_block_types(passages, filters)
            found.insert(0, passages[keep])
            total += int(keep.sum())
        return np.concatenate([np.zeros(0, dtype=np.int64), *found])[-limit:]

    def visible(self, positions: np.ndarray, filters: Filters) -> np.ndarray:
        """What may be scored: an echo neither is a hit nor lends its words to a window, and a
        block type filter keeps its passages only."""
        keep = self._of_block_types(positions, filters)
        if not filters.include_echoes:
            keep &= ~self.echo[positions]
        return positions[keep]

    def _of_block_types(self, positions: np.ndarray, filters: Filters) -> np.ndarray:
        if not filters.block_types:
            return np.ones(len(positions), dtype=bool)
        return np.isin(self.block_types[positions], self._codes_of(filters.block_types))

    def admitted(self, positions: np.ndarray, filters: Filters) -> np.ndarray:
        """Which of `positions` the time, role and conversation filters admit as hits."""
        keep = np.ones(len(positions), dtype=bool)
        if filters.since is not None:
            keep &= self.ts[positions] >= _second(filters.since)
        if filters.until is not None:
            keep &= self.ts[positions] <= _second(filters.until)
        if filters.role is not None:
            keep &= np.isin(self.roles[positions], self._codes_of([filters.role]))
        if filters.session_id is not None:
            code = self.sessions.code.get(filters.session_id, -1)
            keep &= self.turn_keys[positions] // 2**32 == code
        return keep

    def turn_key(self, session_id: str, seq: int) -> int | None:
        """The key of a turn of a conversation this layout's codes know (None for another)."""
        code = self.sessions.code.get(session_id)
        return None if code is None else _turn_key(code, seq)

    def turns(self, keys: np.ndarray) -> list[tuple[str, int]]:
        """`(session_id, seq)` of each turn key."""
        names = self.sessions.names
        sessions, seqs = np.divmod(keys, 2**32)
        return [
            (names[session], seq)
            for session, seq in zip(sessions.tolist(), (seqs - _SEQ_OFFSET).tolist(), strict=True)
        ]

    def turns_of(self, passage_ids: Iterable[int]) -> dict[int, tuple[str, int]]:
        """`(session_id, seq)` of the turn of each held passage."""
        found = self.positions(passage_ids)
        return dict(zip(self.ids[found].tolist(), self.turns(self.turn_keys[found]), strict=True))

    def term_ids(self, words: Iterable[str]) -> list[int]:
        """Each word's term id, -1 for one no passage holds."""
        code = self.vocabulary.code
        return [code.get(word, -1) for word in words]

    def tokens_of(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The terms of these passages one after another: term ids, the index (into
        `positions`) of the passage each belongs to, and whether the next term is the same
        passage's (for counting adjacent pairs)."""
        starts, ends = self.offsets[positions], self.offsets[positions + 1]
        tokens = self.tokens[ranges(starts, ends)]
        owner = np.repeat(np.arange(len(positions)), ends - starts)
        followed = np.zeros(len(tokens), dtype=bool)
        followed[:-1] = owner[1:] == owner[:-1]
        return tokens, owner, followed

    def _codes_of(self, names: Iterable[str]) -> list[int]:
        return [self.names.code.get(name, -1) for name in names]

    def _current_postings(self) -> _Postings:
        """The postings, built again once the passages appended since they were built hold an
        eighth of all terms (until then those are scanned: appending stays cheap)."""
        postings = self._postings
        if postings is None or len(self.tokens) - postings.tokens > len(self.tokens) // 8:
            postings = self._postings = _Postings.of(self)
        return postings

    def _occurrences(self, postings: _Postings, term: int) -> np.ndarray:
        """The positions of the passages holding `term`, once per occurrence."""
        held = (
            postings.passages[postings.starts[term] : postings.starts[term + 1]]
            if 0 <= term < len(postings.starts) - 1
            else np.zeros(0, dtype=np.int32)
        )
        tail = self.tokens[postings.tokens :]
        if not len(tail):
            return held.astype(np.int64)
        at = np.flatnonzero(tail == term) + postings.tokens
        later = np.searchsorted(self.offsets, at, side="right") - 1
        return np.concatenate([held.astype(np.int64), later])


class _Postings(NamedTuple):
    """An inverted index of a layout's first passages: for term t, the positions of the passages
    holding it (once per occurrence) are passages[starts[t]:starts[t + 1]]."""

    tokens: int  # how many of the layout's terms it covers (its first passages')
    passages: np.ndarray
    starts: np.ndarray

    def count(self, term: int) -> int:
        """Occurrences of `term` in the passages covered (0 for a term newer than them)."""
        return int(self.starts[term + 1] - self.starts[term]) if term < len(self.starts) - 1 else 0

    @classmethod
    def of(cls, layout: PassageLayout) -> _Postings:
        owner = np.repeat(np.arange(len(layout), dtype=np.int32), layout.lengths)
        # Stable, though the order inside a term's postings does not matter: on term ids numpy's
        # stable sort is 2-3x faster than its default (85 against 285 ms for the 1.6 million
        # terms of 10,000 conversations; 18 against 37 ms for 3,000 in Russian), and the first
        # recall of a process waits for it.
        order = np.argsort(layout.tokens, kind="stable")
        counts = np.bincount(layout.tokens, minlength=len(layout.vocabulary.names))
        starts = np.concatenate([[0], np.cumsum(counts)])
        return cls(len(layout.tokens), owner[order], starts)


def _words(rows: list[PassageRow]) -> tuple[list[str], np.ndarray]:
    """All the rows' terms in one list, and how many each row has.

    Split as one string, the words are one list; split row by row, thousands of lists wake the
    garbage collector again and again (2x slower). Terms are written single-spaced (index.py),
    which the count checks.
    """
    words = " ".join(row.terms for row in rows).split()
    counts = np.fromiter(
        (row.terms.count(" ") + 1 if row.terms else 0 for row in rows), np.int64, len(rows)
    )
    if counts.sum() != len(words):  # not single-spaced after all
        split = [row.terms.split() for row in rows]
        words = list(chain.from_iterable(split))
        counts = np.fromiter(map(len, split), np.int64, len(split))
    return words, counts


def _distinct(ascending: np.ndarray) -> np.ndarray:
    """An ascending array without its repeats: np.unique's answer, without its sort."""
    if len(ascending) < 2:
        return ascending
    keep = np.empty(len(ascending), dtype=bool)
    keep[0] = True
    np.not_equal(ascending[1:], ascending[:-1], out=keep[1:])
    return ascending[keep]


def _turn_key(session: np.ndarray | int, seq: np.ndarray | int) -> np.ndarray | int:
    return session * 2**32 + seq + _SEQ_OFFSET


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of `arange(start, end)` for each pair, without a Python loop."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    # each element is its range's start plus its place in the range
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + np.arange(total) - first


def _second(ts: datetime) -> int:
    """A filter's bound in whole seconds, as timestamps are stored (model.format_ts)."""
    return math.floor(ts.timestamp())
