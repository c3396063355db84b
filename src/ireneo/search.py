"""Hybrid recall: lexical and dense candidates, scored as the windows a person will read.

1. Candidates: the passages BM25 ranks best for the query's rarer terms, and for each name it
   mentions (an identifier, "Carrow Depot 8"), and the passages nearest to the query vector
   (exact cosine), all from the store's copies in RAM (store/layout.py, store/vectors.py).
   A query made only of identifiers the memory holds ("MT-4471") has no meaning to embed:
   its candidates are the passages that hold one of them, and only the windows that write one
   are shown.
2. Windows: a hit is shown as a turn with its neighbours (seq ± radius), so that is what gets
   scored. Every turn near a candidate becomes a possible centre; its window's BM25 is computed
   here from the store's term statistics, counting each term the window holds once, and its
   dense score is the best cosine inside it.
   A fact said across two turns ("QC checked the caps from CV-425" … "7.84% rejects") is then
   found as one passage, and the window holding the answer outranks a lone mention.
   BM25 counts the query's terms and its adjacent pairs, so "Norwood Works 11" outranks
   "Norwood" here and "Works 11" there.
3. Relevance: a query the memory holds nothing about gets no hits at all, and one it answers
   gets its k best windows (ireneo.relevance): "nothing relevant" is decided once per query.
4. Fusion: BM25 scaled by the best window, cosine min-max scaled over the windows, mixed with
   a fixed weight; plus a share for the names the query mentions that the window holds whole,
   a rare name counting for more than a common one.
   Near-identical facts about different things read alike to both BM25 and the model ("the
   caps from the mixer at Carrow Depot 8" against "...at Carrow Terminal 8"); the name tells
   them apart. A query typed without capitals takes its names from how the memory writes
   them ("carrow depot 8" is the "Carrow Depot 8" of the candidate turns). A name that is one
   of the memory's speakers (a turn's role, "Caroline") counts in every turn they speak.
   A day, month or year the query names ("on 8 May, 2023", ireneo.periods) adds a share to
   the windows said then, whose best passages are candidates too: the tool takes only a
   query, so a question about a time can say it only in words. The meaning side reads the
   query without the speakers' names ("What did Melanie paint?" as "What did paint?"): turns
   are embedded without their speaker, and the name would draw the turns that greet them.
5. Hits: best windows first; in each, the turn that matched best on its own is the hit, shown
   with its neighbours and the rest of the window. A window whose last turn asks a question
   also shows the reply: a fact is often said in answer ("What did the numbers look like?" /
   "6.03% rejects"), and a hit that stopped at the question would leave the answer unseen.
6. Shown: past ranking, an answer with a budget (the MCP tool's characters) shows the next
   hits and more of each hit's conversation while it fits (`widen`), whichever is worth more
   by score first: evidence is often a turn or two beyond the window, or in the next hits,
   and short turns leave the budget mostly unused.
"""

from __future__ import annotations

import functools
import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import groupby, islice, pairwise
from operator import attrgetter
from typing import NamedTuple, Protocol

import numpy as np

from ireneo import periods, relevance
from ireneo.analyze import (
    Hangul,
    identifier_parts,
    identifiers_only,
    names,
    query_terms,
    runs_of_capitals,
    terms,
    written_names,
)
from ireneo.model import Hit, Turn
from ireneo.store import Filters, Store, TermStats
from ireneo.store.base import BM25_K1
from ireneo.store.layout import PassageLayout
from ireneo.workers import pool

CANDIDATES = 40
CANDIDATE_SHARE = 0.05  # lexical candidates: the rarest terms' postings, up to 5% of passages
# The best windows whose text is read for a name the query mentions written with a number after
# it, which names another place ("Riverside Plant 2" is not the "Riverside Plant" asked about).
NAME_CHECK_DEPTH = 10
# How many turns beyond a hit's context `widen` reads on each side for it to grow into: a bound
# on the work (a turn takes at least a line and a quote of the answer).
REACH = 12
# How many further hits' sides `widen` reads at once, the one it shows and the next ones it may:
# one round trip for a few (a PostgreSQL read is one), a few more turns read (docs/scaling.md).
AHEAD = 4
# How many hits past the k asked for `widen` may show while they fit: a bound on the work.
FURTHER = 12
# BM25's share against the dense side's, for a model that reads better than the default's
# (docs/ranking.md: measured per model, on LoCoMo and every generated family and language).
LEXICAL_WEIGHTS = {"e5-small-q8": 0.65}
# What a turn of a hit's growing context is worth less, for each turn it lies from its hit, in
# the hits' fused scores (`widen`: a further hit is worth its score).
GROWTH_COST = 0.1
# A flat head: the hit at index FLAT_RANK scores at least FLAT_SHARE of the best's. Evidence is
# then spread over many windows, and `widen` shows further hits as their own turn only.
FLAT_RANK = 5
FLAT_SHARE = 0.9
# The turns whose written names a memory's layout keeps for names_in_memory: a bound on RAM.
WRITTEN_HELD = 16_384


class Score(NamedTuple):
    window: float  # the window centred on a turn: what ranks hits
    own: float  # the turn alone: which turn of a window is marked as the hit


class Reranker(Protocol):
    """An optional last stage: reorders the fused hits (see ireneo.rerank)."""

    depth: int  # how many of the best fused hits it reorders

    def rerank(self, query: str, hits: list[Hit]) -> list[Hit]: ...


@dataclass(frozen=True)
class Fusion:
    """How rankings are combined; each weight in [0, 1]. What each rule buys, measured on
    LoCoMo and on the generated histories, is in docs/ranking.md.

    lexical_weight: BM25's share against the dense side's (per model: `for_model`).
    pair_weight: two query terms found side by side ("norwood works") count as one more term,
    at this share of the rarer one's IDF, so a phrase beats its words scattered over a turn.
    name_weight: added to a window that holds a name the query mentions (analyze.names: an
    identifier such as MT-4471, a capitalised run such as "Carrow Depot 8") whole: naming a
    thing asks about that one thing. Shared by the names' rarity, each share scaled by how rare
    the name is in this memory (`_name_shares`). Each name also brings its own candidates.
    length_norm: BM25's b for windows: how much a longer window is discounted.
    speakers: a name the query mentions counts in the turns its person speaks (a turn's role).
    time_weight: added to a window said in a day, month or year the query names
    (ireneo.periods), whose best passages by BM25 are candidates too.
    lift: the embedding model's calibration of when the memory answers a query at all
    (ireneo.relevance; None: words alone).
    unnamed_meaning: the meaning side ranks by the query without the names of the memory's
    speakers: a turn is embedded without its speaker, so a speaker's name in the query draws
    only the turns that greet them. Whether the memory answers at all is still judged on the
    query as asked.
    """

    lexical_weight: float = 0.7
    pair_weight: float = 0.5
    name_weight: float = 0.4
    length_norm: float = 0.4
    speakers: bool = True
    time_weight: float = 0.4
    lift: relevance.Lift | None = None
    candidates: int = CANDIDATES
    unnamed_meaning: bool = True

    @classmethod
    def for_model(cls, model: str | None) -> Fusion:
        """The fusion for a memory embedded by `model`: its relevance calibration, and its
        lexical weight where one was measured for it (LEXICAL_WEIGHTS)."""
        weight = LEXICAL_WEIGHTS.get(model or "", cls.lexical_weight)
        return cls(lexical_weight=weight, lift=relevance.LIFTS.get(model) if model else None)


