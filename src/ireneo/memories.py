"""Explicit memories: short facts an agent chose to keep, beside the verbatim conversations.

    from ireneo import Memory
    m = Memory("path/to/home")
    saved = m.memories.store("Rahul's UPI payment failed; paying by card worked.",
                             tags=["billing"], importance="high")
    hits = m.memories.search("payment not going through", limit=5, tags=["billing"])
    m.memories.delete(saved.memory_id)
    m.memories.expire()                  # low-importance memories past their age
    m.memories.recall("payment", k=8)    # conversations and memories; Hit.kind says which

The rules (docs/memories.md):

- Storing embeds the memory at once (the mean of its pieces' vectors). A memory whose cosine with
  a stored one of the same memory (the same user) is at least `MemoryPolicy.dedup` updates that
  one instead: new text and vector, tags united, the higher importance, `created_at` kept,
  `updates` counted.
- Search is conversation recall's hybrid, on the memories' own index and statistics: candidates
  from FTS5 (the query's rarer terms, `search.selective`) and from the vectors; each candidate is
  scored with BM25 from term statistics (`search._bm25`, `search._idf`) and its cosine, mixed as
  recall mixes them (`search._mix`, `Fusion.lexical_weight`). That relevance is then multiplied by
  the policy's factors: recency (half-life), importance, use.
- Filters apply before ranking. A tag filter admits a memory holding any of its tags; a memory
  with no tags never matches one (fails closed). Expired memories are never returned, even
  before `expire()` removes them.
- Memories live in tables of their own (store migration 2), so `Memory.recall` over
  conversations is the same with or without them.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from ireneo import search
from ireneo.analyze import query_terms, terms
from ireneo.config import MemoryPolicy as MemoryPolicy  # the policy is a setting
from ireneo.errors import IreneoError, NotFound
from ireneo.index import remember_hangul
from ireneo.model import Hit, format_ts
from ireneo.privacy import redact
from ireneo.render import cut_block, inline, quote
from ireneo.store.base import (
    BM25_B,
    IMPORTANCE_LEVELS,
    MemoryDraft,
    MemoryFilter,
    MemoryRecord,
    MemoryWrite,
    TermStats,
)

if TYPE_CHECKING:
    from ireneo.embed import Embedder
    from ireneo.memory import Memory

MAX_CONTENT_CHARS = 8000
MAX_TAGS = 20
MAX_TAG_CHARS = 64
MAX_RAW_TAG_CHARS = 1024  # before trimming: longer is refused without reading it
MAX_SOURCE_CHARS = 256
MAX_LIMIT = 100
EMBED_BATCH = 64

Clock = Callable[[], datetime]


class InvalidMemory(IreneoError, ValueError):
    """A memory or a search that ireneo refuses as given; the message says what to change."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def policy_factor(policy: MemoryPolicy, record: MemoryRecord, now: datetime) -> float:
    """What relevance is multiplied by: importance, recency and use."""
    value = policy.importance_weights[record.importance]
    if policy.half_life_days > 0:
        age = max(0.0, (now - record.updated_at).total_seconds() / 86400)
        value *= 0.5 ** (age / policy.half_life_days)
    if policy.use_weight > 0:
        value *= 1 + policy.use_weight * math.log2(1 + record.uses)
    return value


@dataclass(frozen=True)
class MemoryHit:
    """One memory found by a search: its record, its final score and its relevance alone."""

    memory: MemoryRecord
    score: float
    relevance: float

    def as_hit(self) -> Hit:
        """The memory as a recall hit (`kind` "memory"; its id stands for the session id)."""
        m = self.memory
        return Hit(
            m.memory_id, m.memory_id, 0, m.updated_at, "memory", m.content, self.score, [], "memory"
        )


