"""Transformer models run by onnxruntime: the packaged MiniLMs, e5-small-q8, a local directory.

One class runs them all, so every ONNX model shares one inference path: tokenize, cut what is
beyond the input as the tokenizer would, batch by length, pool, normalise. The session and
feed helpers also serve the cross-encoder reranker (ireneo.rerank).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ireneo.embed.base import clean, empty, normalise, threads_or_default
from ireneo.embed.split import SLACK, split_by_offsets
from ireneo.embed.wordpiece import WordPiece
from ireneo.extras import missing
from ireneo.workers import helpers

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from ireneo.embed.e5 import E5Tokenizer

# Texts sorted by length are batched up to a model's batch size (32 for a float model), and
# while texts x tokens^2 (the size of the attention tensors) stays within BATCH_ATTENTION:
# onnxruntime's arena keeps its peak for good, and larger batches bring no more speed on a CPU
# (docs/embedding.md).
BATCH_TEXTS = 32
BATCH_ATTENTION = 2 * 256 * 256


class OnnxEmbedder:
    """A sentence-transformers model exported to ONNX, run with onnxruntime.

    `batch_texts=1` runs one text per call with calls side by side, one per thread: a call on
    one short text has matrices too small to share between threads, and an 8-bit model's
    vector then depends on its text alone. A batched model runs one call at a time on every
    thread.
    """

    def __init__(
        self,
        name: str,
        model_file: Path,
        tokenizer_file: Path,
        max_tokens: int,
        pooling: str = "mean",
        query_prefix: str = "",
        passage_prefix: str = "",
        batch_texts: int = BATCH_TEXTS,
        threads: int | None = None,
    ) -> None:
        self.name = name
        self.max_tokens = max_tokens
        self._pooling = pooling
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self._batch_texts = batch_texts

        # One tokenizer, untruncated, serves split() as well; _embed cuts what is too long.
        self._tokenizer, self._pad_id = load_tokenizer(tokenizer_file)
        self._tokenizer_file = tokenizer_file
        self._closing = closing_tokens(self._tokenizer)
        overhead = len(self._tokenizer.encode(passage_prefix).ids)
        self._budget = max(16, max_tokens - overhead - SLACK)

        threads = threads_or_default(threads)
        parallel_calls = threads if batch_texts == 1 else 1
        self._session = transformer_session(model_file, threads if parallel_calls == 1 else 1)
        self._workers = ThreadPoolExecutor(parallel_calls, thread_name_prefix="ireneo-embed")
        self._inputs = token_inputs(self._session)
        self._output = self._pick_output()
        # A real word: a tokenizer without special tokens gives "" no tokens at all.
        self.dim = int(self._forward([self._tokenizer.encode("probe")]).shape[1])

    @classmethod
    def from_directory(cls, directory: Path, threads: int | None = None) -> OnnxEmbedder:
        """A sentence-transformers directory holding an ONNX export and its tokenizer.json."""
        directory = directory.resolve()
        model, tokenizer = onnx_files(directory)
        pooling = read_json(directory / "1_Pooling" / "config.json")
        st_config = read_json(directory / "sentence_bert_config.json")
        prompts = read_json(directory / "config_sentence_transformers.json").get("prompts") or {}
        return cls(
            name=f"local:{directory}",
            model_file=model,
            tokenizer_file=tokenizer,
            max_tokens=int(st_config.get("max_seq_length") or tokenizer_limit(tokenizer)),
            pooling=pooling_mode(pooling),
            # e5/bge-style models declare their prefixes as prompts; others have none.
            query_prefix=prompts.get("query", ""),
            passage_prefix=prompts.get("passage", prompts.get("document", "")),
            threads=threads,
        )

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._embed([self._passage_prefix + clean(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([self._query_prefix + clean(text)])[0]

    @property
    def _untruncated(self) -> Tokenizer | E5Tokenizer | WordPiece:
        """split()'s tokenizer, which sees every token: the model's own, which runs untruncated
        (_embed cuts what is too long), so no second copy is ever read."""
        return self._tokenizer

    def split(self, text: str) -> list[str]:
        return split_by_offsets(text, self._budget, self._offsets)

    def _offsets(self, text: str) -> list[tuple[int, int]]:
        return self._untruncated.encode(text, add_special_tokens=False).offsets

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return empty(self.dim)
        encodings = [
            truncated(e, self.max_tokens, self._closing)
            for e in self._tokenizer.encode_batch(texts)
        ]
        # Batches of similar lengths waste little on padding (~2x faster than input order).
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        batches = length_batches(order, [len(e.ids) for e in encodings], self._batch_texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if len(batches) == 1:  # a query: no hand-over to a worker
            out[batches[0]] = self._forward([encodings[i] for i in batches[0]])
            return out
        forward = lambda batch: self._forward([encodings[i] for i in batch])  # noqa: E731
        calls = helpers(self._workers).map(forward, batches)  # a lowered thread's: lowered
        for batch, vectors in zip(batches, calls, strict=True):
            out[batch] = vectors
        return out

    def _forward(self, encodings: list[Any]) -> np.ndarray:
        feeds = token_feeds(encodings, self._inputs, self._pad_id)
        output = self._session.run([self._output], feeds)[0]
        if output.ndim == 2:  # the export pools inside the graph
            return normalise(output)
        if self._pooling == "cls":
            return normalise(output[:, 0])
        mask = token_mask(encodings).astype(np.float32)  # the graph may not take a mask
        summed = np.einsum("btd,bt->bd", output, mask)
        return normalise(summed / np.maximum(mask.sum(axis=1, keepdims=True), 1))

    def _pick_output(self) -> str:
        outputs = self._session.get_outputs()
        for wanted in ("last_hidden_state", "token_embeddings", "sentence_embedding"):
            if any(o.name == wanted for o in outputs):
                return wanted
        # An export may also echo its inputs (integer tensors): the token vectors are the
        # float output of rank 3, else the pooled one of rank 2.
        floats = [o for o in outputs if o.type == "tensor(float)"]
        for rank in (3, 2):
            for output in floats:
                if len(output.shape) == rank:
                    return output.name
        return outputs[0].name


# --------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Cut:
    """The first tokens of a single text's encoding, with its closing special token."""

    ids: list[int]
    type_ids: list[int]


