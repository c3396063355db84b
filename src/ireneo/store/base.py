"""What every store offers the layers above it.

A store keeps one memory: turns verbatim, their passages with search terms, and passage vectors.
It does not analyse text, embed, or fuse rankings; it persists and answers the two candidate
queries (lexical and dense) that search.py combines. Everything above this interface must work
unchanged on any implementation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ireneo.model import SessionSummary, Turn


@dataclass(frozen=True)
class PassageDraft:
    """A searchable piece of a turn, made by the indexer before it is stored."""

    block_type: str
    text: str
    terms: str  # space-separated search terms (ireneo.analyze)


@dataclass(frozen=True)
class SourceState:
    """What a file looked like when it was last indexed; unchanged files are skipped."""

    path: str
    size: int
    mtime_ns: int
    sha256: str


@dataclass
class StoreResult:
    added: int = 0
    replaced: int = 0
    unchanged: int = 0

    def __iadd__(self, other: StoreResult) -> StoreResult:
        self.added += other.added
        self.replaced += other.replaced
        self.unchanged += other.unchanged
        return self


@dataclass(frozen=True)
class Filters:
    since: datetime | None = None
    until: datetime | None = None
    role: str | None = None
    session_id: str | None = None
    block_types: tuple[str, ...] | None = None

    @property
    def empty(self) -> bool:
        return self == Filters()


@dataclass(frozen=True)
class NearPassage:
    passage_id: int
    session_id: str
    seq: int
    ts: datetime
    role: str
    block_type: str
    terms: str


@dataclass(frozen=True)
class TermStats:
    passages: int
    average_length: float
    document_frequency: dict[str, int]


@dataclass
class Status:
    turns: int
    sessions: int
    passages: int
    embedded: int
    model: str | None
    disk_bytes: int
    last_indexed: str | None
    extra: dict = field(default_factory=dict)


class Store(ABC):
    """One memory's persistence. Implementations: SQLiteStore (embedded), later PostgreSQL."""

    # -- metadata -------------------------------------------------------------------------
    @abstractmethod
    def get_meta(self, key: str) -> str | None: ...

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    # -- writes -----------------------------------------------------------------------------
    @abstractmethod
    def turn_hashes(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Content hashes of the stored turns among `(session_id, turn_uuid)` keys."""

    @abstractmethod
    def write_turns(
        self,
        turns: list[tuple[Turn, str, list[PassageDraft]]],
        source: SourceState | None = None,
    ) -> StoreResult:
        """Insert or replace `(turn, content_hash, passages)` in one transaction (with `source`)."""

    @abstractmethod
    def source_state(self, path: str) -> SourceState | None: ...

    @abstractmethod
    def pending_passages(self, limit: int) -> list[tuple[int, str]]:
        """Passages that have no vector yet: `(passage_id, text)`."""

    @abstractmethod
    def count_pending(self) -> int: ...

    @abstractmethod
    def put_vectors(self, passage_ids: list[int], vectors: np.ndarray) -> None:
        """Store vectors of passages (ignoring any passage deleted meanwhile), in one transaction."""

    @abstractmethod
    def drop_vectors(self) -> None:
        """Forget every vector (before re-embedding with another model)."""

    # -- search candidates --------------------------------------------------------------------
    @abstractmethod
    def lexical_search(
        self, terms: list[str], limit: int, filters: Filters
    ) -> list[tuple[int, float]]:
        """Candidates matching any term, best first by the store's own ranking, as
        `(passage_id, score)`; search.py scores every candidate again with BM25."""

    @abstractmethod
    def term_stats(self, terms: list[str]) -> TermStats:
        """BM25's corpus statistics: passages, their average length in terms, and how many
        passages hold each of the given terms."""

    @abstractmethod
    def passages_near(self, passage_ids: list[int], reach: int) -> list[NearPassage]:
        """Every passage of the turns within `reach` turns of each given passage's turn (in the
        same conversation), each once: the material of the windows search.py scores."""

    @abstractmethod
    def dense_search(
        self, query: np.ndarray, limit: int, filters: Filters
    ) -> list[tuple[int, float]]:
        """Passages nearest to a normalised query vector (cosine), best first."""

    @abstractmethod
    def dense_scores(self, query: np.ndarray, passage_ids: list[int]) -> dict[int, float]:
        """The cosine of each given passage that has a vector."""

    # -- reads ----------------------------------------------------------------------------------
    @abstractmethod
    def get_turns(
        self, session_id: str, from_seq: int | None, to_seq: int | None
    ) -> list[Turn]: ...

    @abstractmethod
    def sessions(self, since: datetime | None, until: datetime | None) -> list[SessionSummary]: ...

    @abstractmethod
    def session_ref(self, session_id: str) -> str | None: ...

    @abstractmethod
    def resolve_ref(self, ref: str) -> str | None: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    @abstractmethod
    def status(self) -> Status: ...

    @abstractmethod
    def close(self) -> None: ...
