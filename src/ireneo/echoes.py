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
import threading
from datetime import datetime
from typing import TYPE_CHECKING

from ireneo.config import EchoPolicy as EchoPolicy  # the policy is a setting

if TYPE_CHECKING:
    from ireneo.store.base import Store

MIN_WORDS = 8  # a short reply ("Done, MT-4471 is closed.") repeats words without being an echo
KEEP_CHARS = 1_000_000  # Shown keeps no more word lines than this between posts (~1 MB)
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


def is_echo(text: str, shown: str, policy: EchoPolicy) -> bool:
    """Whether `text` echoes the turns whose word lines `shown` holds (`Shown.lines`). They are
    searched as one string, not turned into sets: every turn shown to the user within the
    window, thousands for a busy user, and `text` has only a few trigrams and numbers."""
    if not policy.enabled or not shown:
        return False
    # a number of `text` is a word of a shown turn, as it is one of that turn's numbers
    if any(f" {word} " not in shown for word in numbers(text)):
        return False
    own = trigrams(text)  # the share found, as `overlap` counts it
    found = sum(f" {a} {b} {c} " in shown for a, b, c in own)
    share = found / len(own) if len(own) >= MIN_WORDS - 2 else 0.0
    return share >= policy.overlap


def word_line(text: str) -> str:
    """`text`'s words, lower case, one space around each: a trigram or a number is in `text`
    exactly when " a b c " or " 2026 " is in this line."""
    return f" {' '.join(_WORD.findall(text.lower()))} "


class Shown:
    """The word lines of the turns shown to one user within the window, kept between posts.

    Each test asks the store only which turns were shown (their ids and content hashes) and
    reads the text of those not read before: reading and parsing every shown turn again for
    every post grew with the user's recalls that day and held the interpreter's lock from the
    posts' lowered threads while recall waited (docs/reliability.md). A turn forgotten, changed
    or past the window drops out by its key at the next test; past KEEP_CHARS nothing is kept.
    """

    def __init__(self) -> None:
        self._lines: dict[tuple[int, str], str] = {}
        self._lock = threading.Lock()
        self.reads = 0  # turns whose text was read from the store, in all
        self.size = 0  # the characters kept (the registry counts them: Memory.resident_bytes)

    def lines(self, store: Store, since: datetime) -> str:
        """The word lines of the turns shown since `since`, one a line."""
        with self._lock:
            keys = store.returned_keys(since)
            kept = {key: line for key, line in self._lines.items() if key in keys}
            new = [turn_id for turn_id, digest in keys if (turn_id, digest) not in kept]
            for turn_id, digest, text in store.turn_texts(new) if new else []:
                kept[(turn_id, digest)] = word_line(text)
            self.reads += len(new)
            shown = "\n".join(kept.values())
            self._lines = kept if len(shown) <= KEEP_CHARS else {}
            self.size = len(shown) if self._lines else 0
            return shown

    def clear(self) -> None:
        """Drop every line kept (after a forget: no forgotten text stays in the process)."""
        with self._lock:
            self._lines, self.size = {}, 0
