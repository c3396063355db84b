"""Rerankers: an optional last stage of recall, a closer look at the best hits.

The index keeps one vector per turn, the mean of everything the turn says. A turn that answers
the question in one sentence among small talk therefore reads as less alike than a turn about
the same equipment from end to end: for "the work order for the failure to restart on the pump
P-253", "The label on the pump P-253 is missing" outranks "...P-253, it refuses to come back up
after the weekend shutdown. It's tracked in ticket MT-8305".

- `sentences` embeds each sentence of the best hits with the memory's own model and adds the
  best sentence's cosine to the hit's score, so the answering sentence speaks for its turn. It
  needs no other model and costs some 20-25 sentences to embed per recall.
- A directory holding a cross-encoder (a sentence-transformers CrossEncoder exported to ONNX)
  reads the query and each hit together and orders the hits by its score. No PyPI wheel carries
  one's weights, so none is packaged: an image bakes one in, as it may an embedding model.

The caller names one (`load_reranker(name, embedder)`; the settings read it from
`IRENEO_RERANK` or `ireneo recall --rerank`); the default is none.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from ireneo.analyze import sentences
from ireneo.embed import Embedder, onnx_files, token_feeds, token_inputs, transformer_session
from ireneo.extras import missing
from ireneo.model import Hit
from ireneo.workers import usable_cores

NAMES = ("none", "sentences")
# The fused ranking's best hits a reranker reorders (a recall of k > 8 reorders k), and the
# best sentence's share of a hit's score: both chosen on the benchmark (docs/rerank.md).
DEPTH = 8
SENTENCE_WEIGHT = 0.3
# Sentences embedded per hit at most: a longer text is cut into this many runs of sentences.
SENTENCES_PER_HIT = 12


class SentenceReranker:
    """Each hit's score plus `weight` times the cosine of its sentence nearest the query."""

    depth = DEPTH

    def __init__(self, embedder: Embedder, weight: float = SENTENCE_WEIGHT) -> None:
        self._embedder = embedder
        self.weight = weight

    def rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        pieces = [sentences(hit.text, SENTENCES_PER_HIT) for hit in hits]
        distinct = list(dict.fromkeys(p for hit_pieces in pieces for p in hit_pieces))
        if not distinct:
            return hits
        query_vector = self._embedder.embed_query(query)
        found = self._embedder.embed_passages(distinct) @ query_vector
        cosines = dict(zip(distinct, found.tolist(), strict=True))

        def best(hit_pieces: list[str]) -> float:  # a hit without text (an image) gets 0
            return max((cosines[piece] for piece in hit_pieces), default=0.0)

        rescored = [
            replace(hit, score=hit.score + self.weight * best(hit_pieces))
            for hit, hit_pieces in zip(hits, pieces, strict=True)
        ]
        return _best_first(rescored)


class CrossEncoderReranker:
    """A cross-encoder's score for (query, hit text) becomes the hit's score and its order."""

    depth = DEPTH

    def __init__(self, model_file: Path, tokenizer_file: Path, max_tokens: int = 512) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise missing("local", "a cross-encoder reranker", exc) from None

        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_padding()
        # the longer of query and hit loses its end (the hit, unless the query is the longer)
        self._tokenizer.enable_truncation(max_tokens, strategy="longest_first")
        self._session = transformer_session(model_file, usable_cores())
        self._inputs = token_inputs(self._session)

    def rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        if not hits:
            return hits
        encodings = self._tokenizer.encode_batch([(query, hit.text) for hit in hits])
        feeds = token_feeds(encodings, self._inputs)
        logits = self._session.run(None, feeds)[0].reshape(len(hits), -1)
        # one logit (relevance), or two classes (not relevant, relevant): their difference
        scores = logits[:, -1] - logits[:, 0] if logits.shape[1] == 2 else logits[:, 0]
        rescored = [replace(hit, score=float(s)) for hit, s in zip(hits, scores, strict=True)]
        return _best_first(rescored)


def _best_first(hits: list[Hit]) -> list[Hit]:
    return sorted(hits, key=lambda hit: -hit.score)  # stable: ties keep the fused order


def load_reranker(
    name: str | None, embedder: Embedder
) -> SentenceReranker | CrossEncoderReranker | None:
    """The reranker `name` names (see check_name), on the memory's embedder; None for none."""
    check_name(name)
    if not name or name == "none":
        return None
    if name == "sentences":
        return SentenceReranker(embedder)
    return _cross_encoder(str(Path(name).expanduser().resolve()))


@functools.cache
def _cross_encoder(directory: str) -> CrossEncoderReranker:
    """One session per cross-encoder per process: every memory's recalls share it."""
    try:
        return CrossEncoderReranker(*onnx_files(Path(directory)))
    except Exception as exc:  # onnxruntime raises its own types for a bad graph
        raise ValueError(f"reranker {directory} is not a loadable cross-encoder: {exc}") from exc


def check_name(name: str | None) -> None:
    """Refuse, naming the choices, anything but none, sentences or a cross-encoder directory."""
    if not name or name in NAMES:
        return
    try:
        onnx_files(Path(name).expanduser())
    except ValueError as exc:
        raise ValueError(
            f"unknown reranker {name!r}: choose none, sentences, or the path of a cross-encoder "
            f"directory ({exc})"
        ) from None
