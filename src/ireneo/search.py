"""Hybrid recall: lexical and dense candidates, fused, grouped into turns, with neighbours.

Each side proposes its best passages; every candidate then gets both scores exactly (the store
scores a given passage on either side), so a passage one side ranked 41st is not scored as absent.
Scores are normalised per query (BM25 by its best, cosine min-max over the candidates) and mixed
with a fixed weight. Identifier queries are carried by BM25, paraphrases by the dense side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ireneo.analyze import query_terms
from ireneo.model import Hit, Turn
from ireneo.store import Filters, Store

CANDIDATES = 40


class Reranker(Protocol):
    """An optional last stage: reorders the fused hits (for example a cross-encoder)."""

    def rerank(self, query: str, hits: list[Hit]) -> list[Hit]: ...


@dataclass(frozen=True)
class Fusion:
    """How the two rankings are combined. `lexical_weight` in [0, 1]; dense gets the rest."""

    lexical_weight: float = 0.5
    candidates: int = CANDIDATES


def recall(
    store: Store,
    embed_query: Callable[[str], np.ndarray] | None,
    query: str,
    k: int = 8,
    filters: Filters | None = None,
    radius: int = 1,
    fusion: Fusion | None = None,
    reranker: Reranker | None = None,
) -> list[Hit]:
    """The `k` best turns for `query`, best first. `embed_query` None means lexical only."""
    pool = k * 4 if reranker else k
    scores = passage_scores(store, embed_query, query, filters or Filters(), fusion or Fusion())
    hits = rank(store, scores, pool, radius)
    if reranker:
        hits = reranker.rerank(query, hits)
    return hits[:k]


def passage_scores(
    store: Store,
    embed_query: Callable[[str], np.ndarray] | None,
    query: str,
    filters: Filters,
    fusion: Fusion,
) -> dict[int, float]:
    terms = query_terms(query)
    lexical = dict(store.lexical_search(terms, fusion.candidates, filters))
    dense: dict[int, float] = {}
    if embed_query is not None:
        vector = embed_query(query)
        dense = dict(store.dense_search(vector, fusion.candidates, filters))
        # Score every candidate on both sides, not only where it was in the top list.
        dense.update(store.dense_scores(vector, [pid for pid in lexical if pid not in dense]))
    lexical.update(store.lexical_scores(terms, [pid for pid in dense if pid not in lexical]))
    return fuse(lexical, dense, fusion.lexical_weight)


def fuse(
    lexical: dict[int, float], dense: dict[int, float], lexical_weight: float
) -> dict[int, float]:
    """Convex mix of BM25 scaled by its best and cosine min-max scaled over the candidates."""
    candidates = lexical.keys() | dense.keys()
    if not dense:
        lexical_weight = 1.0
    if not lexical:
        lexical_weight = 0.0
    best_lexical = max(lexical.values(), default=0.0) or 1.0
    low, high = min(dense.values(), default=0.0), max(dense.values(), default=0.0)
    spread = (high - low) or 1.0
    fused = {}
    for pid in candidates:
        lex = lexical.get(pid, 0.0) / best_lexical
        den = (dense[pid] - low) / spread if pid in dense else 0.0
        fused[pid] = lexical_weight * lex + (1 - lexical_weight) * den
    return fused


def rank(store: Store, scores: dict[int, float], k: int, radius: int = 1) -> list[Hit]:
    """Best passage per turn, best turns first; a turn already shown beside a better hit is skipped."""
    turns = store.passage_turns(list(scores))
    best: dict[tuple[str, str], tuple[float, Turn]] = {}
    for pid, score in scores.items():
        turn = turns.get(pid)
        if turn is None:  # forgotten between the two queries
            continue
        key = (turn.session_id, turn.turn_uuid)
        if key not in best or score > best[key][0]:
            best[key] = (score, turn)
    ranked = sorted(best.values(), key=lambda st: (-st[0], st[1].session_id, st[1].seq))
    hits: list[Hit] = []
    shown: set[tuple[str, int]] = set()
    for score, turn in ranked:
        if len(hits) == k:
            break
        if (turn.session_id, turn.seq) in shown:
            continue
        context = store.neighbours(turn.session_id, turn.seq, radius) if radius else []
        shown.add((turn.session_id, turn.seq))
        shown.update((turn.session_id, c.seq) for c in context)
        hits.append(
            Hit(
                turn.session_id,
                turn.turn_uuid,
                turn.seq,
                turn.ts,
                turn.role,
                turn.text,
                score,
                context,
            )
        )
    return hits