class ExplicitMemories:
    """The explicit memories of one `Memory` (one user), with a policy (default: the memory's
    settings') and a clock."""

    def __init__(
        self,
        memory: Memory,
        *,
        policy: MemoryPolicy | None = None,
        now: Clock | None = None,
    ):
        self.memory = memory
        self._db = memory.store  # the memory's Store
        self.policy = policy or memory.settings.memory_policy
        self.now = now or utc_now

    # -- writes ---------------------------------------------------------------------------
    def store(
        self,
        content: str,
        tags: Iterable[str] = (),
        importance: str = "medium",
        source: str | None = None,
    ) -> MemoryWrite:
        """Keep `content`; a near-duplicate of a stored memory updates that one (see the module)."""
        content = _content(content)
        if self.memory.redact:
            content = redact(content)
        draft = MemoryDraft(
            content=content,
            terms=" ".join(terms(content, remember_hangul(self._db))),
            tags=normalise_tags(tags),
            importance=importance_index(importance),
            source=_source(source),
        )
        embedder = self.memory.settle_model([content])  # a new memory's model, by its language
        self._embed_missing(embedder)
        vector = _vector(embedder, draft.content)
        return self._db.memory_write(draft, vector, embedder.name, self.policy.dedup, self.now())

    def delete(self, memory_id: str) -> bool:
        """Forget one memory; False when this memory holds none with that id."""
        return self._db.memory_delete(memory_id.strip())

    def expire(self) -> int:
        """Remove low-importance memories not updated for `low_max_age_days`; how many."""
        cutoff = self._expiry_cutoff()
        return 0 if cutoff is None else self._db.memory_expire(cutoff)

    # -- reads --------------------------------------------------------------------------------
    def get(self, memory_id: str) -> MemoryRecord:
        found = self._db.memory_records([memory_id.strip()])
        if not found:
            raise NotFound(f"no memory {memory_id!r} (see: search_memories)")
        return found[0]

    def all(self) -> list[MemoryRecord]:
        """Every memory, most recently updated first (expired ones not yet removed included)."""
        return self._db.memory_records()

    def count(self) -> int:
        return self._db.memory_count()

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        tags: Iterable[str] | None = None,
        min_importance: str | None = None,
        count_use: bool = True,
    ) -> list[MemoryHit]:
        """The `limit` best memories for `query`, best first (see the module for how)."""
        limit = max(1, min(int(limit), MAX_LIMIT))
        wanted = normalise_tags(tags) if tags is not None else ()
        filters = MemoryFilter(
            tags=wanted or None,
            min_importance=None if min_importance is None else importance_index(min_importance),
            low_updated_after=self._expiry_cutoff(),
        )
        if not query.strip() or self._db.memory_count() == 0:
            return []
        words = query_terms(query, hangul=self.memory.hangul)
        stats = self._db.memory_term_stats(words) if words else TermStats(0, 0.0, {})
        pool = max(self.memory.fusion.candidates, 2 * limit)
        lexical = self._db.memory_lexical_search(search.selective(words, stats), pool, filters)
        candidates = {memory_id for memory_id, _ in lexical}

        embedder = self._embedder()
        self._embed_missing(embedder)
        ids, matrix = self._db.memory_vectors(embedder.name, filters)
        cosines: dict[str, float] = {}
        if ids:
            scores = matrix @ embedder.embed_query(query)
            cosines = dict(zip(ids, scores.tolist(), strict=True))
            candidates.update(ids[i] for i in np.argsort(-scores, kind="stable")[:pool])
        if not candidates:
            return []

        records = self._db.memory_records(sorted(candidates))
        relevance = self._relevance(records, words, stats, cosines)
        now = self.now()
        hits = [
            MemoryHit(record, float(r) * policy_factor(self.policy, record, now), float(r))
            for record, r in zip(records, relevance, strict=True)
        ]
        hits.sort(key=lambda h: (-h.score, -h.memory.updated_at.timestamp(), h.memory.memory_id))
        hits = hits[:limit]
        if count_use:
            self._db.memory_touch([h.memory.memory_id for h in hits], now)
        return hits

    def recall(self, query: str, k: int = 8, *, memories_k: int | None = None) -> list[Hit]:
        """Conversations and memories for `query`, each hit marked by `kind`.

        The conversation hits are exactly `Memory.recall(query, k)`, in its order; up to
        `memories_k` (default `k`) memory hits are merged in by score. A memory never pushes a
        conversation out.
        """
        conversations = self.memory.recall(query, k)
        found = [hit.as_hit() for hit in self.search(query, memories_k or k)]
        return sorted([*conversations, *found], key=lambda hit: -hit.score)

    # -- internals ----------------------------------------------------------------------------
    def _embedder(self) -> Embedder:
        """The memory's model: a search records none (the first turn or memory stored does)."""
        return self.memory.embedder

    def _embed_missing(self, embedder: Embedder) -> None:
        """Vectors for memories that have none of this model (after `ireneo reembed`)."""
        while batch := self._db.memories_unembedded(embedder.name, EMBED_BATCH):
            vectors = np.vstack([_vector(embedder, content) for _, content in batch])
            self._db.memory_put_vectors([mid for mid, _ in batch], vectors, embedder.name)

    def _expiry_cutoff(self) -> datetime | None:
        days = self.policy.low_max_age_days
        return self.now() - timedelta(days=days) if days > 0 else None

    def _relevance(
        self,
        records: list[MemoryRecord],
        words: list[str],
        stats: TermStats,
        cosines: dict[str, float],
    ) -> np.ndarray:
        """Conversation recall's fusion, with each memory as one document."""
        index = {word: i for i, word in enumerate(words)}
        counts = np.zeros((len(records), len(words)))
        lengths = np.zeros(len(records))
        for row, record in enumerate(records):
            found = record.terms.split()
            lengths[row] = len(found)
            for term, count in Counter(found).items():
                if term in index:
                    counts[row, index[term]] = count
        idf = np.array([search._idf(stats, word) for word in words])
        # Okapi's b: `Fusion.length_norm` was measured on conversation windows, not on notes
        bm25 = search._bm25(counts, lengths, idf, stats.average_length or 1.0, BM25_B)
        cosine = np.array([cosines.get(r.memory_id, math.nan) for r in records])
        return search._mix(bm25, cosine, self.memory.fusion.lexical_weight)


# -- checks -----------------------------------------------------------------------------------------