def truncated(encoding: Any, most: int, closing: int = 1) -> Any:
    """`encoding` (one text, its special tokens around it) cut to `most` tokens as the
    tokenizer's own truncation would: the text's first tokens, then its `closing` special
    tokens (</s>, [SEP])."""
    n = len(encoding.ids)
    if n <= most:
        return encoding
    keep, tail = most - closing, n - closing
    return Cut(
        encoding.ids[:keep] + encoding.ids[tail:],
        encoding.type_ids[:keep] + encoding.type_ids[tail:],
    )


def load_tokenizer(tokenizer_file: Path) -> tuple[Any, int]:
    """The tokenizer in `tokenizer_file`, untruncated and unpadded, and its padding id: a
    SentencePiece model (.model, e5's: ireneo.embed.e5), a BERT WordPiece tokenizer.json (the
    MiniLMs': ireneo.embed.wordpiece), or any other tokenizer.json, read by the `tokenizers`
    package (the `local` extra)."""
    if tokenizer_file.suffix == ".model":
        from ireneo.embed.e5 import E5Tokenizer

        e5 = E5Tokenizer(tokenizer_file)
        return e5, e5.pad
    try:
        wordpiece = WordPiece(tokenizer_file)
        return wordpiece, wordpiece.pad
    except ValueError:  # not BERT's WordPiece (or not JSON): `tokenizers` reads it or says why
        pass
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise missing("local", f"the tokenizer {tokenizer_file}", exc) from None

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    padding = tokenizer.padding or {}
    # A tokenizer.json may pad every text to a fixed length (MiniLM's pads to 128, a 9x
    # slowdown): batches are padded in token_feeds, to their own longest text.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer, int(padding.get("pad_id", 0))


