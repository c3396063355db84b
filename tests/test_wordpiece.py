"""ireneo's WordPiece against the `tokenizers` package on the MiniLMs' tokenizer.json: the same
ids and offsets, so the default model's vectors and splits do not depend on which one read it."""

from __future__ import annotations

import json
import random
import unicodedata
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from ireneo.embed import onnx
from ireneo.embed.registry import MINILM_TOKENIZER
from ireneo.embed.wordpiece import WordPiece
from tests.conftest import SAMPLES

TEMPLATES = Path(__file__).parent.parent / "src" / "ireneo" / "benchmark" / "templates"


@pytest.fixture(scope="module")
def both() -> tuple[Tokenizer, WordPiece]:
    reference = Tokenizer.from_file(str(MINILM_TOKENIZER))
    reference.no_padding()
    reference.no_truncation()
    return reference, WordPiece(MINILM_TOKENIZER)


def written_texts() -> list[str]:
    """Every line of the sample conversations and the benchmark's templates (English, Russian,
    Korean, identifiers, numbers, punctuation)."""
    files = [*SAMPLES.rglob("*.jsonl"), *TEMPLATES.glob("*.json")]
    lines = (line for f in files for line in f.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line.strip()]


ODD = [
    "",
    " ",
    "[SEP]x[CLS] [MASK]y",
    "a[UNK]b [PAD]",
    "İstanbul ΑΣ σ ς",
    "x" * 150,  # longer than a word may be: one [UNK]
    "ﬁne café naïve Ǆ ß ẞ",
    "hello\u0301world e\u0301",
    "tab\there\nnew\r\nline\x00null\ufffdreplaced\u200bzero width\u00a0nbsp\u3000",
    "中文字符和한국어 섞인 text",
    "emoji 😀👍🏽 and ∑∫ ₹€$ 1,000.50 MT-4471 P-003",
    "don't stop—ever… «quoted» „low” ¿qué? ¡sí!",
    "ПРИВЕТ, мир! Ёлка ёжик",
    "\x1c\x1d\x1e\x1f\x85\u2028\u2029",
]


def random_texts(count: int) -> list[str]:
    """Strings drawn from many scripts and categories: controls, spaces, marks, CJK, Hangul."""
    ranges = [(0x20, 0x7F), (0xA0, 0x250), (0x300, 0x370), (0x400, 0x460), (0x590, 0x600)]
    ranges += [(0x900, 0x980), (0x3000, 0x3040), (0x4E00, 0x4E40), (0xAC00, 0xAC40)]
    alphabet = [chr(c) for low, high in ranges for c in range(low, high)]
    alphabet += [chr(c) for c in (0, 9, 10, 13, 0x85, 0x200B, 0xFEFF, 0xFFFD, 0x1F600, 0x2003)]
    rng = random.Random(26)
    return ["".join(rng.choices(alphabet, k=rng.randint(0, 40))) for _ in range(count)]


def reorders_marks(text: str) -> bool:
    """Whether NFD would reorder two adjacent combining marks (where the offsets may differ:
    `tokenizers` aligns the reordered marks by position, WordPiece by character)."""
    marks = (d for c in text for d in unicodedata.normalize("NFD", c))  # not yet reordered
    classes = [unicodedata.combining(d) for d in marks]
    return any(0 < b < a for a, b in zip(classes, classes[1:], strict=False))


def test_the_ids_and_offsets_are_the_tokenizers_packages(both) -> None:
    reference, wordpiece = both
    texts = [*written_texts(), *ODD, *random_texts(5000)]
    assert len(texts) > 6000
    for text in texts:
        expected, got = reference.encode(text), wordpiece.encode(text)
        assert got.ids == expected.ids, text
        if not reorders_marks(text):
            assert got.offsets == expected.offsets, text
        assert got.type_ids == expected.type_ids
        words = reference.encode(text, add_special_tokens=False)
        assert wordpiece.encode(text, add_special_tokens=False).ids == words.ids


def test_the_default_model_reads_its_tokenizer_without_the_tokenizers_package() -> None:
    tokenizer, pad = onnx.load_tokenizer(MINILM_TOKENIZER)
    assert isinstance(tokenizer, WordPiece) and pad == 0


def test_another_kind_of_tokenizer_json_goes_to_the_tokenizers_package(tmp_path: Path) -> None:
    spec = json.loads(MINILM_TOKENIZER.read_text(encoding="utf-8"))
    spec["normalizer"] = {"type": "Lowercase"}  # not BertNormalizer: WordPiece does not run it
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ValueError, match="is not a BERT WordPiece tokenizer"):
        WordPiece(path)
    tokenizer, _ = onnx.load_tokenizer(path)
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.encode("Café").ids == [101, 100, 102]  # lower case kept the accent: [UNK]
