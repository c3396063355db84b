"""What a reranker adds to a warm recall, and what it changes in the ranking.

    python -m ireneo.benchmark.generate -n 3000 --out /tmp/h3k/src      # writes src/questions.json
    ireneo index --home /tmp/h3k/home /tmp/h3k/src
    PYTHONPATH=src python bench/rerank_cost.py /tmp/h3k/home /tmp/h3k/src/questions.json

Each question, long and short, is asked without the reranker and with it (`--rerank`, default
sentences), alternately in one process, so a busy machine slows both alike. Prints the median
recall time and strict hit@1/@3/@8 of both as a JSON document.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from ireneo import Memory
from ireneo.config import Settings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home")
    parser.add_argument("questions")
    parser.add_argument("--rerank", default="sentences")
    parser.add_argument("-k", type=int, default=8)
    args = parser.parse_args()
    with open(args.questions, encoding="utf-8") as file:
        questions = json.load(file)
    asked = [(q[form], q["session_id"]) for q in questions for form in ("long", "short")]
    seconds: dict[str, list[float]] = {"none": [], args.rerank: []}
    ranks: dict[str, list[int]] = {"none": [], args.rerank: []}
    with Memory(args.home, settings=Settings.from_env()) as memory:
        memory.recall(asked[0][0], k=args.k)  # load the model and the copies in RAM
        for query, session_id in asked:
            for rerank in seconds:
                memory.rerank = rerank
                started = time.perf_counter()
                hits = memory.recall(query, k=args.k)
                seconds[rerank].append(time.perf_counter() - started)
                sessions = list(dict.fromkeys(hit.session_id for hit in hits))
                ranks[rerank].append(
                    sessions.index(session_id) + 1 if session_id in sessions else 0
                )
    report = {
        rerank: {
            "p50_ms": round(statistics.median(times) * 1000, 1),
            **{
                f"strict@{k}": round(sum(0 < r <= k for r in ranks[rerank]) / len(asked), 3)
                for k in (1, 3, 8)
            },
        }
        for rerank, times in seconds.items()
    }
    print(json.dumps({"home": args.home, "questions": len(asked), **report}, indent=1))


if __name__ == "__main__":
    main()