def closing_tokens(tokenizer: Any) -> int:
    """How many special tokens the tokenizer puts after a text's own (1 for [SEP] or </s>),
    which truncation keeps."""
    whole = tokenizer.encode("probe").ids
    text = tokenizer.encode("probe", add_special_tokens=False).ids
    for start in range(len(whole) - len(text) + 1):
        if whole[start : start + len(text)] == text:
            return len(whole) - start - len(text)
    return 0


def length_batches(order: list[int], lengths: list[int], most: int) -> list[list[int]]:
    """Consecutive runs of order (ascending length), each within the batch limits above."""
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:  # ascending length: the newest text is the widest
        too_big = (len(batch) + 1) * lengths[i] ** 2 > BATCH_ATTENTION
        if batch and (len(batch) == most or too_big):
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    return batches


# --------------------------------------------------------------------------- sessions

# onnxruntime fuses each residual Add and LayerNormalization of a transformer into one
# SkipLayerNormalization, whose CPU kernel is the slower of the two here (docs/models.md).
SLOW_FUSIONS = ["SkipLayerNormFusion"]


def transformer_session(model_file: Path, threads: int, *, arena: bool = True) -> Any:
    """An onnxruntime session on the CPU for a transformer's ONNX graph, on `threads` threads.
    `arena`: onnxruntime's memory arena for activations (on; bench/ort_arena.py measures it
    off: ~3% more CPU a turn for a few MB)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.enable_cpu_mem_arena = arena
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    # Spinning workers would keep both cores busy between calls, starving the HTTP server that
    # shares the process.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        str(model_file),
        sess_options=options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=SLOW_FUSIONS,
    )


def token_inputs(session: Any) -> dict[str, type]:
    """The integer type of each input of an onnxruntime session over a transformer, whose
    inputs must be the tokenizer's: `input_ids`, and `attention_mask`, `token_type_ids` if any."""
    inputs = {i.name: (np.int32 if "int32" in i.type else np.int64) for i in session.get_inputs()}
    if "input_ids" not in inputs or set(inputs) - {"input_ids", "attention_mask", "token_type_ids"}:
        raise ValueError(f"unsupported model inputs {sorted(inputs)}")
    return inputs


def token_feeds(encodings: list[Any], inputs: dict[str, type], pad_id: int = 0) -> dict:
    """A batch of tokenizer encodings (single texts or pairs) as the inputs of `token_inputs`,
    padded to the longest with `pad_id`."""
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    types = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        types[row, : len(encoding.ids)] = encoding.type_ids
    feeds = {"input_ids": ids, "attention_mask": token_mask(encodings), "token_type_ids": types}
    return {name: feeds[name].astype(dtype) for name, dtype in inputs.items()}


def token_mask(encodings: list[Any]) -> np.ndarray:
    """1 over each encoding's tokens, 0 over the padding after them."""
    lengths = np.array([len(e.ids) for e in encodings])
    return (np.arange(lengths.max()) < lengths[:, None]).astype(np.int64)


# --------------------------------------------------------------------------- model directories


def onnx_files(directory: Path) -> tuple[Path, Path]:
    """The ONNX graph and tokenizer.json of a model directory exported for onnxruntime."""
    places = (directory / "model.onnx", directory / "onnx" / "model.onnx")
    model = next((p for p in places if p.is_file()), None)
    tokenizer = directory / "tokenizer.json"
    if model is None or not tokenizer.is_file():
        raise ValueError("it needs model.onnx (or onnx/model.onnx) and tokenizer.json")
    return model, tokenizer


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`; {} when the file is missing or holds no object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path.name} is unreadable: {exc}") from exc
    return data if isinstance(data, dict) else {}


def tokenizer_limit(tokenizer_file: Path) -> int:
    """The truncation length a tokenizer.json declares; 512 (BERT's positions) if none."""
    truncation = read_json(tokenizer_file).get("truncation") or {}
    return int(truncation.get("max_length") or 512)


def pooling_mode(config: dict[str, Any]) -> str:
    if not config or config.get("pooling_mode_mean_tokens"):
        return "mean"
    if config.get("pooling_mode_cls_token"):
        return "cls"
    modes = [k for k, v in config.items() if k.startswith("pooling_mode") and v]
    raise ValueError(f"unsupported pooling {modes} (ireneo runs mean or cls pooling)")
