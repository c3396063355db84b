"""The model a new memory gets when nobody names one: chosen by the language its first turns hold.

MiniLM (`minilm-l6-v2-q8`) ranks best on English; it reads no Russian or Korean: its English
WordPiece spells their letters out one by one or gives them as unknown. `e5-small-q8` reads
them (docs/ranking.md, "The model"). So a memory whose first turns MiniLM cannot read, in more
than `UNREAD_SHARE` of their letters, gets e5-small-q8; any other gets MiniLM. The sample is
bounded: the first `SAMPLE_TURNS` texts, `SAMPLE_CHARS` characters at most (docs/embedding.md,
"The model of a new memory", has the shares measured and why the line is where it is).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from itertools import islice

from ireneo.embed.registry import DEFAULT_MODEL, MINILM_TOKENIZER

MULTILINGUAL_MODEL = "e5-small-q8"  # for a memory whose text MiniLM cannot read
SAMPLE_TURNS = 64  # texts read to choose, at most
SAMPLE_CHARS = 20_000  # characters read to choose, at most
UNREAD_SHARE = 0.1  # letters MiniLM cannot read, past which a memory gets MULTILINGUAL_MODEL


def choose_model(texts: Iterable[str]) -> str:
    """The packaged model for a memory whose first texts are `texts` (only the first
    SAMPLE_TURNS, SAMPLE_CHARS characters in all, are read)."""
    return MULTILINGUAL_MODEL if unread_share(texts) > UNREAD_SHARE else DEFAULT_MODEL


def unread_share(texts: Iterable[str]) -> float:
    """The share of the letters of the first texts (bounded as `choose_model` says) that
    MiniLM's WordPiece cannot read; 0 when they hold no letter."""
    unread = letters = 0
    room = SAMPLE_CHARS
    for text in islice(texts, SAMPLE_TURNS):  # asks for no text past the sample
        missed, seen = unread_letters(text[:room])
        unread, letters = unread + missed, letters + seen
        room -= len(text)
        if room <= 0:
            break
    return unread / letters if letters else 0.0


def unread_letters(text: str) -> tuple[int, int]:
    """(letters MiniLM cannot read, letters) of `text`: a letter is unread when the WordPiece
    piece it falls in is unknown, or a single character of a word spelled in several pieces
    (Cyrillic spelled out letter by letter, Hangul jamo by jamo, where an English word is one or
    two pieces). A word of one letter ("a", the K of "K-9") is read whole. Digits are no
    language's and do not count. (`relevance.unread`, which judges a query, counts both.)"""
    letters = [at for at, char in enumerate(text) if char.isalpha()]
    if not letters:
        return 0, 0
    tokenizer, unknown, continuing = minilm_wordpiece()
    encoding = tokenizer.encode(text, add_special_tokens=False)
    ids, offsets = encoding.ids, encoding.offsets
    read = set()
    for i, (piece, (start, end)) in enumerate(zip(ids, offsets, strict=True)):
        alone = piece not in continuing and (i + 1 == len(ids) or ids[i + 1] not in continuing)
        if piece != unknown and (end - start > 1 or alone):
            read.update(range(start, end))
    return sum(at not in read for at in letters), len(letters)


@cache
def minilm_wordpiece():  # noqa: ANN201 - the MiniLMs' WordPiece, its unknown piece, its "##" pieces
    """The tokenizer the packaged MiniLMs share, read once a process: for the share of a text
    it cannot read, here and in `relevance.unread`."""
    from ireneo.embed.wordpiece import WordPiece

    model = json.loads(MINILM_TOKENIZER.read_text(encoding="utf-8"))["model"]
    vocab, prefix = model["vocab"], model.get("continuing_subword_prefix", "##")
    continuing = frozenset(i for token, i in vocab.items() if token.startswith(prefix))
    return WordPiece(MINILM_TOKENIZER), vocab[model.get("unk_token", "[UNK]")], continuing