def recall(
    store: Store,
    embed_query: Callable[[str], np.ndarray] | None,
    query: str,
    k: int = 8,
    filters: Filters | None = None,
    radius: int = 1,
    fusion: Fusion | None = None,
    reranker: Reranker | None = None,
    hangul: Hangul = "morphemes",
    further: int = 0,
    reads: Reads | None = None,
) -> list[Hit]:
    """The `k` best turns for `query`, best first, then up to `further` next ones (the k are
    the same either way). `embed_query` None means lexical only; `hangul` is how the memory
    reads Korean (index.hangul_of); `reads`, the recall's turns read (to pass on to `widen`)."""
    filters, fusion = filters or Filters(), fusion or Fusion()
    reads = reads or Reads(store)
    pool = max(k, reranker.depth) if reranker else k
    scores = window_scores(store, embed_query, query, filters, radius, fusion, hangul, reads)
    hits = build_hits(
        store,
        scores,
        pool + further,
        radius,
        include_echoes=filters.include_echoes,
        reads=reads,
        sides=pool if further else 0,  # widen follows, and reads the first hits' sides
    )
    if reranker:
        hits = reranker.rerank(query, hits[:pool]) + hits[pool:]
    return hits[: k + further]


def window_scores(
    store: Store,
    embed_query: Callable[[str], np.ndarray] | None,
    query: str,
    filters: Filters,
    radius: int,
    fusion: Fusion,
    hangul: Hangul = "morphemes",
    reads: Reads | None = None,
) -> dict[tuple[str, int], Score]:
    """The fused scores of every candidate window, keyed by its centre `(session_id, seq)`;
    none when the memory holds nothing about the query (ireneo.relevance)."""
    words = query_terms(query, hangul=hangul)
    content = relevance.content(words, hangul)
    if not content.any():
        return {}  # "what is the", "?!": no content, no search
    stats = None
    identifiers: list[str] = []  # if any, a window shown writes one of them (_writing)
    parts: list[list[str]] = []  # each identifier's parts (analyze.identifier_parts)
    if embed_query is not None and (joined := identifiers_only(query)):
        # "MT-4471": where the memory holds every identifier asked, keywords alone answer; the
        # vector of a string of letters and digits means nothing, and finding its nearest
        # passages costs most of a recall. The windows shown are those that write one of the
        # identifiers, not those that share a part of one ("MT-5120").
        # (docs/ranking.md, "A query made of identifiers")
        stats = store.term_stats(words)
        if all(stats.document_frequency.get(term) for term in joined):
            embed_query = None
            identifiers, parts = joined, identifier_parts(query)
    # The query's vector is computed, and the dense candidates found, on another core while
    # the keyword candidates are found and their neighbourhoods counted here (onnxruntime
    # releases the GIL): the embedding takes ~3 ms, this side ~2. In a fresh process the model
    # loads there (~0.1 s) while both copies are read here, so that it then only scans. With
    # nothing to embed, no thread is woken (a hand-off costs two context switches).
    dense = None
    if embed_query is not None:
        dense = pool("query").submit(_dense_seeds, store, embed_query, query, filters, fusion)
    # the statistics before the copies: PostgreSQL reads the copies' counters with them
    if stats is None:
        stats = store.term_stats(words) if words else TermStats(0, 0.0, {})
    if embed_query is not None and store.vectors_unread():
        store.vectors()
    layout = store.layout()
    # the meaning side ranks by the query without its speakers' names, embedded beside it
    unnamed_text = _without_speakers(query, layout.names.names) if fusion.unnamed_meaning else query
    unnamed_job = None
    if embed_query is not None and unnamed_text != query:
        unnamed_job = pool("query").submit(
            _nearest, store, embed_query, unnamed_text, filters, fusion
        )
    sequence = terms(query, hangul)  # in order, with repeats: for pairs and names
    rarer = _seed_terms(identifiers, parts, stats) if identifiers else selective(words, stats)
    seeds = keyword_candidates(layout, stats, rarer, fusion.candidates, filters)
    times = periods.periods(query) if fusion.time_weight else []
    for start, end in times:  # the best passages of each time the query names
        within = _within(filters, start, end)
        if within is not None:
            found = keyword_candidates(layout, stats, words, fusion.candidates, within)
            seeds = np.union1d(seeds, found)
    named = known_names(query, stats, hangul) if fusion.name_weight else []
    # a query with no capitals may have left them out; one without cased letters (Korean) not
    if fusion.name_weight and not written_names(query) and any(c.islower() for c in query):
        named += names_in_memory(
            store, layout, query, sequence, rarer, seeds, filters, hangul, reads
        )
    lexical = LexicalQuery.build(
        sequence, words, content, named, stats, fusion, layout, query, hangul
    )
    # the passages that hold a name, whatever the question's other words
    holding = [layout.holding(layout.term_ids(name), fusion.candidates, filters) for name in named]
    if holding:  # as np.union1d with each, in one
        seeds = np.unique(np.concatenate([seeds, *holding]))
    near = layout.visible(layout.near(seeds, 2 * radius), filters)
    counts = _counts(layout, near, lexical)
    vector, dense_found, median = (None, [], math.nan) if dense is None else dense.result()
    unnamed = vector
    if unnamed_job is not None:
        unnamed, dense_found = unnamed_job.result()
    # a passage embedded but not yet in this layout (stored meanwhile) waits for the next query
    dense_seeds = layout.positions(dense_found)
    # both ascending and each once (layout.near), so as they are
    more = np.setdiff1d(
        layout.visible(layout.near(dense_seeds, 2 * radius), filters), near, assume_unique=True
    )
    if len(more):
        near = np.concatenate([near, more])
        counts = np.vstack([counts, _counts(layout, more, lexical)])
    seeds = np.union1d(seeds, dense_seeds)
    if not len(seeds):
        return {}
    cosines = (
        store.dense_scores(unnamed, layout.ids[near])
        if unnamed is not None
        else np.full(len(near), math.nan)
    )
    asked = cosines
    if unnamed is not vector:
        asked = store.dense_scores(vector, layout.ids[near])
    turns = _turn_features(layout, near, counts, cosines, seeds, filters, asked)
    centres = _centres(turns, radius)
    if fusion.speakers:
        _add_speakers(turns, layout, lexical, hangul)
    held = _writing(layout, lexical, identifiers, parts) if identifiers else []
    keys, window, own = _fuse_windows(turns, centres, radius, stats, lexical, fusion, median, held)
    if times and len(keys):
        spoken = turns.ts[np.searchsorted(turns.keys, keys)]
        window = window + fusion.time_weight * _in_times(spoken, times)
    if fusion.name_weight and lexical.names:
        unnumbered = [name.terms for name in lexical.names if _unnumbered(name.terms, sequence)]
        if unnumbered:
            window = _without_numbered_names(
                reads or Reads(store), layout, keys, window, lexical, fusion, radius, unnumbered
            )
    return {
        turn: Score(w, o)
        for turn, w, o in zip(layout.turns(keys), window.tolist(), own.tolist(), strict=True)
    }


