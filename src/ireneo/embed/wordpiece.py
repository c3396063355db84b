"""BERT's WordPiece tokenization, as a Hugging Face tokenizer.json of the MiniLMs describes it.

The packaged MiniLMs share one uncased BERT vocabulary. Reading it here, instead of through
the `tokenizers` package, keeps `tokenizers` and what it requires (huggingface_hub, hf_xet,
fsspec: ~40 MB) out of the core install (docs/install.md). The steps are the ones its
tokenizer.json names, in the order `tokenizers` runs them: its added tokens ([CLS], [SEP]…)
are cut out of the raw text; then BertNormalizer (control characters dropped, whitespace made
a space, CJK ideographs spaced, accents stripped, lower case), BertPreTokenizer (whitespace
and each punctuation mark), WordPiece (greedy longest match, "##" before a word's later
pieces) and [CLS] … [SEP] around the text. A test holds the ids and offsets to `tokenizers`'
own on thousands of texts (docs/embedding.md). A tokenizer.json of another kind is refused:
`tokenizers` reads those.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from ireneo.embed.base import Encoding

# Unicode blocks BertNormalizer spaces out, one ideograph a word (CJK Unified Ideographs and
# their extensions, compatibility ideographs).
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


class WordPiece:
    """A BERT WordPiece tokenizer.json (BertNormalizer, BertPreTokenizer, WordPiece, a
    [CLS] $A [SEP] template), untruncated and unpadded: `encode` and `encode_batch` give what
    `tokenizers.Tokenizer` gives for it."""

    def __init__(self, tokenizer_file: Path) -> None:
        spec = json.loads(Path(tokenizer_file).read_text(encoding="utf-8"))
        if not _is_wordpiece(spec):
            raise ValueError(f"{Path(tokenizer_file).name} is not a BERT WordPiece tokenizer")
        model, normalizer = spec["model"], spec["normalizer"]
        self._vocab: dict[str, int] = model.get("vocab") or {}
        special = spec["post_processor"].get("special_tokens") or {}
        try:
            self._unk = self._vocab[model.get("unk_token", "[UNK]")]
            self._cls, self._sep = (special[name]["ids"][0] for name in ("[CLS]", "[SEP]"))
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(f"{Path(tokenizer_file).name} lacks the token {exc}") from None
        self._prefix = model.get("continuing_subword_prefix", "##")
        self._longest_word = int(model.get("max_input_chars_per_word", 100))
        self._clean = bool(normalizer.get("clean_text", True))
        self._space_cjk = bool(normalizer.get("handle_chinese_chars", True))
        self._lowercase = bool(normalizer.get("lowercase", True))
        strip = normalizer.get("strip_accents")
        self._strip_accents = self._lowercase if strip is None else bool(strip)
        self.pad = int((spec.get("padding") or {}).get("pad_id", 0))
        # Added tokens ([CLS], [SEP], [MASK]…) are matched in the raw text, longest first.
        added = {t["content"]: t["id"] for t in spec.get("added_tokens") or []}
        self._added = added
        self._added_pattern = (
            re.compile("|".join(re.escape(t) for t in sorted(added, key=len, reverse=True)))
            if added
            else None
        )

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        """`text`'s tokens, between [CLS] and [SEP] unless add_special_tokens is False."""
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        start = 0
        if self._added_pattern is not None:
            for match in self._added_pattern.finditer(text):
                self._encode_plain(text, start, match.start(), ids, offsets)
                ids.append(self._added[match.group()])
                offsets.append((match.start(), match.end()))
                start = match.end()
        self._encode_plain(text, start, len(text), ids, offsets)
        if add_special_tokens:
            ids = [self._cls, *ids, self._sep]
            offsets = [(0, 0), *offsets, (0, 0)]
        return Encoding(ids, offsets)

    def encode_batch(self, texts: list[str]) -> list[Encoding]:
        return [self.encode(text) for text in texts]

    def _encode_plain(
        self, text: str, start: int, end: int, ids: list[int], offsets: list[tuple[int, int]]
    ) -> None:
        """The tokens of text[start:end], which holds no added token, appended."""
        for word, origins in self._words(text, start, end):
            for (a, b), token in self._pieces(word):
                ids.append(token)
                offsets.append((origins[a], origins[b - 1] + 1))

    def _words(self, text: str, start: int, end: int) -> list[tuple[str, list[int]]]:
        """Normalised words and, for each of their characters, the raw character it came from."""
        words: list[tuple[str, list[int]]] = []
        chars: list[str] = []
        origins: list[int] = []

        def close() -> None:
            if chars:
                words.append(("".join(chars), origins.copy()))
                chars.clear()
                origins.clear()

        for i in range(start, end):
            for c in self._normalised(text[i]):
                if c.isspace():
                    close()
                elif _is_punctuation(c):
                    close()
                    words.append((c, [i]))
                else:
                    chars.append(c)
                    origins.append(i)
        close()
        return words

    def _normalised(self, c: str) -> str:
        """What BertNormalizer makes of one raw character (zero or more characters)."""
        return _normalised(c, self._clean, self._space_cjk, self._strip_accents, self._lowercase)

    def _pieces(self, word: str) -> list[tuple[tuple[int, int], int]]:
        """WordPiece: the longest vocabulary entry from the left, then from where it ended
        (with the prefix); one [UNK] for the whole word if some part matches nothing."""
        if len(word) > self._longest_word:
            return [((0, len(word)), self._unk)]
        whole = self._vocab.get(word)
        if whole is not None:
            return [((0, len(word)), whole)]
        pieces: list[tuple[tuple[int, int], int]] = []
        start = 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else self._prefix + word[start:end]
                token = self._vocab.get(piece)
                if token is not None:
                    pieces.append(((start, end), token))
                    start = end
                    break
            else:
                return [((0, len(word)), self._unk)]
        return pieces


