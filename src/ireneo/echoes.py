"""Recall echoes: an assistant turn that mostly repeats what recall just gave it.

When an agent answers from recalled passages ("Here is your consolidated list: …") and that
answer is stored like any turn, the next recall finds the answer instead of its sources, and
with each round the memory drifts towards the agent's own summaries. So the server keeps a short
record of the turns it returned to each user (`Memory.note_returned`), and an assistant turn
stored within `window` of that whose word trigrams are mostly (`overlap`) found in those turns,
and whose numbers and identifiers all are, is flagged as an echo: stored and readable as written
(`get`, `read_conversation`), but left out of recall results unless asked for. The second rule
keeps a new fact said in a familiar shape ("Ticket MT-5120 is open for …" after recall showed
"Ticket MT-4471 is open for …") from passing for a repeat: an echo adds nothing new.

`IRENEO_ECHO_WINDOW_HOURS` (24) and `IRENEO_ECHO_OVERLAP` (0.5; 0 turns detection off), read into
`Settings.echo_policy` (ireneo.config).
"""

from __future__ import annotations

import re

from ireneo.config import EchoPolicy as EchoPolicy  # the policy is a setting

MIN_WORDS = 8  # a short reply ("Done, MT-4471 is closed.") repeats words without being an echo
_WORD = re.compile(r"\w+")


def trigrams(text: str) -> set[tuple[str, str, str]]:
    words = _WORD.findall(text.lower())
    return {(words[i], words[i + 1], words[i + 2]) for i in range(len(words) - 2)}


def overlap(text: str, sources: set[tuple[str, str, str]]) -> float:
    """The share of `text`'s word trigrams found in `sources` (0 for a text too short to judge)."""
    own = trigrams(text)
    if len(own) < MIN_WORDS - 2:
        return 0.0
    return len(own & sources) / len(own)


def numbers(text: str) -> set[str]:
    """The words of three characters or more holding a digit: ids, amounts, years. Shorter ones
    (a list's "1." … "5.", "within 2 hours") say nothing about what is new."""
    return {
        word
        for word in _WORD.findall(text.lower())
        if len(word) >= 3 and any(c.isdigit() for c in word)
    }


def is_echo(text: str, returned: list[str], policy: EchoPolicy) -> bool:
    """Whether `text` echoes `returned`. The returned turns are searched as one string of their
    words (one line each), not turned into sets: they are every turn shown to the user within
    the window, thousands for a busy user, and `text` has only a few trigrams and numbers."""
    if not policy.enabled or not returned:
        return False
    own_numbers = numbers(text)
    if own_numbers:  # a number not even inside a returned turn is new: decided without words
        lowered = "\n".join(source.lower() for source in returned)
        if any(word not in lowered for word in own_numbers):
            return False
    shown = "\n".join(map(_word_line, returned))
    # a number of `text` is a word of a returned turn, as it is one of that turn's numbers
    if any(f" {word} " not in shown for word in own_numbers):
        return False
    own = trigrams(text)  # the share found, as `overlap` counts it
    found = sum(f" {a} {b} {c} " in shown for a, b, c in own)
    share = found / len(own) if len(own) >= MIN_WORDS - 2 else 0.0
    return share >= policy.overlap


def _word_line(text: str) -> str:
    """`text`'s words, lower case, one space around each: a trigram or a number is in `text`
    exactly when " a b c " or " 2026 " is in this line."""
    return f" {' '.join(_WORD.findall(text.lower()))} "