def _within(filters: Filters, start: int, end: int) -> Filters | None:
    """`filters` narrowed to [start, end) (seconds, UTC); None when nothing is left."""
    since = datetime.fromtimestamp(start, UTC)
    until = datetime.fromtimestamp(end - 1, UTC)
    if filters.since is not None and filters.since > since:
        since = filters.since
    if filters.until is not None and filters.until < until:
        until = filters.until
    return replace(filters, since=since, until=until) if since <= until else None


def _in_times(ts: np.ndarray, times: list[periods.Period]) -> np.ndarray:
    """1 where a timestamp falls in one of the periods, else 0."""
    inside = np.zeros(len(ts), dtype=bool)
    for start, end in times:
        inside |= (ts >= start) & (ts < end)
    return inside.astype(float)


def keyword_candidates(
    layout: PassageLayout, stats: TermStats, words: list[str], limit: int, filters: Filters
) -> np.ndarray:
    """The `limit` passages that Okapi BM25 ranks best for `words`, as layout positions, best
    first. Recall asks it for the query's rarer words (`selective`); the benchmark's keyword
    baseline for them all."""
    weights = np.array([_idf(stats, word) for word in words])
    return layout.bm25(layout.term_ids(words), weights, stats.average_length, limit, filters)


def _dense_seeds(
    store: Store,
    embed_query: Callable[[str], np.ndarray],
    query: str,
    filters: Filters,
    fusion: Fusion,
) -> tuple[np.ndarray, list[int], float]:
    """The query's vector, the passages nearest to it, and its median cosine over the memory."""
    vector, found = _nearest(store, embed_query, query, filters, fusion)
    return vector, found, store.dense_median(vector)


def _nearest(
    store: Store,
    embed_query: Callable[[str], np.ndarray],
    text: str,
    filters: Filters,
    fusion: Fusion,
) -> tuple[np.ndarray, list[int]]:
    """The vector of `text` as a query, and the passages nearest to it."""
    vector = embed_query(text)
    return vector, [pid for pid, _ in store.dense_search(vector, fusion.candidates, filters)]


