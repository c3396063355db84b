"""What every embedder is (the `Embedder` protocol) and the small helpers they share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ireneo.workers import usable_cores


@dataclass(frozen=True)
class Encoding:
    """One text's tokens, as our tokenizers give them (e5's, the MiniLMs'): ids, and each token's (start, end) in the text's characters."""

    ids: list[int]
    offsets: list[tuple[int, int]]

    @property
    def type_ids(self) -> list[int]:
        return [0] * len(self.ids)


@runtime_checkable
class Embedder(Protocol):
    name: str  # stable id recorded in each memory: vectors of different models never mix
    dim: int

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """(n, dim) float32 unit rows, in the order given; (0, dim) for no texts.

        MiniLM truncates a text beyond its input and usem3/e5 average over it, blurring it:
        an indexer embeds the pieces of split(), not a long turn whole.
        """
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """(dim,) float32 unit vector; asymmetric models (e5) embed queries differently."""
        ...

    def split(self, text: str) -> list[str]:
        """Verbatim pieces that each fit the model's input, covering the whole text.

        Consecutive pieces overlap by about 1/8 of a window and are cut at whitespace where
        possible; a text that fits comes back alone and unchanged.
        """
        ...


def threads_or_default(threads: int | None) -> int:
    """Inference threads (or calls side by side): `threads`, else every usable core."""
    if threads is None:
        return usable_cores()
    if threads < 1:
        raise ValueError(f"threads must be 1 or more, not {threads}")
    return threads


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero), as contiguous float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


def empty(dim: int) -> np.ndarray:
    return np.zeros((0, dim), dtype=np.float32)


_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def clean(text: str) -> str:
    """The text with what breaks a tokenizer replaced, one character for one.

    Lone surrogates (lax JSON lets them in) cannot be encoded as UTF-8, and NUL ends a C
    string early. Keeping the length keeps offsets valid for slicing the original text.
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(lambda m: " " if m.group() == "\x00" else "\ufffd", text)
