"""What every store offers the layers above it.

A store keeps one memory: turns verbatim, their passages with search terms, and passage vectors.
It does not analyse text, embed, or fuse rankings; it persists, and gives search.py what it ranks
from: where every passage sits and its terms (the layout, whose postings BM25 ranks), the term
statistics, and the nearest vectors. Everything above this interface must work unchanged on any
implementation.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

from ireneo.errors import StorageFull
from ireneo.model import ConversationSummary, Turn, format_ts

if TYPE_CHECKING:
    from ireneo.store.kept import KeptCopy
    from ireneo.store.layout import PassageLayout, PassageRow
    from ireneo.store.vectors import VectorIndex


BM25_K1, BM25_B = 1.2, 0.75  # Okapi BM25's usual constants, wherever a store or search ranks
READ_ROWS = 4096  # rows a store fetches at once in a long read (a memory's layout, vectors)
# Rows added since the copies were saved before they are saved again (or an eighth of those
# saved, if more). Small: a server opens small memories all the time (a third of its recalls at
# 2,000 users of 5-50 conversations), and building their copies from the rows cost more CPU and
# read more pages than reading them saved, even at 5-10 conversations (docs/scaling.md).
SAVE_AFTER = 16
PRUNE_EVERY = 60.0  # seconds between removals of echo records past their window (a store's)

log = logging.getLogger("ireneo.store")
C = TypeVar("C")  # a copy search keeps: the layout or the vectors
Tx = TypeVar("Tx")  # a store's open transaction, which its primitives write through


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


TurnWrite = tuple[Turn, str, list[PassageDraft]]  # a turn, its content hash, its passages


def turn_changes(turns: list[TurnWrite], stored: dict[tuple[str, str], str]) -> list[str]:
    """What writing each turn does, in order, given the content hashes `stored` of the turns
    stored among their keys: "unchanged" (the same hash), "added" (no such turn) or "replaced".
    A key given twice counts as two writes in a row."""
    latest = dict(stored)
    changes = []
    for turn, digest, _ in turns:
        key = (turn.session_id, turn.turn_uuid)
        old = latest.get(key)
        changes.append("unchanged" if old == digest else "added" if old is None else "replaced")
        latest[key] = digest
    return changes


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
    include_echoes: bool = False  # recall echoes (ireneo.echoes) are left out unless asked for

    @property
    def empty(self) -> bool:
        """No filter on what the store returns (echoes are left out above the store)."""
        return self == Filters(include_echoes=self.include_echoes)


@dataclass(frozen=True)
class TermStats:
    passages: int
    average_length: float
    document_frequency: dict[str, int]

    @classmethod
    def counted(cls, documents: int, terms: int, document_frequency: dict[str, int]) -> TermStats:
        """From how many documents there are and how many terms they hold in all."""
        return cls(documents, terms / documents if documents else 0.0, document_frequency)


@dataclass(frozen=True)
class Forgotten:
    """What one forget removed."""

    conversations: int = 0
    turns: int = 0
    passages: int = 0
    vectors: int = 0
    memories: int = 0

    def to_dict(self) -> dict:
        return {
            "conversations": self.conversations,
            "turns": self.turns,
            "passages": self.passages,
            "vectors": self.vectors,
            "memories": self.memories,
        }


FORGET_ACTIONS = ("forget_conversation", "forget_all", "forget_before")


@dataclass(frozen=True)
class AuditEntry:
    """One forget, as the audit log keeps it: never any text of what was forgotten.

    action: one of FORGET_ACTIONS. actor: who asked (`route`, `cli`, `inspector`, `operator`,
    `retention`). conversation: sha256 of the conversation id (first 16 hex digits), so that a
    request about a known id can be checked without the log keeping ids; None for the others.
    before: the cut-off of `forget_before`.
    """

    at: datetime
    action: str
    actor: str
    forgotten: Forgotten
    conversation: str | None = None
    before: datetime | None = None

    def to_dict(self) -> dict:
        return {
            "at": format_ts(self.at),
            "action": self.action,
            "actor": self.actor,
            "conversation": self.conversation,
            "before": format_ts(self.before) if self.before else None,
            **self.forgotten.to_dict(),
        }


def conversation_digest(session_id: str) -> str:
    """How the audit log names a conversation: a hash of its id, never the id."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:16]


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


