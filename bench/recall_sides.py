"""Where a warm recall's time goes: its keyword side and its dense side, alone and side by side.

    PYTHONPATH=src python bench/recall_sides.py HOME QUESTIONS_JSON [--rounds 2]

HOME is a memory indexed by `ireneo bench` (or `ireneo index`) and QUESTIONS_JSON the
`questions.json` written beside its history (`python -m ireneo.benchmark.generate`). Recall runs the
keyword side (BM25 candidates, windows, names) on the calling thread while another embeds the
query and scans the vectors. Each question is timed, in one process, as:

- recall: `Memory.recall`, as served;
- keyword side: the same recall without an embedder;
- dense side: embedding the query and the exact vector scan;
- side by side: both at once, on two threads, as recall runs them;
- dense side beside: the dense side's own time when it runs beside the keyword side;
- one after the other: both on the calling thread.

`--switch-interval MS` sets the interpreter's switch interval (5 ms by default), to see whether
the two sides wait on the interpreter lock.

Medians in ms, per round; a busy machine moves every figure, so compare within a round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ireneo import Memory, search
from ireneo.config import Settings
from ireneo.store import Filters


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home")
    parser.add_argument("questions")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--switch-interval", type=float, metavar="MS")
    args = parser.parse_args()
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval / 1000)
    memory = Memory(args.home, settings=Settings.from_env())
    asked = json.loads(Path(args.questions).read_text(encoding="utf-8"))
    queries = [q["long"] for q in asked] + [q["short"] for q in asked]
    embed = memory.embedder.embed_query
    beside = ThreadPoolExecutor(1)

    def keyword(query: str) -> object:
        return search.recall(
            memory.store, None, query, 8, Filters(), fusion=memory.fusion, hangul=memory.hangul
        )

    def dense(query: str) -> object:
        return memory.store.dense_search(embed(query), memory.fusion.candidates, Filters())

    dense_beside: list[float] = []

    def timed_dense(query: str) -> None:
        started = time.perf_counter()
        dense(query)
        dense_beside.append(time.perf_counter() - started)

    def side_by_side(query: str) -> None:
        scan = beside.submit(timed_dense, query)
        keyword(query)
        scan.result()

    sides: dict[str, Callable[[str], object]] = {
        "recall": lambda query: memory.recall(query, k=8),
        "keyword side": keyword,
        "dense side": dense,
        "side by side": side_by_side,
        "one after the other": lambda query: (keyword(query), dense(query)),
    }
    for query in queries[:40]:  # warm up: the layout, the vectors, the model
        memory.recall(query, k=8)
    columns = [*sides, "dense side beside"]
    print("| round | " + " | ".join(columns) + " |\n|---:|" + "---:|" * len(columns))
    for round_ in range(1, args.rounds + 1):
        dense_beside.clear()
        medians = [_median_ms(side, queries) for side in sides.values()]
        medians.append(statistics.median(dense_beside) * 1000)
        print(f"| {round_} | " + " | ".join(f"{m:.2f}" for m in medians) + " |")


def _median_ms(side: Callable[[str], object], queries: list[str]) -> float:
    times = []
    for query in queries:
        started = time.perf_counter()
        side(query)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


if __name__ == "__main__":
    main()
