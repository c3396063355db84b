"""Recall of the questions as written and typed in lowercase, as agents and people often type.

    python -m ireneo.benchmark.generate -n 3000 --out /tmp/h3k/src      # writes src/questions.json
    ireneo index --home /tmp/h3k/home /tmp/h3k/src
    PYTHONPATH=src python bench/lowercase.py /tmp/h3k/home /tmp/h3k/src/questions.json

Each question, long and short, is asked as written and in lowercase, alternately in one process,
so a busy machine slows both alike. Prints the median recall time and strict hit@1/@3/@8 of
both, per form, as a JSON document.
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
    parser.add_argument("-k", type=int, default=8)
    args = parser.parse_args()
    with open(args.questions, encoding="utf-8") as file:
        questions = json.load(file)
    typings = {"written": str, "lowercase": str.lower}
    seconds: dict[str, list[float]] = {typing: [] for typing in typings}
    ranks: dict[tuple[str, str], list[int]] = {}
    with Memory(args.home, settings=Settings.from_env()) as memory:
        memory.recall(questions[0]["long"], k=args.k)  # load the model and the copies in RAM
        for question in questions:
            for form in ("long", "short"):
                for typing, typed in typings.items():
                    started = time.perf_counter()
                    hits = memory.recall(typed(question[form]), k=args.k)
                    seconds[typing].append(time.perf_counter() - started)
                    sessions = list(dict.fromkeys(hit.session_id for hit in hits))
                    found = question["session_id"]
                    rank = sessions.index(found) + 1 if found in sessions else 0
                    ranks.setdefault((form, typing), []).append(rank)
    report = {
        typing: {
            "p50_ms": round(statistics.median(times) * 1000, 1),
            **{
                form: {
                    f"strict@{k}": round(
                        sum(0 < r <= k for r in ranks[form, typing]) / len(questions), 3
                    )
                    for k in (1, 3, 8)
                }
                for form in ("long", "short")
            },
        }
        for typing, times in seconds.items()
    }
    print(json.dumps({"home": args.home, "questions": len(questions), **report}, indent=1))


if __name__ == "__main__":
    main()