def _without_speakers(query: str, roles: list[str]) -> str:
    """The query without the names of the memory's speakers (capitalised roles), unchanged
    when nothing else would be left."""
    text = query
    for role in roles:
        if role[:1].isupper() and role in text:
            text = re.sub(r"\b" + re.escape(role) + r"(?:'s|’s)?\b", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text if re.search(r"\w", text) else query


@dataclass(frozen=True)
class LexicalQuery:
    """What BM25 counts: the query's terms, then its adjacent pairs, each with its weight."""

    term_ids: np.ndarray  # the layout's ids of the terms and pairs counted, ascending
    columns: np.ndarray  # the column of each
    weights: np.ndarray  # per column: IDF, scaled down for pairs
    words: int  # the first `words` columns are terms, the rest pairs
    content: np.ndarray  # per term: a content word (relevance.content), not a stop word
    mass: float  # the content terms' IDF, the words this memory lacks at the rarest's
    passages: int  # in the memory
    names: list[_Name]  # the names the query mentions that the memory holds
    gate: np.ndarray | None = None  # per term: its weight in the content (relevance.weights)
    unread: float = 0.0  # the share of the query its model cannot read (relevance.unread)

    @classmethod
    def build(
        cls,
        sequence: list[str],
        words: list[str],
        content: np.ndarray,
        named: list[list[str]],
        stats: TermStats,
        fusion: Fusion,
        layout: PassageLayout,
        query: str = "",
        hangul: Hangul = "morphemes",
    ) -> LexicalQuery:
        """`sequence`: the query's terms in order (analyze.terms), `words`: its distinct ones,
        `content`: which of them carry content (relevance.content), `query`: as written."""
        known = [w for w in sequence if stats.document_frequency.get(w)]
        pairs = list(dict.fromkeys((a, b) for a, b in pairwise(known) if a != b))
        if not fusion.pair_weight:
            pairs = []
        weights = [_idf(stats, w) for w in words]
        gate = relevance.weights(
            words, weights, content, stats.passages, fusion.lift, query, hangul
        )
        weights += [fusion.pair_weight * max(_idf(stats, w) for w in pair) for pair in pairs]
        ids = layout.term_ids(words) + [
            _pair_id(first, second) for first, second in map(layout.term_ids, pairs)
        ]
        known_ids = {i: column for column, i in enumerate(ids) if i >= 0}
        order = sorted(known_ids)
        return cls(
            np.array(order, dtype=np.int64),
            np.array([known_ids[i] for i in order], dtype=np.int64),
            np.array(weights, dtype=float),
            len(words),
            content,
            float(gate.sum()),
            stats.passages,
            _held_names(named, words, pairs),
            gate,
            relevance.unread(query, fusion.lift),
        )

    def columns_of(self, term_ids: list[int]) -> list[int] | None:
        """The columns counting these term or pair ids; None unless the query counts them all."""
        if not len(self.term_ids):
            return None
        slot, counted = self._slots(np.asarray(term_ids, dtype=np.int64))
        return self.columns[slot].tolist() if counted.all() else None

    def _slots(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each id would sit in `term_ids` (not empty), and whether it is there."""
        slot = np.minimum(np.searchsorted(self.term_ids, ids), len(self.term_ids) - 1)
        return slot, self.term_ids[slot] == ids

    @property
    def content_weights(self) -> np.ndarray:
        """Per term: its IDF if it carries content, else 0."""
        return self.weights[: self.words] * self.content

    def found(self, tokens: np.ndarray, followed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where the query's terms and pairs occur in a run of term ids (`followed`: the next
        id is the same passage's), and their columns: once per occurrence."""
        if not len(self.term_ids) or not len(tokens):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        tokens = tokens.astype(np.int64)
        # a pair is counted only where both of its terms are: most tokens are neither
        terms = self.term_ids[self.term_ids < _PAIR]
        table = np.zeros(int(terms[-1]) + 2 if len(terms) else 1, dtype=bool)
        table[terms] = True  # by term id; the last slot stands for every id past the terms'
        asked = table[np.minimum(tokens, len(table) - 1)]
        words = np.flatnonzero(asked)
        pairs = np.flatnonzero(followed[:-1] & asked[:-1] & asked[1:])
        where = np.concatenate([words, pairs])
        ids = np.concatenate([tokens[words], (tokens[pairs] + 1) * _PAIR + tokens[pairs + 1]])
        slot, hit = self._slots(ids)
        return where[hit], self.columns[slot[hit]]


_PAIR = 2**31  # a pair's id: (first + 1) * _PAIR + second, above every term id


def _seed_terms(joined: list[str], parts: list[list[str]], stats: TermStats) -> list[str]:
    """The terms whose passages are the candidates of a query of identifiers: a window that
    writes one (`_writing`) holds its joined term or all of its parts, so the rarest part is
    enough; the shared prefix of a user's tickets ("MT") would bring every ticket to count."""
    df = stats.document_frequency
    rarest = [min(one, key=lambda term: df.get(term) or math.inf) for one in parts if one]
    return list(dict.fromkeys(joined + rarest))


def _writing(
    layout: PassageLayout, lexical: LexicalQuery, joined: list[str], parts: list[list[str]]
) -> list[list[int]]:
    """What tells that a window writes one of the identifiers asked, as groups of the query's
    columns (a window must hold every column of one group): each identifier's joined term
    ("mt4471"), or its parts side by side as pairs ("MT 4471"). A window holding a part alone
    ("MT-5120") or parts apart ("K-640 ... 194") does not write it."""
    groups = [[term_id] for term_id in layout.term_ids(joined)]
    for terms_of_one in parts:
        ids = layout.term_ids(terms_of_one)
        if len(ids) > 1 and min(ids) >= 0:
            groups.append([_pair_id(first, second) for first, second in pairwise(ids)])
    return [columns for group in groups if (columns := lexical.columns_of(group)) is not None]


def _pair_id(first: int, second: int) -> int:
    return (first + 1) * _PAIR + second if first >= 0 and second >= 0 else -1


def names_in_memory(
    store: Store,
    layout: PassageLayout,
    query: str,
    sequence: list[str],
    rarer: list[str],
    seeds: np.ndarray,
    filters: Filters,
    hangul: Hangul = "morphemes",
    reads: Reads | None = None,
) -> list[list[str]]:
    """The names a query typed without capitals mentions ("caps from carrow depot 8"), as the
    memory writes them ("Carrow Depot 8"): the capitalised runs that the query holds, in the
    same order, in the turns of the keyword candidates (`seeds`) and of the latest passages
    holding one of the query's four rarest terms beside the term after it (the candidates
    alone can all be short turns that share a common word of the question). A run inside a
    longer one found is left out. `sequence` is the query's terms in order; `reads`, the
    recall's turns read."""
    runs = {tuple(sequence[i : j + 1]) for i in range(len(sequence)) for j in range(i, i + 8)}
    holders = [seeds]
    for first, second in dict.fromkeys(pairwise(sequence)):  # a pair said twice: once
        if first in rarer[:4]:
            holders.append(layout.holding(layout.term_ids([first, second]), 4, filters))
    keys = np.unique(layout.turn_keys[np.concatenate(holders).astype(np.int64)])
    # A name worth finding holds one of the query's rarer words: a turn without any of them
    # capitalised is not parsed.
    cues = [
        word[:1].upper() + word[1:]
        for word in re.findall(r"[^\W\d_]+", query)
        if not set(terms(word, hangul)).isdisjoint(rarer)
    ]
    if not cues:
        return []
    found: dict[tuple[str, ...], list[str]] = {}
    if all(cue[:1].isupper() and _LETTERS.fullmatch(cue) for cue in cues):
        marked = ["\n" + cue for cue in cues]
        for written in _written(reads or Reads(store), layout, keys):
            for marks, held in written:
                if any(run in runs for run in held) and any(cue in marks for cue in marked):
                    found.update((run, list(run)) for run in held if run in runs)
    else:  # a cue without a capital to find it by (Hangul): the turns' own text
        found_turns = (reads or Reads(store)).windows(
            [(sid, seq, seq) for sid, seq in layout.turns(keys)]
        )
        for window in found_turns:
            for text in (turn.text for turn in window):
                if any(cue in text for cue in cues):
                    found.update((tuple(n), n) for n in written_names(text) if tuple(n) in runs)
    return [name for run, name in found.items() if not any(_inside(run, o) for o in found)]


# A run of letters: a cue is one (names_in_memory), and is found in a text only inside one.
_LETTERS = re.compile(r"[^\W\d_]+")
# What a turn writes, for names_in_memory: its marks (see _marks) and its written names.
Written = tuple[str, tuple[tuple[str, ...], ...]]


def _written(reads: Reads, layout: PassageLayout, keys: np.ndarray) -> list[tuple[Written, ...]]:
    """What the turns of each key write, one entry a turn in the store's order: read and
    parsed once per turn while the layout (or one it grows into) holds it (`layout.written`),
    since a turn's text never changes but by a deletion, after which the layout is new."""
    held = layout.written
    wanted = keys.tolist()
    missing = [key for key in wanted if key not in held]
    if missing:
        windows = [(sid, seq, seq) for sid, seq in layout.turns(np.array(missing, dtype=np.int64))]
        room = WRITTEN_HELD - len(held)
        read = {}
        for key, window in zip(missing, reads.windows(windows), strict=True):
            texts = [turn.text for turn in window]
            read[key] = tuple((_marks(t), tuple(map(tuple, written_names(t)))) for t in texts)
        if room > 0:
            held.update(islice(read.items(), room))
        return [held[key] if key in held else read[key] for key in wanted]
    return [held[key] for key in wanted]


def _marks(text: str) -> str:
    """Every run of letters of `text` from each of its capitals on, each after a line break:
    a capitalised cue (names_in_memory) is in the text exactly when a line break followed by
    it is in these, since a run of letters can hold it only from a capital on."""
    return "".join(
        "\n" + run[i:]
        for run in _LETTERS.findall(text)
        if not run.islower()
        for i, c in enumerate(run)
        if c.isupper()
    )


def _inside(run: tuple[str, ...], other: tuple[str, ...]) -> bool:
    """True when `run` is a part of `other`, a longer run."""
    return len(run) < len(other) and any(
        other[i : i + len(run)] == run for i in range(len(other) - len(run) + 1)
    )


def known_names(query: str, stats: TermStats, hangul: Hangul = "morphemes") -> list[list[str]]:
    """The names `query` mentions whose every term this memory holds (another can match
    nothing)."""
    found = names(query, hangul)
    return [name for name in found if all(stats.document_frequency.get(t) for t in name)]


class _Name(NamedTuple):
    terms: list[str]
    columns: np.ndarray  # of its terms and adjacent pairs, all of which a window holding it has


def _held_names(
    named: list[list[str]], words: list[str], pairs: list[tuple[str, str]]
) -> list[_Name]:
    """The names whose every term is among the query's columns, with their columns."""
    column = {word: i for i, word in enumerate(words)}
    column.update({pair: len(words) + i for i, pair in enumerate(pairs)})
    held = []
    for name in named:
        if all(term in column for term in name):  # a query past 48 terms may lose one
            parts = name + [pair for pair in pairwise(name) if pair in column]
            held.append(_Name(name, np.array([column[p] for p in parts], dtype=np.int64)))
    return held


def _name_shares(lexical: LexicalQuery, fusion: Fusion) -> np.ndarray:
    """What holding each name adds to a window's score: `name_weight` shared by rarity, each
    share scaled by the name's IDF over the query's rarest word's. A name that many passages
    hold (a participant of every conversation) tells less apart than the question's other
    words, and counts for that much less."""
    rarity = np.array([lexical.weights[name.columns].max() for name in lexical.names])
    rarest = lexical.content_weights.max(initial=0.0)
    scale = np.minimum(1.0, rarity / rarest) if rarest > 0 else np.ones(len(rarity))
    return fusion.name_weight * rarity / rarity.sum() * scale


# A word of a name: Latin or Cyrillic letters (not an identifier's joined term, not Hangul).
_NAME_WORD = re.compile(r"[a-z\u00e0-\u024f\u0430-\u045f]+")


def _unnumbered(name: list[str], asked: list[str]) -> bool:
    """Whether `name` is words that end in a word, and the query (its terms `asked`) writes no
    number after it either: "orchard park works 2" asks about a numbered one."""
    if not all(_NAME_WORD.fullmatch(t) or t.isdigit() for t in name) or name[-1].isdigit():
        return False
    return not any(term.isdigit() for term in _after(name, asked))


def _without_numbered_names(
    reads: Reads,
    layout: PassageLayout,
    keys: np.ndarray,
    window: np.ndarray,
    lexical: LexicalQuery,
    fusion: Fusion,
    radius: int,
    unnumbered: list[list[str]],
) -> np.ndarray:
    """The best windows' scores without the share of a name (of the `unnumbered` the query asks
    about) that their text writes only with a number after it: "the Riverside Plant 2" names
    another site than the "Riverside Plant" a question asks about. The terms cannot tell the
    two apart, since they keep no punctuation ("at the Riverside Plant, 6% failed" holds
    riverside, plant, 6 too)."""
    shares = _name_shares(lexical, fusion)
    best = np.argsort(-window, kind="stable")[:NAME_CHECK_DEPTH]
    texts = reads.windows(
        [(sid, seq - radius, seq + radius) for sid, seq in layout.turns(keys[best])]
    )
    window = window.copy()
    for row, turns in zip(best.tolist(), texts, strict=True):
        runs = _capitals(layout, turns)
        for name, share in zip(lexical.names, shares.tolist(), strict=True):
            if name.terms in unnumbered and _numbered_only(name.terms, runs):
                window[row] -= share
    return window


def _capitals(layout: PassageLayout, turns: list[Turn]) -> list[list[str]]:
    """The capitalised runs of the turns' texts, in order: parsed once per turn while the
    layout (or one it grows into) holds it (`layout.capitals`, as `_written` keeps names). The
    turns of one seq are kept together, and parsed again if their number has changed."""
    held = layout.capitals
    runs: list[list[str]] = []
    for (session_id, seq), same in groupby(turns, key=lambda turn: (turn.session_id, turn.seq)):
        group = list(same)
        key = layout.turn_key(session_id, seq)
        kept = held.get(key) if key is not None else None
        if not isinstance(kept, tuple) or len(kept) != len(group):
            kept = tuple(runs_of_capitals(turn.text) for turn in group)
            if key is not None and len(held) < WRITTEN_HELD:
                held[key] = kept
        for parsed in kept:
            runs += parsed
    return runs


def _numbered_only(name: list[str], runs: list[list[str]]) -> bool:
    """Whether the runs hold `name`, and only ever with a number after it."""
    after = [term for run in runs for term in _after(name, run)]
    return bool(after) and all(term.isdigit() for term in after)


def _after(name: list[str], sequence: list[str]) -> list[str]:
    """The term after each occurrence of `name` in `sequence` ("" at its end)."""
    if name and name[0] not in sequence:  # most runs: at once
        return []
    return [
        sequence[i + len(name)] if i + len(name) < len(sequence) else ""
        for i in range(len(sequence) - len(name) + 1)
        if sequence[i : i + len(name)] == name
    ]


@dataclass
class _Turns:
    """The lexical and dense features of the turns near the candidates, one row per turn."""

    keys: np.ndarray  # the layout's turn keys, ascending
    counts: np.ndarray  # occurrences of each lexical feature
    lengths: np.ndarray  # terms in the turn
    cosines: np.ndarray  # best cosine of its passages; nan when none is embedded yet
    seeded: np.ndarray  # holds a candidate passage
    admitted: np.ndarray  # the time, role and conversation filters admit it as a hit
    roles: np.ndarray  # who spoke it: the layout's role code
    ts: np.ndarray  # when: whole seconds, UTC
    asked: np.ndarray  # best cosine with the query as asked (relevance)


def _counts(layout: PassageLayout, near: np.ndarray, lexical: LexicalQuery) -> np.ndarray:
    """How often each of the query's terms and pairs occurs in each passage at `near`."""
    tokens, owner, followed = layout.tokens_of(near)
    where, columns = lexical.found(tokens, followed)
    width = len(lexical.weights)
    return np.bincount(owner[where] * width + columns, minlength=len(near) * width).reshape(
        len(near), width
    )


def _turn_features(
    layout: PassageLayout,
    near: np.ndarray,
    counts: np.ndarray,
    cosines: np.ndarray,
    seeds: np.ndarray,
    filters: Filters,
    asked: np.ndarray,
) -> _Turns:
    """Per turn of the passages at `near`: their feature counts and lengths summed, their best
    cosine (`cosines`: the passages', nan where none is embedded yet), whether one of them is a
    candidate (`seeds`), whether the filters admit the turn."""
    keys, first, turn_of = np.unique(layout.turn_keys[near], return_index=True, return_inverse=True)
    width = counts.shape[1]
    cells = (turn_of[:, None] * width + np.arange(width)).ravel()
    turn_counts = np.bincount(cells, weights=counts.ravel(), minlength=len(keys) * width)
    lengths = np.bincount(turn_of, weights=layout.lengths[near], minlength=len(keys))
    best = np.full(len(keys), math.nan)
    np.fmax.at(best, turn_of, cosines)  # nan only where no passage is embedded yet
    best_asked = best
    if asked is not cosines:
        best_asked = np.full(len(keys), math.nan)
        np.fmax.at(best_asked, turn_of, asked)
    seeded = np.zeros(len(keys), dtype=bool)
    seeded[turn_of[np.isin(near, seeds)]] = True
    admitted = layout.admitted(near[first], filters)  # the filters are of turns
    roles = layout.roles[near[first]]
    return _Turns(
        keys,
        turn_counts.reshape(len(keys), width),
        lengths,
        best,
        seeded,
        admitted,
        roles,
        layout.ts[near[first]],
        best_asked,
    )


def _centres(turns: _Turns, radius: int) -> np.ndarray:
    """Turn keys within `radius` of a seeded turn that the filters admit as hits, ascending."""
    around = np.unique((turns.keys[turns.seeded][:, None] + np.arange(-radius, radius + 1)).ravel())
    slot = np.minimum(np.searchsorted(turns.keys, around), len(turns.keys) - 1)
    held = turns.keys[slot] == around
    return around[held][turns.admitted[slot[held]]]


def _fuse_windows(
    turns: _Turns,
    centres: np.ndarray,
    radius: int,
    stats: TermStats,
    lexical: LexicalQuery,
    fusion: Fusion,
    median: float,
    held: list[list[int]] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The windows kept, as their centres' turn keys, with their scores and their centres'.
    `held`: groups of the query's term columns; if any, a window is kept only where it holds
    every term of one group (window_scores: a query of identifiers)."""
    if not len(centres):
        return centres, np.zeros(0), np.zeros(0)
    weights = lexical.weights
    average = stats.average_length or 1.0
    # One more row stands for a turn past either end of its conversation: counted as an
    # average turn with no words, so a conversation's first or last window is no shorter.
    absent = len(turns.keys)
    counts = np.vstack([turns.counts, np.zeros((1, len(weights)))])
    lengths = np.append(turns.lengths, average)
    cosines = np.append(turns.cosines, math.nan)
    asked = cosines if turns.asked is turns.cosines else np.append(turns.asked, math.nan)
    wanted = centres[:, None] + np.arange(-radius, radius + 1)
    slot = np.minimum(np.searchsorted(turns.keys, wanted), absent - 1)
    members = np.where(turns.keys[slot] == wanted, slot, absent)
    # A window holds each of the query's terms or not: in a conversation a repeated word is
    # mostly an echo ("Got it: MT-8305 for P-253"), not more evidence (docs/ranking.md).
    window_counts = np.minimum(counts[members].sum(axis=1), 1)
    if held:
        holds = np.any([window_counts[:, group].all(axis=1) for group in held], axis=0)
        centres, members, window_counts = centres[holds], members[holds], window_counts[holds]
        if not len(centres):
            return centres, np.zeros(0), np.zeros(0)
    window_length = lengths[members].sum(axis=1)
    window_cosine = np.fmax.reduce(cosines[members], axis=1)  # nan only where none is embedded
    window_asked = window_cosine if asked is cosines else np.fmax.reduce(asked[members], axis=1)
    if not _answers(window_counts, window_asked, median, lexical, fusion):
        return centres[:0], np.zeros(0), np.zeros(0)
    centre = members[:, radius]
    b = fusion.length_norm
    window = _mix(
        _bm25(window_counts, window_length, weights, average * (2 * radius + 1), b),
        window_cosine,
        fusion.lexical_weight,
    )
    if lexical.names and fusion.name_weight:
        whole = np.array(
            [(window_counts[:, name.columns] > 0).all(axis=1) for name in lexical.names]
        )
        window = window + _name_shares(lexical, fusion) @ whole
    own = _mix(
        _bm25(counts[centre], lengths[centre], weights, average, b),
        cosines[centre],
        fusion.lexical_weight,
    )
    return centres, window, own


def _add_speakers(
    turns: _Turns, layout: PassageLayout, lexical: LexicalQuery, hangul: Hangul
) -> None:
    """Count a name the query mentions in each turn its person speaks, as if the turn wrote
    it: in a chat between people ("Caroline", "Melanie") a question about what Caroline did
    asks about her turns, which rarely write her own name (docs/ranking.md)."""
    if not lexical.names:
        return
    roles = layout.names.names  # roles and block types share these codes
    spoken = {code: _spoken(role, hangul) for code, role in enumerate(roles)}
    for name in lexical.names:
        asked = tuple(name.terms)
        codes = [code for code, said in spoken.items() if said == asked]
        if codes:
            turns.counts[np.ix_(np.isin(turns.roles, codes), name.columns)] += 1


@functools.lru_cache(maxsize=4096)
def _spoken(role: str, hangul: Hangul) -> tuple[str, ...]:
    """A role's terms, as a name the query mentions is compared with them (_add_speakers): the
    same few roles in every recall of a memory, analysed once."""
    return tuple(terms(role, hangul))


def _answers(
    counts: np.ndarray, cosine: np.ndarray, median: float, lexical: LexicalQuery, fusion: Fusion
) -> bool:
    """Whether the memory answers the query at all (ireneo.relevance): some window holds enough
    of its content words, or stands out in meaning, or both in part."""
    gate = lexical.content_weights if lexical.gate is None else lexical.gate
    found = (counts[:, : lexical.words] > 0) @ gate
    return relevance.answers(
        found, lexical.mass, cosine, median, fusion.lift, lexical.passages, lexical.unread
    )


def _idf(stats: TermStats, term: str) -> float:
    n = stats.document_frequency.get(term, 0)
    return math.log(1 + (stats.passages - n + 0.5) / (n + 0.5)) if n else 0.0


def _bm25(
    counts: np.ndarray, lengths: np.ndarray, weights: np.ndarray, average: float, b: float
) -> np.ndarray:
    """Okapi BM25 (k1 1.2, length normalisation b) of each row of feature counts, each feature
    weighted (IDF)."""
    if counts.shape[1] == 0:
        return np.zeros(len(counts))
    norm = BM25_K1 * (1 - b + b * lengths / average)
    return (weights * counts * (BM25_K1 + 1) / (counts + norm[:, None])).sum(axis=1)


def _mix(lexical: np.ndarray, cosine: np.ndarray, lexical_weight: float) -> np.ndarray:
    """BM25 scaled by its best, cosine min-max scaled; a turn not embedded yet is judged by its
    words alone."""
    best = lexical.max(initial=0.0)
    lex = lexical / best if best > 0 else lexical
    known = ~np.isnan(cosine)
    if not known.any():
        return lex
    low, high = cosine[known].min(), cosine[known].max()
    dense = np.where(known, (cosine - low) / ((high - low) or 1.0), lex)
    weight = lexical_weight if best > 0 else 0.0
    return weight * lex + (1 - weight) * dense


def selective(terms: list[str], stats: TermStats) -> list[str]:
    """The query's rarer terms, enough to find lexical candidates cheaply.

    A term in most passages ("the", "what") adds little to BM25 but makes the store walk most
    of its index; candidates come from the rarest terms (at least two) while their postings
    stay within a small share of the corpus. Every window is then scored on all terms.
    """
    df = stats.document_frequency
    present = sorted((t for t in terms if df.get(t)), key=lambda t: df[t])
    budget = max(200, stats.passages * CANDIDATE_SHARE)
    chosen: list[str] = []
    postings = 0
    for term in present:
        if len(chosen) >= 2 and postings + df[term] > budget:
            break
        chosen.append(term)
        postings += df[term]
    return chosen


class Reads:
    """The turns one recall has read, by conversation, so that what it reads again (the best
    windows' text for a name, then the hits' windows, then the turns around them that `widen`
    shows) comes from here and only the seqs not yet read are asked of the store: one read for
    each step, and each turn's row read once. Held for one recall only, so what it answers is
    what the store held while the recall read it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._spans: dict[str, list[tuple[int, int]]] = {}  # seqs read: disjoint, ascending
        self._turns: dict[str, list[Turn]] = {}  # the turns read, in the store's order
        self._seqs: dict[str, list[int]] = {}  # their seqs, for bisect

    def windows(self, windows: list[tuple[str, int, int]]) -> list[list[Turn]]:
        """The turns of each `(session_id, from_seq, to_seq)`, in order, as
        Store.turn_windows gives them."""
        missing: dict[str, list[tuple[int, int]]] = {}
        for session_id, first, last in windows:
            gaps = _unread(first, last, self._spans.get(session_id, []))
            if gaps:
                missing.setdefault(session_id, []).extend(gaps)
        if missing:
            runs = {session_id: _merged(gaps) for session_id, gaps in missing.items()}
            asked = [(sid, *run) for sid, session_runs in runs.items() for run in session_runs]
            read: dict[str, list[Turn]] = {}
            for (session_id, _, _), turns in zip(
                asked, self.store.turn_windows(asked), strict=True
            ):
                read.setdefault(session_id, []).extend(turns)  # ascending: so are the runs
            for session_id, session_runs in runs.items():
                turns = read.get(session_id, [])
                if session_id in self._turns:  # stable: a seq's turns come from one read
                    session_runs = _merged([*self._spans[session_id], *session_runs])
                    turns = sorted([*self._turns[session_id], *turns], key=_SEQ)
                self._spans[session_id] = session_runs
                self._turns[session_id] = turns
                self._seqs[session_id] = [turn.seq for turn in turns]
        found = []
        for session_id, first, last in windows:
            seqs = self._seqs.get(session_id, [])
            turns = self._turns.get(session_id, [])
            found.append(turns[bisect_left(seqs, first) : bisect_right(seqs, last)])
        return found


_SEQ = attrgetter("seq")


def _unread(first: int, last: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The runs of [first, last] outside `spans` (disjoint, ascending)."""
    gaps = []
    for low, high in spans:
        if first > last or low > last:
            break
        if high < first:
            continue
        if low > first:
            gaps.append((first, low - 1))
        first = high + 1
    if first <= last:
        gaps.append((first, last))
    return gaps


def _merged(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Runs of seqs, those that overlap or touch joined, ascending."""
    joined: list[tuple[int, int]] = []
    for low, high in sorted(runs):
        if joined and low <= joined[-1][1] + 1:
            joined[-1] = (joined[-1][0], max(joined[-1][1], high))
        else:
            joined.append((low, high))
    return joined


def build_hits(
    store: Store,
    scores: dict[tuple[str, int], Score],
    k: int,
    radius: int,
    *,
    include_echoes: bool = False,
    reads: Reads | None = None,
    sides: int = 0,
) -> list[Hit]:
    """Best windows first, as hits.

    Inside a winning window the turn that matched best on its own is the hit; the context is
    its neighbours together with the rest of the window, so the evidence the window was ranked
    on is all shown, and the reply to the window's last turn when that turn asks something.
    A window whose turns are already shown in a better hit is skipped.
    The turns of every hit are read at once; a turn forgotten since it was scored is left out.
    With them, for the first `sides` hits, the REACH turns on either side that `widen` reads
    next (into `reads`): one read for both.
    """
    ranked = sorted(scores.items(), key=lambda item: (-item[1].window, item[0]))
    chosen: list[tuple[str, int, Score, int, int]] = []
    shown: set[tuple[str, int]] = set()
    for (session_id, seq), score in ranked:
        if len(chosen) == k:
            break
        if (session_id, seq) in shown:
            continue
        near = [s for s in range(seq - radius, seq + radius + 1) if (session_id, s) in scores]
        best = max(near, key=lambda s: (scores[(session_id, s)].own, -abs(s - seq)))
        if (session_id, best) in shown:
            continue
        first, last = min(seq, best) - radius, max(seq, best) + radius
        shown.update((session_id, s) for s in range(first, last + 1))
        chosen.append((session_id, best, score, first, last))
    # one turn more than the window: the reply, shown when the window ends on a question
    reads = reads or Reads(store)
    windows = reads.windows(
        [
            (sid, first - REACH, last + 1 + REACH) if i < sides else (sid, first, last + 1)
            for i, (sid, _, _, first, last) in enumerate(chosen)
        ]
    )
    hits: list[Hit] = []
    for (session_id, best, score, first, last), turns in zip(chosen, windows, strict=True):
        turns = [t for t in turns if first <= t.seq <= last + 1]  # as read without the sides
        if not (radius and any(t.seq == last and _asks(t.text) for t in turns)):
            turns = [t for t in turns if t.seq <= last]
        hit = next((t for t in turns if t.seq == best), None)
        if hit is None:  # forgotten between the two queries
            continue
        context = [
            t.as_context() for t in turns if t.seq != best and (include_echoes or not t.echo)
        ]
        hits.append(
            Hit(session_id, hit.turn_uuid, best, hit.ts, hit.role, hit.text, score.window, context)
        )
    return hits


def widen(
    store: Store,
    hits: list[Hit],
    fits: Callable[[list[Hit]], bool],
    *,
    further: Sequence[Hit] = (),
    include_echoes: bool = False,
    reads: Reads | None = None,
) -> list[Hit]:
    """The hits with more shown while the whole answer still `fits` (the caller's budget for
    what it shows): the `further` hits (the next best, in rank order) and each hit's context
    grown one turn at a time, whichever is worth more first.

    A further hit is worth its score; the next turn out from a hit is worth that hit's score
    less GROWTH_COST for each turn it lies from the hit, so a hit that stands well above the
    rest shows more of its conversation before a weak further hit is shown, and close scores
    show more hits. Each side grows from the turn nearest its hit (before it on a tie, so the
    sides alternate). When the scores cannot be compared (a reranker's, out of rank order),
    the further hits come first and then every hit's nearest ring before any next one.

    When the head of the ranking is flat (the hit at FLAT_RANK scores at least FLAT_SHARE of
    the best's), the further hits come as their own turn only, their neighbours then worth
    what growth is: evidence spread over many close windows needs room for more of them.

    A further hit is shown without the turns a better hit already shows (passed over when its
    own turn is one); the first that does not fit ends them. A side stops growing at the first
    turn that does not fit, at a turn another hit already shows (a turn is shown once, beside
    the better hit), at the end of its conversation, or REACH turns out. Ranking is untouched:
    this only shows more when turns are short, and an answer that does not fit as it is stays
    exactly as it is.
    """
    if not hits or not fits(hits):
        return hits
    reads = reads or Reads(store)  # the recall's, which read the hits' own windows
    hits = list(hits)
    queue = list(further)
    scores = [h.score for h in [*hits, *queue]]
    cost = GROWTH_COST if all(a >= b for a, b in pairwise(scores)) else math.inf
    flat = len(scores) > FLAT_RANK and scores[FLAT_RANK] >= FLAT_SHARE * scores[0] > 0
    if flat and cost < math.inf:
        queue = [replace(hit, context=[]) for hit in queue]  # narrower, so more hits
    shown = {(h.session_id, t.seq) for h in hits for t in [h, *h.context]}
    sides: dict[tuple[int, int], list[Turn]] = {}
    around: dict[tuple[str, int], list[Turn]] = {}  # about further hits, read AHEAD at a time

    def span(hit: Hit) -> tuple[int, int]:
        seqs = [t.seq for t in [hit, *hit.context]]
        return min(seqs), max(seqs)

    def read_sides(first: int) -> None:
        """The turns beyond the span of each hit from `first` on, nearest first. A further hit's
        are cut from the turns about it, read with the next AHEAD - 1 in the queue's: about a
        span that holds its own (a further hit shows its context less what is shown)."""
        if first:
            hit = hits[first]
            if (hit.session_id, hit.seq) not in around:
                ahead = [hit, *queue[: AHEAD - 1]]
                found = reads.windows(
                    [(h.session_id, span(h)[0] - REACH, span(h)[1] + REACH) for h in ahead]
                )
                around.update(((h.session_id, h.seq), r) for h, r in zip(ahead, found, strict=True))
            turns, (low, high) = around.pop((hit.session_id, hit.seq)), span(hit)
            sides[(first, 0)] = [t for t in turns if low - REACH <= t.seq < low][::-1]
            sides[(first, 1)] = [t for t in turns if high < t.seq <= high + REACH]
            return
        spans = [(h, [t.seq for t in [h, *h.context]]) for h in hits[first:]]
        found = reads.windows(
            [
                window
                for h, seqs in spans
                for window in (
                    (h.session_id, min(seqs) - REACH, min(seqs) - 1),
                    (h.session_id, max(seqs) + 1, max(seqs) + REACH),
                )
            ]
        )
        for i in range(len(spans)):
            sides[(first + i, 0)] = found[2 * i][::-1]
            sides[(first + i, 1)] = found[2 * i + 1]

    def worth(side: tuple[int, int]) -> tuple[float, int, int, int]:
        """What the next turn of a side is worth, then the ties: nearer, better hit, before."""
        i, which = side
        away = abs(sides[side][0].seq - hits[i].seq)
        return (hits[i].score - cost * away if cost < math.inf else -away, -away, -i, -which)

    read_sides(0)
    while True:
        sides = {side: outward for side, outward in sides.items() if outward}
        while queue and (queue[0].session_id, queue[0].seq) in shown:
            queue.pop(0)
        ring = max(sides, key=worth) if sides else None
        if queue and (ring is None or cost == math.inf or queue[0].score >= worth(ring)[0]):
            hit = queue.pop(0)
            hit = replace(
                hit, context=[t for t in hit.context if (hit.session_id, t.seq) not in shown]
            )
            if not fits([*hits, hit]):
                queue = []  # the first that does not fit ends them
                continue
            hits.append(hit)
            shown.update((hit.session_id, t.seq) for t in [hit, *hit.context])
            read_sides(len(hits) - 1)
            continue
        if ring is None:
            return hits
        i, _ = ring
        turn = sides[ring].pop(0)
        if turn.echo and not include_echoes:
            continue  # not shown, and no reason to stop there
        context = sorted([*hits[i].context, turn.as_context()], key=lambda t: t.seq)
        grown = [*hits[:i], replace(hits[i], context=context), *hits[i + 1 :]]
        if (hits[i].session_id, turn.seq) in shown or not fits(grown):
            sides[ring] = []  # this side is done
            continue
        hits = grown
        shown.add((hits[i].session_id, turn.seq))


def _asks(text: str) -> bool:
    """Whether a turn asks something: the turn after it is then its answer ("Is there a ticket
    yet?" / "Yes, Grace opened MT-7535"), and a window ending on it shows that answer too."""
    return "?" in text or "？" in text