class Store(ABC, Generic[Tx]):
    """One memory's persistence. Implementations: SQLiteStore (embedded) and PostgresStore.

    What both do the same is written here once: what a written turn does, whether a saved copy
    may still be written, the forgets and their audit, the merge of a near-duplicate memory.
    Each store gives the primitives these run on: reads and writes of rows, inside the
    transaction `_transaction` opens (taking there any lock a rule needs)."""

    # each store's copies of its passages' layout and its vectors (store/kept.py)
    _layout: KeptCopy[PassageLayout]
    _vectors_kept: KeptCopy[VectorIndex]

    def __str__(self) -> str:
        """What a log line names the memory by (never a user's own id)."""
        return type(self).__name__

    # -- metadata -------------------------------------------------------------------------
    @abstractmethod
    def get_meta(self, key: str) -> str | None: ...

    @abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    @abstractmethod
    def add_meta(self, key: str, value: str) -> str:
        """Record `value` under `key` unless a value is recorded already; the value recorded
        either way. One insert that does nothing on a conflict, so two processes recording
        at once (two replicas taking a new user's first posts) agree on the first."""

    # -- writes -----------------------------------------------------------------------------
    @abstractmethod
    def turn_hashes(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Content hashes of the stored turns among `(session_id, turn_uuid)` keys."""

    def write_turns(
        self,
        turns: list[TurnWrite],
        source: SourceState | None = None,
        echoes: frozenset[tuple[str, str]] = frozenset(),
    ) -> StoreResult:
        """Insert or replace `(turn, content_hash, passages)` in one transaction (with `source`),
        each as `turn_changes` decides. A turn written whose `(session_id, turn_uuid)` is in
        `echoes` is flagged as a recall echo (`Turn.echo`); an unchanged turn keeps its flag."""
        with self._transaction() as tx:
            stored = self._stored_turns(tx, [(t.session_id, t.turn_uuid) for t, _, _ in turns])
            changes = turn_changes(turns, {key: digest for key, (_, digest) in stored.items()})
            self._write_changes(tx, turns, changes, stored, echoes)
            if source is not None:
                self._put_source(tx, source)
            result = StoreResult(*(changes.count(c) for c in ("added", "replaced", "unchanged")))
            if result.added or result.replaced:
                self._put_meta(tx, "last_written", format_ts(datetime.now(UTC)))
        return result

    @abstractmethod
    def _stored_turns(
        self, tx: Tx, keys: list[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[int, str]]:
        """`(row, content hash)` of the stored turns among these keys, which no other writer
        of this memory's turns can change until the transaction ends."""

    @abstractmethod
    def _write_changes(
        self,
        tx: Tx,
        turns: list[TurnWrite],
        changes: list[str],
        stored: dict[tuple[str, str], tuple[int, str]],
        echoes: frozenset[tuple[str, str]],
    ) -> None:
        """Write each turn as `changes` says (its passages, and its conversation when new)."""

    @abstractmethod
    def _put_source(self, tx: Tx, source: SourceState) -> None:
        """Record what an indexed file looked like, now."""

    @abstractmethod
    def _put_meta(self, tx: Tx, key: str, value: str) -> None: ...

    @abstractmethod
    def source_state(self, path: str) -> SourceState | None: ...

    @abstractmethod
    def pending_passages(self, limit: int, after: int = 0) -> list[tuple[int, str]]:
        """Passages with an id above `after` that have no vector yet, `(passage_id, text)` in id
        order. Going through them, pass the last id got: each call then reads only new rows,
        where starting over would pass every embedded passage again (quadratic in a backfill)."""

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
    def term_stats(self, terms: list[str]) -> TermStats:
        """BM25's corpus statistics: passages, their average length in terms, and how many
        passages hold each of the given terms."""

    def dense_search(
        self, query: np.ndarray, limit: int, filters: Filters
    ) -> list[tuple[int, float]]:
        """Passages nearest to a normalised query vector (cosine), best first."""
        index = self.vectors()
        allowed = None if filters.empty or not len(index) else self._filtered_passage_ids(filters)
        return index.nearest(np.asarray(query, dtype=np.float32), limit, allowed)

    def dense_scores(self, query: np.ndarray, passage_ids: np.ndarray) -> np.ndarray:
        """The cosine of each given passage, nan for one without a vector, from the vectors'
        copy as the last `dense_search` left it: a recall asks right after that search, and
        bringing the copy up to date again would be one more query on the path it waits on. A
        vector stored in between counts from the next recall."""
        index, _ = self._vectors_kept.state()
        return index.cosines_of(np.asarray(query, dtype=np.float32), passage_ids)

    def dense_median(self, query: np.ndarray) -> float:
        """The median cosine of a query over the memory's vectors (ireneo.relevance), from the
        copy the last `dense_search` left, as `dense_scores` reads it."""
        index, _ = self._vectors_kept.state()
        return index.median_cosine(np.asarray(query, dtype=np.float32))

    @abstractmethod
    def _filtered_passage_ids(self, filters: Filters) -> np.ndarray:
        """The ids of the passages whose turns the filters admit."""

    # -- search's copies in RAM, kept up to date (store/kept.py) and saved for the next process
    def _keep_copies(self) -> None:
        """Start the copies search reads, each from its saved copy when there is one; a store
        calls this when it opens."""
        from ireneo.store.kept import KeptCopy
        from ireneo.store.layout import PassageLayout
        from ireneo.store.vectors import VectorIndex

        self._layout = KeptCopy(
            PassageLayout,
            lambda deletes: self._read_saved("layout", PassageLayout.from_saved, deletes),
        )
        self._vectors_kept = KeptCopy(
            VectorIndex,
            lambda deletes: self._read_saved("vectors", VectorIndex.from_saved, deletes),
        )

    def layout(self) -> PassageLayout:
        """Where every passage sits and what recall reads of it, in RAM, brought up to date
        (store/layout.py): the material of the windows search.py scores."""
        return self._layout.current(
            self._passage_counters,
            lambda layout: layout.extended(self._passage_rows(layout.last_id)),
        )

    def vectors(self) -> VectorIndex:
        """Every passage's vector in RAM as 8-bit codes, sorted by passage id, brought up to
        date (store/vectors.py): what dense_search and dense_scores read."""
        return self._vectors_kept.current(
            self._vector_counters,
            lambda index: index.extended(self._vector_rows(index.last_id)),
        )

    def resident_bytes(self) -> int:
        """Roughly the RAM this memory holds: the arrays of search's copies (the server bounds
        its open memories by the sum; a memory whose copies are unread holds next to nothing)."""
        return self._layout.nbytes() + self._vectors_kept.nbytes()

    def vectors_unread(self) -> bool:
        """Whether this process has yet to read the vectors' copy: a fresh process's first
        recall then reads it on the calling thread while the model loads on the query worker
        (search.window_scores); later recalls leave it to the worker, whose check of the
        counters is a query."""
        return not self._vectors_kept.read

    def save_copies(self) -> None:
        """Save what search holds in RAM (the layout, the vectors' codes) where the next process
        finds it, once the rows added since they were last saved are an eighth of them (and at
        least SAVE_AFTER); called after indexing. A full disk leaves them unsaved, and indexing
        unharmed: they only spare the next process some work."""
        copies = (
            ("layout", self._layout, self._passage_counters, self.layout),
            ("vectors", self._vectors_kept, self._vector_counters, self.vectors),
        )
        for name, kept, counters, current in copies:
            saved = self._saved_rows(name)
            if counters()[0] - saved < max(SAVE_AFTER, saved // 8):
                continue
            current()
            copy, deletes = kept.state()
            try:
                self._write_saved(name, copy, deletes)
            except StorageFull:
                log.warning("%s: the disk is full, so search's copies were not saved", self)
                return

    def _read_saved(self, name: str, read: Callable[[bytes], C], deletes: int) -> C | None:
        """The copy saved under `name` at `deletes` deletions, or None. One that cannot be read
        (damaged, or written by another version) is dropped, so the next index saves it again;
        until then the copy is built from the rows, as without one."""
        data = self._saved_data(name, deletes)
        if data is None:
            return None
        try:
            return read(data)
        except ValueError as exc:
            log.warning("%s: the saved %s is unreadable, built from the rows (%s)", self, name, exc)
        self._drop_saved(name)
        return None

    @abstractmethod
    def _passage_counters(self) -> tuple[int, int]:
        """(passages held, passages ever deleted): what keeps the layout's copy up to date."""

    @abstractmethod
    def _passage_rows(self, after: int) -> Iterator[PassageRow]:
        """The passages with an id above `after`, in id order, as the layout reads them."""

    @abstractmethod
    def _vector_counters(self) -> tuple[int, int]:
        """(vectors held, vectors ever deleted): what keeps the vectors' copy up to date."""

    @abstractmethod
    def _vector_rows(self, after: int) -> Iterator[tuple[int, np.ndarray]]:
        """`(passage_id, vector)` of the passages with an id above `after`, in id order."""

    @abstractmethod
    def _saved_rows(self, name: str) -> int:
        """How many rows the copy saved under `name` holds (0: none saved)."""

    @abstractmethod
    def _saved_data(self, name: str, deletes: int) -> bytes | None:
        """The bytes of the copy saved under `name` at `deletes` deletions, or None."""

    def _write_saved(
        self, name: str, copy: PassageLayout | VectorIndex, deletes: int | None
    ) -> None:
        """Save `copy` under `name` in one transaction, unless a deletion since it was made at
        `deletes` deletions would leave it holding what was deleted."""
        data = copy.saved()  # held only until written: both at once would raise the peak
        with self._transaction() as tx:
            held = self._deletes_held(tx, name)
            if held is not None and held == deletes:
                self._put_saved(tx, name, len(copy), deletes, data)

    @abstractmethod
    def _deletes_held(self, tx: Tx, name: str) -> int | None:
        """The rows ever deleted of the copy named `name` (None: no count yet), read so that no
        deletion can commit between this read and the end of the transaction."""

    @abstractmethod
    def _put_saved(self, tx: Tx, name: str, rows: int, deletes: int, data: memoryview) -> None:
        """Keep `data` as the copy saved under `name`, replacing any saved before."""

    @abstractmethod
    def _drop_saved(self, name: str) -> None:
        """Drop the copy saved under `name` (one that cannot be read)."""

    # -- reads ----------------------------------------------------------------------------------
    def get_turns(self, session_id: str, from_seq: int | None, to_seq: int | None) -> list[Turn]:
        """A conversation's turns from `from_seq` to `to_seq` (None: its first, its last)."""
        return self.turn_windows([(session_id, from_seq, to_seq)])[0]

    @abstractmethod
    def turn_windows(self, windows: list[tuple[str, int | None, int | None]]) -> list[list[Turn]]:
        """The turns of each `(session_id, from_seq, to_seq)`, in order, read at once (a
        recall's hits are one read, not one each)."""

    @abstractmethod
    def sessions(
        self, since: datetime | None, until: datetime | None
    ) -> list[ConversationSummary]: ...

    @abstractmethod
    def conversation_ref(self, session_id: str) -> str | None: ...

    @abstractmethod
    def resolve_ref(self, ref: str) -> str | None: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    # -- recall echoes (ireneo.echoes) -------------------------------------------------------------
    @abstractmethod
    def record_returned(
        self, turns: list[tuple[str, int]], now: datetime, keep_after: datetime
    ) -> None:
        """Remember that these turns `(session_id, seq)` were returned to the user at `now`, and
        forget records older than `keep_after`."""

    @abstractmethod
    def returned_keys(self, since: datetime) -> set[tuple[int, str]]:
        """Each turn returned to the user since `since`, once: its row id and content hash
        (the pair changes when the turn is stored again with other text, or forgotten and its
        id reused)."""

    @abstractmethod
    def turn_texts(self, ids: list[int]) -> list[tuple[int, str, str]]:
        """The row id, content hash and text of each of these turns that exists."""

    def returned_texts(self, since: datetime) -> list[str]:
        """The text of each turn returned to the user since `since`, once each, by row id."""
        ids = [turn_id for turn_id, _ in self.returned_keys(since)]
        return [text for _, _, text in sorted(self.turn_texts(ids))]

    # -- forgetting ------------------------------------------------------------------------------
    # Each forget removes turns, passages, their full-text entries and vectors (and, for
    # forget_all, explicit memories and file states) in one transaction, records an AuditEntry
    # in the same transaction, and leaves none of the text readable in the storage afterwards.
    # The flow is here; each store gives the deletions and the audit row (its primitives below).

    def forget_conversation(self, session_id: str, *, actor: str, now: datetime) -> Forgotten:
        """Forget one conversation (nothing, and no audit entry, when there is none)."""
        digest = conversation_digest(session_id)
        return self._forget("forget_conversation", actor, now, lambda tx: [session_id], digest)

    def forget_all(self, *, actor: str, now: datetime) -> Forgotten:
        """Forget every conversation, explicit memory and indexed-file state; the audit log
        stays. Recorded even when there was nothing to forget."""
        with self._transaction() as tx:
            forgotten = self._delete_conversations(tx, self._conversation_ids(tx))
            forgotten = replace(forgotten, memories=self._delete_the_rest(tx))
            self._write_audit(tx, AuditEntry(now, "forget_all", actor, forgotten))
        self._scrub()
        return forgotten

    def forget_before(self, before: datetime, *, actor: str, now: datetime) -> Forgotten:
        """Forget every conversation whose last turn is older than `before` (retention)."""
        return self._forget(
            "forget_before",
            actor,
            now,
            lambda tx: self._conversation_ids_before(tx, before),
            before=before,
        )

    def _forget(
        self,
        action: str,
        actor: str,
        now: datetime,
        chosen: Callable[[Tx], list[str]],
        conversation: str | None = None,
        before: datetime | None = None,
    ) -> Forgotten:
        """Forget the conversations `chosen` names in the transaction, and record it there when
        a turn went."""
        with self._transaction() as tx:
            forgotten = self._delete_conversations(tx, chosen(tx))
            if forgotten.turns:
                entry = AuditEntry(now, action, actor, forgotten, conversation, before)
                self._write_audit(tx, entry)
        if forgotten.turns:
            self._scrub()
        return forgotten

    def audit_log(self) -> list[AuditEntry]:
        """Every forget recorded in this memory, oldest first."""
        return [
            AuditEntry(at, action, actor, Forgotten(*counts), conversation, before)
            for at, action, actor, conversation, before, *counts in self._audit_rows()
        ]

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Tx]:
        """One transaction: all of it committed when the block ends, none on an exception."""

    @abstractmethod
    def _conversation_ids(self, tx: Tx) -> list[str]:
        """Every conversation's id."""

    @abstractmethod
    def _conversation_ids_before(self, tx: Tx, before: datetime) -> list[str]:
        """The ids of the conversations whose last turn is older than `before`."""

    @abstractmethod
    def _delete_conversations(self, tx: Tx, session_ids: list[str]) -> Forgotten:
        """Delete these conversations, their turns, passages and vectors (and what is kept of
        them: term counts, saved copies, returned records); how many of each went."""

    @abstractmethod
    def _delete_the_rest(self, tx: Tx) -> int:
        """Delete every explicit memory, indexed-file state and the last-written mark; how many
        memories went."""

    @abstractmethod
    def _write_audit(self, tx: Tx, entry: AuditEntry) -> None:
        """Add `entry` to the audit log."""

    @abstractmethod
    def _audit_rows(self) -> list[tuple]:
        """The audit log's rows, oldest first: at, action, actor, conversation, before (instants
        as aware datetimes, to the second), then the counts in Forgotten's order."""

    @abstractmethod
    def _scrub(self) -> None:
        """After a forget has committed: clear what the storage still holds of the deleted rows
        outside them (a write-ahead log), where the store can."""

    @abstractmethod
    def status(self) -> Status: ...

    @abstractmethod
    def close(self) -> None: ...

    # -- explicit memories (ireneo.memories) ---------------------------------------------------
    # Kept beside the turns, in tables of their own with their own term statistics, so that
    # conversation recall is the same whether or not a memory holds any. Not abstract: a store
    # that keeps no explicit memories yet still serves conversations.

    def memory_write(
        self, draft: MemoryDraft, vector: np.ndarray, model: str, dedup: float, now: datetime
    ) -> MemoryWrite:
        """Store a memory, in one transaction: the nearest near-duplicate (`near_duplicate`:
        a cosine of at least `dedup` with `vector`, of `model`, and the same terms holding
        digits) is updated instead (its content, terms and vector replaced, the rest `merged`,
        `updated_at` set, `updates` counted; `created_at` kept); else a new one is inserted
        with a new random id."""
        with self._transaction() as tx:
            self._lock_memories(tx)
            near = near_duplicate(draft, self._memories_near(tx, vector, model, dedup))
            if near is None:
                memory_id = "mem-" + secrets.token_hex(6)
                self._insert_memory(tx, memory_id, draft, vector, model, now)
                return MemoryWrite(memory_id, True, 0)
            self._update_memory(tx, near.row, merged(near, draft), vector, model, now)
            return MemoryWrite(near.memory_id, False, near.updates + 1)

    def _lock_memories(self, tx: Tx) -> None:
        """Make this transaction the memory's only writer of memories until it ends, so two
        near-duplicates cannot both land."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def _memories_near(
        self, tx: Tx, vector: np.ndarray, model: str, at_least: float
    ) -> list[StoredMemory]:
        """The memories whose vector of `model` has a cosine of at least `at_least` with
        `vector`, nearest first (ties by row)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def _insert_memory(
        self,
        tx: Tx,
        memory_id: str,
        draft: MemoryDraft,
        vector: np.ndarray,
        model: str,
        now: datetime,
    ) -> None:
        """A new memory, created and updated `now`, with its vector of `model`."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def _update_memory(
        self, tx: Tx, row: int, draft: MemoryDraft, vector: np.ndarray, model: str, now: datetime
    ) -> None:
        """Memory `row` holds `draft` and `vector` from `now`, one update more."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memory_records(self, memory_ids: list[str] | None = None) -> list[MemoryRecord]:
        """The memories with these ids (those that exist), or every memory when None; newest
        update first."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memory_delete(self, memory_id: str) -> bool:
        """Forget one memory; False when there is none with that id."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memory_count(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memory_term_stats(self, terms: list[str]) -> TermStats:
        """BM25's statistics over the memories (each memory is one document)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memory_lexical_search(
        self, terms: list[str], limit: int, filters: MemoryFilter
    ) -> list[tuple[str, float]]:
        """Memories matching any term and the filters, best first: `(memory_id, score)`."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memory_vectors(self, model: str, filters: MemoryFilter) -> tuple[list[str], np.ndarray]:
        """Ids and vectors (one row each, of `model`) of the memories the filters admit."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memories_unembedded(self, model: str, limit: int) -> list[tuple[str, str]]:
        """Memories with no vector of `model` (new, or embedded by another model before a
        re-embed): `(memory_id, content)`."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memory_put_vectors(self, memory_ids: list[str], vectors: np.ndarray, model: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memory_touch(self, memory_ids: list[str], now: datetime) -> None:
        """Count one use of each memory (it was shown to someone)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")

    def memory_expire(self, updated_before: datetime) -> int:
        """Forget low-importance memories last updated before `updated_before`; how many."""
        raise NotImplementedError(f"{type(self).__name__} keeps no explicit memories")


def id_matrix(rows: list[tuple[str, np.ndarray]]) -> tuple[list[str], np.ndarray]:
    """`(id, vector)` rows as their ids and one matrix of their vectors (0 x 0 when none)."""
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    return [key for key, _ in rows], np.vstack([vector for _, vector in rows])


# -- explicit memories: the values a store keeps and answers with ---------------------------------

IMPORTANCE_LEVELS = ("low", "medium", "high")  # stored as their index: 0, 1, 2


@dataclass(frozen=True)
class MemoryDraft:
    """A memory to store, checked and analysed by ireneo.memories."""

    content: str
    terms: str  # space-separated search terms (ireneo.analyze)
    tags: tuple[str, ...]
    importance: int  # index in IMPORTANCE_LEVELS
    source: str | None


@dataclass(frozen=True)
class MemoryRecord:
    memory_id: str
    content: str
    terms: str
    tags: tuple[str, ...]
    importance: int
    source: str | None
    created_at: datetime
    updated_at: datetime
    updates: int  # times a near-duplicate updated it
    uses: int  # times it was returned by a search that counted uses

    @property
    def importance_name(self) -> str:
        return IMPORTANCE_LEVELS[self.importance]


@dataclass(frozen=True)
class MemoryWrite:
    memory_id: str
    created: bool  # False: a near-duplicate was updated
    updates: int


@dataclass(frozen=True)
class StoredMemory:
    """A stored memory as a write reads it: a near-duplicate the new one may update."""

    row: int  # the store's key of its row
    memory_id: str
    terms: str
    tags: tuple[str, ...]
    importance: int
    source: str | None
    updates: int


def digit_terms(terms: str) -> set[str]:
    """Terms holding digits (numbers, identifiers): what tells two near-identical memories apart.

    Embeddings hardly tell "ticket MT-2056 on EX-388" from "ticket MT-5985 on EX-301" (cosine
    0.95): a near-duplicate must also have the same such terms.
    """
    return {term for term in terms.split() if any(c.isdigit() for c in term)}


def near_duplicate(draft: MemoryDraft, nearest: list[StoredMemory]) -> StoredMemory | None:
    """The first of `nearest` (near enough, nearest first) whose terms holding digits are the
    draft's, or None: the memory a new one updates instead of being added beside it."""
    keys = digit_terms(draft.terms)
    return next((stored for stored in nearest if digit_terms(stored.terms) == keys), None)


def merged(stored: StoredMemory, draft: MemoryDraft) -> MemoryDraft:
    """What a near-duplicate holds once `draft` updates it: the draft's content and terms, the
    tags of both (the stored ones first), the higher importance, the draft's source if it has
    one (else the stored one)."""
    return MemoryDraft(
        draft.content,
        draft.terms,
        tuple(dict.fromkeys([*stored.tags, *draft.tags])),
        max(stored.importance, draft.importance),
        draft.source if draft.source is not None else stored.source,
    )


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a search may return.

    tags: any of these tags; a memory without tags never matches (fails closed). None: no filter.
    min_importance: index in IMPORTANCE_LEVELS. low_updated_after: hide low-importance memories
    last updated before this instant (expired, even before the expiry job has removed them).
    """

    tags: tuple[str, ...] | None = None
    min_importance: int | None = None
    low_updated_after: datetime | None = None
