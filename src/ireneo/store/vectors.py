"""A memory's vectors in RAM, searched exactly: the same in every store.

Each unit vector is held as 8-bit codes with a scale of its own (its largest component maps to
127), a quarter of float32's bytes. A recall reads every vector, so bytes are its cost: at 60,000
passages x 384 the scan drops from 92 MB to 23 MB, which also stops it from pushing the embedding
model out of the CPU's cache. The cosines it gives are within 0.004 of the float ones (measured
on the benchmark's 10,000-conversation history: the top 40 agree to 99.6%).
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import tempfile
import threading
from collections.abc import Iterable
from itertools import islice
from pathlib import Path

import numpy as np

from ireneo.config import model_cache
from ireneo.store.saved import pack, unpack
from ireneo.workers import usable_cores

_QUANTIZE_ROWS = 4096
_CENTRE = 128  # codes are stored as uint8, value + 128; the product takes the 128 back out
_CENTRE_CODE = np.array(_CENTRE, dtype=np.uint8)


class VectorIndex:
    """Unit vectors by passage id, ascending. Its vectors never change once built: a store swaps
    in a new index as vectors arrive, so a search running meanwhile keeps a consistent view.

    A search computes the cosine of every vector with the query; the last query's are kept, so
    that asking `cosines_of` the same query (a recall does, for its candidate windows) is a
    lookup instead of a gather over the columns (~0.5 ms at 60,000 vectors).
    """

    def __init__(
        self,
        ids: np.ndarray | None = None,
        codes: np.ndarray | None = None,  # [dimensions, vectors]
        scales: np.ndarray | None = None,
    ) -> None:
        self.ids = np.zeros(0, dtype=np.int64) if ids is None else ids
        # one column per vector: see _nearest_session for why not one row
        self._columns = np.zeros((0, 0), dtype=np.uint8) if codes is None else codes
        self._scales = np.zeros(0, dtype=np.float32) if scales is None else scales
        self._last_scan: tuple[bytes, np.ndarray] | None = None  # (query, every cosine)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def last_id(self) -> int:
        return int(self.ids[-1]) if len(self.ids) else 0

    def extended(self, rows: Iterable[tuple[int, np.ndarray]]) -> VectorIndex:
        """This index with `(passage_id, vector)` rows appended, whose ids all follow the last
        one held.

        Rows are taken and quantized a chunk at a time, so reading a whole memory never holds
        its float vectors at once (92 MB at 60,000 passages, against 23 MB of codes).
        """
        ids, codes, scales = [self.ids], [self._columns], [self._scales]
        rows = iter(rows)
        while chunk := list(islice(rows, _QUANTIZE_ROWS)):
            ids.append(np.fromiter((pid for pid, _ in chunk), np.int64, len(chunk)))
            chunk_codes, chunk_scales = _quantize(np.vstack([vector for _, vector in chunk]))
            # in C order: hstack keeps the order of its parts, and onnxruntime would copy
            # columns held in Fortran order (23 MB at 60,000) on every search
            codes.append(np.ascontiguousarray(chunk_codes.T))
            scales.append(chunk_scales)
        if len(ids) == 1:
            return self
        if not len(self.ids):  # an empty index's codes have no height yet
            codes = codes[1:]
        return VectorIndex(np.concatenate(ids), np.hstack(codes), np.concatenate(scales))

    def saved(self) -> memoryview:
        """This index as bytes (store/saved.py): what `from_saved` reads."""
        return pack({"ids": self.ids, "codes": self._columns, "scales": self._scales})

    @classmethod
    def from_saved(cls, data: bytes | memoryview) -> VectorIndex:
        """The index `saved` wrote. ValueError for bytes that do not hold one whole."""
        parts = unpack(data)
        try:
            ids, codes, scales = parts["ids"], parts["codes"], parts["scales"]
        except KeyError as exc:
            raise ValueError(f"a saved vector index lacks {exc}") from exc
        if not (
            all(isinstance(part, np.ndarray) for part in (ids, codes, scales))
            and codes.dtype == np.uint8
            and codes.ndim == 2
            and codes.flags.c_contiguous
            and ids.dtype == np.int64
            and scales.dtype == np.float32
            and len(ids) == len(scales) == codes.shape[1]
        ):
            raise ValueError("a saved vector index's parts disagree")
        return cls(ids, codes, scales)

    def nearest(
        self, query: np.ndarray, limit: int, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The `limit` passages nearest `query`, best first, among `allowed` ids (None: all)."""
        if len(self.ids) == 0 or limit <= 0:
            return []
        codes, scale = _quantize(query[None, :])
        if allowed is None:
            mask = self._no_mask
        else:
            mask = np.where(np.isin(self.ids, allowed), 0.0, -np.inf).astype(np.float32)
        values, positions, cosines = _nearest_session().run(
            None,
            {
                "query": codes,
                "columns": self._columns,
                "centre": _CENTRE_CODE,
                "scales": self._scales,
                "query_scale": scale,
                "mask": mask,
                "limit": np.array([min(limit, len(self.ids))], np.int64),
            },
        )
        self._last_scan = (query.tobytes(), cosines)
        return [
            (int(self.ids[position]), float(value))
            for position, value in zip(positions.tolist(), values.tolist(), strict=True)
            if value != -np.inf
        ]

    @functools.cached_property
    def _no_mask(self) -> np.ndarray:
        return np.zeros(len(self.ids), dtype=np.float32)

    def median_cosine(self, query: np.ndarray) -> float:
        """The median cosine of `query` over the vectors (over at most 4,096 of them, evenly
        spread), nan with none: how near this query an unrelated passage is."""
        if len(self.ids) == 0:
            return math.nan
        step = max(1, len(self.ids) // 4096)
        kept = self._kept(query)
        if kept is not None:  # the sample's cosines by position, in float64 as cosines_of gives
            return float(np.median(kept[::step].astype(np.float64)))
        return float(np.median(self.cosines_of(query, self.ids[::step])))

    def cosines_of(self, query: np.ndarray, passage_ids: np.ndarray) -> np.ndarray:
        """The cosine of each of `passage_ids`, nan for one without a vector: exactly what
        `nearest` computes for them, the query quantized as there."""
        wanted = np.asarray(passage_ids, dtype=np.int64)
        cosines = np.full(len(wanted), np.nan)
        if len(self.ids) == 0 or not len(wanted):
            return cosines
        positions = np.minimum(np.searchsorted(self.ids, wanted), len(self.ids) - 1)
        held = self.ids[positions] == wanted
        positions = positions[held]
        kept = self._kept(query)
        if kept is not None:
            cosines[held] = kept[positions]
            return cosines
        codes, scale = _quantize(query[None, :])
        # the graph's steps in its order, so both ways give the same float32 to the bit
        products = (self._columns[:, positions].T.astype(np.int32) - _CENTRE) @ (
            codes[0].astype(np.int32) - _CENTRE
        )
        cosines[held] = products.astype(np.float32) * self._scales[positions] * scale[0]
        return cosines

    def _kept(self, query: np.ndarray) -> np.ndarray | None:
        """Every vector's cosine with `query`, by position, when the last search was for it."""
        last = self._last_scan  # read once: a search on another thread may replace it
        return last[1] if last is not None and last[0] == query.tobytes() else None


def _quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows as uint8 codes (value + 128) and the scale that maps each back."""
    vectors = np.asarray(vectors, dtype=np.float32)
    scales = np.maximum(np.abs(vectors).max(axis=1), 1e-12) / 127
    codes = np.rint(vectors / scales[:, None]) + _CENTRE
    return np.ascontiguousarray(codes, dtype=np.uint8), scales.astype(np.float32)


_session = None
_session_lock = threading.Lock()


def _nearest_session():  # noqa: ANN202 - onnxruntime's InferenceSession, imported lazily
    """One onnxruntime graph: the cosine of every vector with the query and the `limit` best.

    MatMulInteger(query u8 [1, d], columns u8 [d, n]) with both zero points at 128 gives the
    int32 products of the signed codes; numpy has no 8-bit matrix product (it would widen to
    int32 first, 4x the bytes again), onnxruntime's runs on the CPU's 8-bit dot-product
    instructions, on every usable core. The vectors are the product's columns, not its rows:
    onnxruntime multiplies one row by 60,000 columns in 2.5-2.8 ms here, 60,000 rows by one
    column in 3.7-4.1 (2 cores, bench/vector_scan.py), and a recall waits for it
    (docs/benchmark.md, "Warm recall"). The products are scaled back to cosines and the best
    taken (TopK: ties to the lower index) in the same graph, which spares numpy three passes and
    a partition over every vector (~0.4 ms at 60,000). `mask` is 0, or -inf for a vector a filter leaves out.
    Workers sleep instead of spinning when idle.
    """
    global _session
    with _session_lock:
        if _session is None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = usable_cores()
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            _session = ort.InferenceSession(
                _nearest_graph(), options, providers=["CPUExecutionProvider"]
            )
        return _session


def _nearest_graph() -> str | bytes:
    """The graph of `_nearest_session`: a file in the model cache, written the first time.

    Building it takes the onnx package, whose import is ~45 ms of every fresh process's first
    recall; onnxruntime reads the file without it. The file's name carries a digest of this
    module, so a changed graph is built again. Where the cache cannot be written, the graph's
    bytes are used as they are.
    """
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    path = model_cache() / f"nearest-{digest}.onnx"
    if path.is_file():
        return str(path)
    from onnx import TensorProto, helper

    def tensor(name: str, kind: int, shape: list) -> object:
        return helper.make_tensor_value_info(name, kind, shape)

    graph = helper.make_graph(
        [
            helper.make_node(
                "MatMulInteger", ["query", "columns", "centre", "centre"], ["products"]
            ),
            # one value a vector, shaped [n] as `scales` and `mask` are
            helper.make_node("Reshape", ["products", "flat"], ["vector_products"]),
            # exact in float32 up to 512 dimensions (|product| < 512 * 128 * 128 < 2^24)
            helper.make_node("Cast", ["vector_products"], ["exact"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["exact", "scales"], ["scaled"]),
            helper.make_node("Mul", ["scaled", "query_scale"], ["cosines"]),
            helper.make_node("Add", ["cosines", "mask"], ["allowed"]),
            helper.make_node("TopK", ["allowed", "limit"], ["values", "indices"]),
        ],
        "nearest",
        [
            tensor("query", TensorProto.UINT8, [1, "d"]),
            tensor("columns", TensorProto.UINT8, ["d", "n"]),
            tensor("centre", TensorProto.UINT8, []),
            tensor("scales", TensorProto.FLOAT, ["n"]),
            tensor("query_scale", TensorProto.FLOAT, [1]),
            tensor("mask", TensorProto.FLOAT, ["n"]),
            tensor("limit", TensorProto.INT64, [1]),
        ],
        [
            tensor("values", TensorProto.FLOAT, ["k"]),
            tensor("indices", TensorProto.INT64, ["k"]),
            tensor("cosines", TensorProto.FLOAT, ["n"]),
        ],
        initializer=[helper.make_tensor("flat", TensorProto.INT64, [1], [-1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every onnxruntime ireneo supports
    data = model.SerializeToString()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:  # a read-only cache: build it in every process
        return data
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        # readable as the model beside it is: an image builds the cache as root for another user
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)  # atomic: a concurrent process writes the same bytes
    except OSError:  # a full cache: nothing half written is left in it
        Path(temporary).unlink(missing_ok=True)
    return data
