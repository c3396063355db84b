"""Text to search terms: the lexical half of recall.

Both stores index and query the same terms, so keyword search behaves the same on SQLite and
PostgreSQL whatever their own tokenisers would have done:

- words are cut at script boundaries, so "CH-294의" gives "ch", "294" and the Hangul apart;
- identifiers (letters, an optional separator, digits: MT-4471, K-2, PMP-203) also give a joined
  term ("mt4471"), so they are found whole as well as by their parts, and "MT4471" finds "MT-4471";
- Latin and Cyrillic words are stemmed (Snowball English / Russian): "failed" finds "failing";
- Korean is cut into morphemes by Kiwi (kiwipiepy), its content morphemes kept: "믹서의" gives
  "믹서", "발행한" gives "발행", because Korean attaches particles and endings to words;
- CJK runs become overlapping character bigrams: Chinese and Japanese write no spaces.

A memory indexed before ireneo read Korean by morphemes, or made where Kiwi is not installed
(it is the `ko` extra: ~145 MB an English user need not carry), reads Korean by bigrams (its
`hangul` setting, see `index.hangul_of`), so its stored terms and its queries' terms always
agree. Bigrams cost Korean recall: docs/korean.md has the figures.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from itertools import pairwise
from typing import Literal

import Stemmer

from ireneo.extras import has, missing

Hangul = Literal["morphemes", "bigrams"]

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


_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")
# Kiwi's tags of the morphemes that carry content: nouns, numerals, pronouns, verb and adjective
# stems, roots, adverbs, and foreign or Chinese-character words. Particles, endings and affixes
# are left out ("믹서의" is "믹서").
_CONTENT_TAGS = frozenset(["NNG", "NNP", "NNB", "NR", "NP", "VV", "VA", "XR", "MAG", "SH", "SL"])
_kiwi = None
_kiwi_lock = threading.Lock()


def korean_morphemes() -> bool:
    """Whether Korean can be read by morphemes here: Kiwi (the `ko` extra) is installed."""
    return has("kiwipiepy")


def _korean_analyser():  # noqa: ANN202 - kiwipiepy's Kiwi, imported lazily
    """Kiwi, loaded at the first Korean text (~1 s, ~230 MB): a memory without Korean never
    loads it. A memory that reads Korean by morphemes cannot read it without Kiwi."""
    global _kiwi
    with _kiwi_lock:
        if _kiwi is None:
            try:
                from kiwipiepy import Kiwi
            except ImportError as exc:
                raise missing("ko", "this memory reads Korean by morphemes, which", exc) from None
            _kiwi = Kiwi(load_typo_dict=False, load_multi_dict=False)
        return _kiwi


@lru_cache(maxsize=200_000)
def _morphemes(run: str) -> tuple[str, ...]:
    # A verb's tag may say how it conjugates ("VV-R", "VA-I"); a term never holds a space (the
    # stores keep a passage's terms space-separated).
    found = [
        part
        for m in _korean_analyser().tokenize(run)
        if m.tag.split("-")[0] in _CONTENT_TAGS
        for part in m.form.lower().split()
    ]
    return tuple(found) or (run,)


def terms(text: str, hangul: Hangul = "morphemes") -> list[str]:
    """All search terms of a text, in order, with repeats (BM25 counts them)."""
    out: list[str] = []
    for match in _TOKEN.finditer(text):
        script = match.lastgroup
        token = match.group().lower()
        if script in ("latin", "cyrillic"):
            out.append(_stem(token, script))
        elif script == "bigram":
            if hangul == "morphemes" and _HANGUL.search(token):
                out.extend(_morphemes(token))
            else:
                out.extend(_bigrams(token))
        else:
            out.append(token)
    for match in _IDENTIFIER.finditer(text):
        out.append("".join(part for part in match.groups() if part).lower())
    return out


def words(text: str) -> list[str]:
    """The text's words as it writes them (a run of one script or of digits), in order: each
    is what `terms` stems, splits or keeps."""
    return [match.group() for match in _TOKEN.finditer(text)]


def query_terms(text: str, limit: int = 48, hangul: Hangul = "morphemes") -> list[str]:
    """The distinct terms of a query, first occurrence first, at most `limit` of them."""
    return list(dict.fromkeys(terms(text, hangul)))[:limit]


_AROUND_A_WORD = "\"'`“”‘’«»()[]{}<>.,;:!?"


def identifiers_only(text: str) -> list[str]:
    """The joined terms of the identifiers a text is made of ("MT-4471", "mt4471 K-2?" give
    "mt4471" and "k2"), or none when it holds anything else: a word, a number alone, Hangul.
    Such a query asks where those strings were written; it has no meaning to embed."""
    joined = []
    for token in text.split():
        match = _IDENTIFIER.fullmatch(token.strip(_AROUND_A_WORD))
        if match is None:
            return []
        joined.append("".join(part for part in match.groups() if part).lower())
    return joined


def identifier_parts(text: str) -> list[list[str]]:
    """The parts of each identifier a text names, as `terms` reads them ("MT-4471-B" gives
    "mt", "4471", "b"): a passage that writes "MT 4471" holds the identifier without its
    joined term, one that writes "MT-5120" only shares a part of it."""
    return [
        [term for part in match.groups() if part for term in terms(part)]
        for match in _IDENTIFIER.finditer(text)
    ]


# A word or a sentence end, for finding names: apostrophes and hyphens stay inside a word.
_WORD_OR_STOP = re.compile(r"[^\W_](?:[\w'’-]*[^\W_])?|[.!?]")
_WORDS_AND_GAPS = re.compile(f"({_WORD_OR_STOP.pattern})")  # split: gap, word, gap, …


def names(text: str, hangul: Hangul = "morphemes") -> list[list[str]]:
    """The names a text mentions, each as its terms in order: every identifier (its joined term,
    "mt4471"), every run of capitalised words with the numbers that follow them ("Carrow
    Depot 8", "Valley Forge Mill 2"), and every Korean proper noun with the nouns of the word
    after it ("영월 사업장", "광양 제3출하센터"), once each.

    A capitalised word opening a sentence is taken for a name only in a run of two or more
    ("Carrow Depot 8 mixer caps", not "Which ..."), and one letter ("I") never is. Hangul has
    no capitals: Kiwi tags its proper nouns (none when the memory reads Korean by bigrams).
    """
    joined = [
        "".join(part for part in m.groups() if part).lower() for m in _IDENTIFIER.finditer(text)
    ]
    found = [[term] for term in joined]
    for run, opens_sentence in _capitalised_runs(text):
        if len(run) > 1 or not opens_sentence:
            found.append(terms(" ".join(run)))
    if hangul == "morphemes" and _HANGUL.search(text):
        found += [terms(span) for span in _korean_names(text)]
    unique = {tuple(name): name for name in found if name}
    return list(unique.values())


_NOUN_TAGS = frozenset(["NNG", "NNP", "NR", "SN", "XPN", "XSN"])


def _korean_names(text: str) -> list[str]:
    """Each proper noun's span of `text`, to the end of the nouns that open the word after it:
    a Korean name is mostly a proper noun and what it names ("영월 사업장" the Yeongwol site,
    "김 대리" Kim the deputy), and the particle after that ("사업장의") is not part of it."""
    morphemes = _korean_analyser().tokenize(text)
    spans = []
    for morpheme in morphemes:
        if morpheme.tag != "NNP":
            continue
        end = morpheme.start + morpheme.len
        after = re.match(r"\S*\s+(\S+)", text[end:])
        if after:
            word_start, word_end = end + after.start(1), end + after.end(1)
            lead = []
            for other in morphemes:
                if word_start <= other.start < word_end:
                    if other.tag not in _NOUN_TAGS:
                        break
                    lead.append(other)
            if lead:
                end = lead[-1].start + lead[-1].len
        spans.append(text[morpheme.start : end])
    return spans


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


def runs_of_capitals(text: str) -> list[list[str]]:
    """Every run of capitalised words in a text, with the numbers after them, as terms: the
    names it writes as written ("The Riverside Plant 2 crew" gives the, riverside, plant, 2)."""
    return [terms(" ".join(run)) for run, _ in _capitalised_runs(text)]


def _capitalised_runs(text: str) -> list[tuple[list[str], bool]]:
    """Runs of capitalised words (and the numbers after them) separated by spaces only, each
    with whether it opens a sentence."""
    runs: list[tuple[list[str], bool]] = []
    run: list[str] = []
    opens_sentence = after_stop = True
    parts = _WORDS_AND_GAPS.split(text + ".")  # the stop closes the last run
    for gap, word in zip(parts[:-1:2], parts[1::2], strict=True):  # each word, the text before
        if run and gap.strip():  # a comma or a dash between words ends a run
            runs.append((run, opens_sentence))
            run = []
        capital = word[0].isupper() and len(word) > 1 and not _IDENTIFIER.fullmatch(word)
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