def _is_wordpiece(spec: object) -> bool:
    """Whether a tokenizer.json's parts are the ones `WordPiece` runs."""
    if not isinstance(spec, dict):
        return False
    kinds = [
        (spec.get(part) or {}).get("type") for part in ("model", "normalizer", "pre_tokenizer")
    ]
    template = spec.get("post_processor") or {}
    single = [next(iter(step.values())).get("id") for step in template.get("single") or []]
    # added tokens matched as written wherever they are: not as whole words, nor normalised
    plain = not any(
        t.get(flag)
        for t in spec.get("added_tokens") or []
        for flag in ("normalized", "single_word", "lstrip", "rstrip")
    )
    return (
        kinds == ["WordPiece", "BertNormalizer", "BertPreTokenizer"]
        and template.get("type") == "TemplateProcessing"
        and single == ["[CLS]", "A", "[SEP]"]
        and plain
    )


@lru_cache(maxsize=8192)
def _normalised(c: str, clean: bool, space_cjk: bool, strip_accents: bool, lowercase: bool) -> str:
    if clean:
        if c == "\x00" or c == "\ufffd" or _is_control(c):
            return ""
        if c in "\t\n\r" or c.isspace():
            c = " "
    if space_cjk and _is_cjk(c):
        return f" {c} "
    if strip_accents:
        c = "".join(d for d in unicodedata.normalize("NFD", c) if unicodedata.category(d) != "Mn")
    if lowercase:
        c = c.lower()
    return c


def _is_control(c: str) -> bool:
    """Control, format, private-use or surrogate; an unassigned character stays (a word of it
    is [UNK]), as in `tokenizers`."""
    return c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs")


def _is_cjk(c: str) -> bool:
    code = ord(c)
    return any(low <= code <= high for low, high in _CJK)


def _is_punctuation(c: str) -> bool:
    return c in _ASCII_PUNCTUATION or unicodedata.category(c).startswith("P")
