"""Text to search terms: the lexical half of recall.

Both stores index and query the same terms, so keyword search behaves the same on SQLite and
PostgreSQL whatever their own tokenisers would have done:

- words are cut at script boundaries, so "CH-294의" gives "ch", "294" and the Hangul apart;
- identifiers (letters, an optional separator, digits: MT-4471, K-2, PMP-203) also give a joined
  term ("mt4471"), so they are found whole as well as by their parts, and "MT4471" finds "MT-4471";
- Latin and Cyrillic words are stemmed (Snowball English / Russian): "failed" finds "failing";
- Hangul and CJK runs become overlapping character bigrams, because Korean attaches particles to
  words ("회의에서") and Chinese and Japanese write no spaces.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise

import Stemmer

_TOKEN = re.compile(
    r"(?P<digits>\d+)"
    r"|(?P<latin>[a-zA-Z\u00c0-\u024f]+)"
    r"|(?P<cyrillic>[\u0400-\u04ff]+)"
    r"|(?P<bigram>[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]+)"
    r"|(?P<other>[^\W\d_]+)"
)
_IDENTIFIER = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{1,10})[-_./]?(\d{1,12})(?:[-_./](\w+))?")

_english = Stemmer.Stemmer("english")
_russian = Stemmer.Stemmer("russian")


@lru_cache(maxsize=200_000)
def _stem(word: str, script: str) -> str:
    stemmer = _english if script == "latin" else _russian
    return stemmer.stemWord(word)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def terms(text: str) -> list[str]:
    """All search terms of a text, in order, with repeats (BM25 counts them)."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        script = match.lastgroup
        token = match.group().lower()
        if script in ("latin", "cyrillic"):
            out.append(_stem(token, script))
        elif script == "bigram":
            out.extend(_bigrams(token))
        else:
            out.append(token)
    for match in _IDENTIFIER.finditer(text):
        out.append("".join(part for part in match.groups() if part).lower())
    return out


def query_terms(text: str, limit: int = 48) -> list[str]:
    """The distinct terms of a query, first occurrence first, at most `limit` of them."""
    return list(dict.fromkeys(terms(text)))[:limit]


# A word or a sentence end, for finding names: apostrophes and hyphens stay inside a word.
_WORD_OR_STOP = re.compile(r"[^\W_](?:[\w'’-]*[^\W_])?|[.!?]")


def names(text: str) -> list[list[str]]:
    """The names a text mentions, each as its terms in order: every identifier (its joined term,
    "mt4471") and every run of capitalised words with the numbers that follow them ("Carrow
    Depot 8", "Valley Forge Mill 2"), once each.

    A capitalised word opening a sentence is taken for a name only in a run of two or more
    ("Carrow Depot 8 mixer caps", not "Which ..."), and one letter ("I") never is. Scripts
    without capitals (Hangul) give their identifiers only.
    """
    joined = [
        "".join(part for part in m.groups() if part).lower() for m in _IDENTIFIER.finditer(text)
    ]
    found = [[term] for term in joined]
    for run, opens_sentence in _capitalised_runs(text):
        if len(run) > 1 or not opens_sentence:
            found.append(terms(" ".join(run)))
    unique = {tuple(name): name for name in found if name}
    return list(unique.values())


def written_names(text: str) -> list[list[str]]:
    """The capitalised runs of a text as name terms, without identifiers: a run that opens a
    sentence loses its first word, whose capital may be the sentence's ("The Saltmarsh Works
    team" names "Saltmarsh Works")."""
    found = []
    for run, opens_sentence in _capitalised_runs(text):
        run = run[1:] if opens_sentence else run
        if run:
            found.append(terms(" ".join(run)))
    return found


def _capitalised_runs(text: str) -> list[tuple[list[str], bool]]:
    """Runs of capitalised words (and the numbers after them) separated by spaces only, each
    with whether it opens a sentence."""
    runs: list[tuple[list[str], bool]] = []
    run: list[str] = []
    opens_sentence = after_stop = True
    end = 0
    for match in _WORD_OR_STOP.finditer(text + "."):  # the stop closes the last run
        word, gap = match.group(), text[end : match.start()]
        end = match.end()
        if run and gap.strip():  # a comma or a dash between words ends a run
            runs.append((run, opens_sentence))
            run = []
        capital = len(word) > 1 and word[0].isupper() and not _IDENTIFIER.fullmatch(word)
        if capital or (run and word.isdigit()):
            if not run:
                opens_sentence = after_stop
            run.append(word)
        elif run:
            runs.append((run, opens_sentence))
            run = []
        after_stop = word in ".!?"
    return runs


# A sentence ends at . ! ? … (or the CJK stops) before whitespace, or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+|\s*\n\s*")


def sentences(text: str, most: int) -> list[str]:
    """The text's sentences, verbatim and in order; a text of more than `most` sentences gives
    `most` runs of consecutive sentences instead (every sentence in exactly one)."""
    found = [s for s in _SENTENCE_END.split(text.strip()) if s]
    if len(found) <= most:
        return found
    bounds = [round(i * len(found) / most) for i in range(most + 1)]
    return [" ".join(found[a:b]) for a, b in pairwise(bounds)]
