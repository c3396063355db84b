"""Why the vector index holds one column per vector: onnxruntime's 8-bit product both ways.

    PYTHONPATH=src python bench/vector_scan.py [--vectors 60000] [--rounds 200]

Random unit vectors quantized as store/vectors.py does (the product's cost does not depend on
the values). Each round times one query through three onnxruntime graphs, taking turns: the
product alone with the vectors as rows ([n, d] x [d, 1]) and as columns ([1, d] x [d, n]), and
VectorIndex.nearest, which takes the columns and adds the scaling and the top 40. Prints the
medians and the rows ÷ columns ratio, which holds better than either on a busy machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from ireneo.store.vectors import VectorIndex, _quantize
from ireneo.workers import usable_cores

DIMENSIONS = 384


def product_session(shape_a: list, shape_b: list, centred: bool) -> ort.InferenceSession:
    """MatMulInteger(a u8, b): `centred`, b is u8 and both zero points are 128 (the index now);
    else b is s8 and there are none (the index before, which took 128 x sum(b) out after)."""
    inputs = ["a", "b", "centre", "centre"] if centred else ["a", "b"]
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", inputs, ["products"])],
        "product",
        [
            helper.make_tensor_value_info("a", TensorProto.UINT8, shape_a),
            helper.make_tensor_value_info(
                "b", TensorProto.UINT8 if centred else TensorProto.INT8, shape_b
            ),
        ]
        + ([helper.make_tensor_value_info("centre", TensorProto.UINT8, [])] if centred else []),
        [helper.make_tensor_value_info("products", TensorProto.INT32, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = usable_cores()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options)


def milliseconds(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vectors", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.vectors, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = VectorIndex().extended(enumerate(vectors, 1))
    rows, _ = _quantize(vectors)
    columns = np.ascontiguousarray(rows.T)
    query_vector = vectors[0]
    query, _ = _quantize(query_vector[None, :])
    centre = np.array(128, dtype=np.uint8)
    signed = (query.T.astype(np.int16) - 128).astype(np.int8)
    by_rows = product_session(["n", "d"], ["d", 1], centred=False)
    by_columns = product_session([1, "d"], ["d", "n"], centred=True)
    calls = {
        "rows [n, d] x [d, 1]": lambda: by_rows.run(None, {"a": rows, "b": signed}),
        "columns [1, d] x [d, n]": lambda: by_columns.run(
            None, {"a": query, "b": columns, "centre": centre}
        ),
        "VectorIndex.nearest (columns, top 40)": lambda: index.nearest(query_vector, 40),
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            times[name].append(milliseconds(call))
    print(f"{args.vectors:,} vectors x {DIMENSIONS}, {usable_cores()} cores, {args.rounds} rounds")
    for name, values in times.items():
        print(f"  {name:40s} p50 {statistics.median(values):6.2f} ms")
    by_rows_ms, by_columns_ms = list(times.values())[:2]
    ratios = [a / b for a, b in zip(by_rows_ms, by_columns_ms, strict=True)]
    print(f"  rows ÷ columns, median of paired ratios: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