def importance_index(value: object) -> int:
    name = str(value)[:16].strip().lower()
    if name not in IMPORTANCE_LEVELS:
        raise InvalidMemory(f"importance must be low, medium or high, not {name!r}")
    return IMPORTANCE_LEVELS.index(name)


def normalise_tags(tags: Iterable[str] | None) -> tuple[str, ...]:
    """Tags trimmed and lower-cased, blanks dropped, each once, in the order given.

    At most MAX_TAGS are read from `tags`: a longer list is refused before any tag is looked at,
    so the work never grows with what a caller sends.
    """
    if tags is None:
        return ()
    if isinstance(tags, (str, bytes)) or not isinstance(tags, Iterable):
        raise InvalidMemory("tags must be a list of strings, e.g. ['billing']")
    given = list(itertools.islice(tags, MAX_TAGS + 1))
    if len(given) > MAX_TAGS:
        raise InvalidMemory(f"tags: at most {MAX_TAGS} tags")
    out: dict[str, None] = {}
    for tag in given:
        if not isinstance(tag, str):
            raise InvalidMemory("tags must be a list of strings, e.g. ['billing']")
        if len(tag) > MAX_RAW_TAG_CHARS:
            raise InvalidMemory(f"tags: a tag holds at most {MAX_TAG_CHARS} characters")
        tag = " ".join(tag.split()).lower()
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidMemory(f"tags: a tag holds at most {MAX_TAG_CHARS} characters")
        if tag:
            out[tag] = None
    return tuple(out)


def check_memory(
    content: object, tags: Iterable[str] | None, importance: object, source: object
) -> None:
    """Refuse, with InvalidMemory, what `ExplicitMemories.store` would refuse; cheap, for callers that
    check before they queue (the MCP tool)."""
    _content(content)
    normalise_tags(tags)
    importance_index(importance)
    _source(source)


def _content(content: object) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidMemory("the content is empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise InvalidMemory(
            f"content holds at most {MAX_CONTENT_CHARS} characters; keep the key fact only"
        )
    return content.strip()


def _source(source: object) -> str | None:
    if source is None:
        return None
    if not isinstance(source, str):
        raise InvalidMemory("source must be a string")
    if len(source) > MAX_SOURCE_CHARS:
        raise InvalidMemory(f"source holds at most {MAX_SOURCE_CHARS} characters")
    return source.strip() or None


def _vector(embedder: Embedder, content: str) -> np.ndarray:
    """One vector per memory: the normalised mean of its pieces' vectors."""
    pieces = embedder.split(content) or [content]
    mean = embedder.embed_passages(pieces).mean(axis=0)
    return (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32)


# -- text -------------------------------------------------------------------------------------------

STORED = "Stored memory {id}."
UPDATED = (
    "Updated memory {id}: it nearly repeated that earlier memory, so the text was replaced "
    "(updates: {updates})."
)


def describe_write(written: MemoryWrite) -> str:
    """What storing did, in one sentence (the MCP tool's answer and the CLI's line)."""
    if written.created:
        return STORED.format(id=written.memory_id)
    return UPDATED.format(id=written.memory_id, updates=written.updates)


def render_memory(number: int, record: MemoryRecord) -> str:
    """`[N] ID · DATE · IMPORTANCE · tags: A, B` and the text, quoted (docs/memories.md)."""
    date = f"{record.created_at:%Y-%m-%d}"
    if record.updated_at.date() != record.created_at.date():
        date += f" (updated {record.updated_at:%Y-%m-%d})"
    tags = "tags: " + inline(", ".join(record.tags)) if record.tags else "no tags"
    header = f"[{number}] {record.memory_id} · {date} · {record.importance_name} · {tags}"
    return header + "\n" + quote(record.content)


def render_memory_hits(hits: list[MemoryHit], *, max_chars: int | None = None) -> str:
    """Memories best first, separated by a blank line; whole ones up to `max_chars`."""
    blocks = [render_memory(i, hit.memory) for i, hit in enumerate(hits, 1)]
    text = "\n\n".join(blocks)
    if max_chars is None or len(text) <= max_chars:
        return text
    kept: list[str] = []
    for block in blocks:
        if len("\n\n".join([*kept, block, _cut_line(len(blocks) - len(kept) - 1)])) > max_chars:
            break
        kept.append(block)
    if not kept:
        room = max_chars - len(_cut_line(len(blocks) - 1)) - 6
        kept.append(cut_block(blocks[0], room))
    return "\n\n".join(part for part in [*kept, _cut_line(len(blocks) - len(kept))] if part)


def _cut_line(count: int) -> str:
    if not count:
        return ""
    return f"[… {count} more memor{'ies' if count > 1 else 'y'} cut]"


def memory_to_dict(record: MemoryRecord) -> dict:
    """A memory as JSON (the audit route, `--json`)."""
    return {
        "id": record.memory_id,
        "created": format_ts(record.created_at),
        "updated": format_ts(record.updated_at),
        "tags": list(record.tags),
        "importance": record.importance_name,
        "source": record.source,
        "text": record.content,
        "updates": record.updates,
        "uses": record.uses,
    }
