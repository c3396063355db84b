"""How fast secret redaction runs over ordinary turns: the benchmark's generated English text.

    PYTHONPATH=src python bench/redaction_speed.py [--conversations 1000] [--repeats 5]

Prints turns, characters, and the median of `repeats` timings as turns/s and MB/s; also how many
turns the redaction changed (there are no secrets in that text, so this should be 0).
"""

from __future__ import annotations

import argparse
import statistics
import time

from ireneo.benchmark.generate import generate
from ireneo.privacy import redact_turn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    turns = generate(args.conversations, questions=0).turns
    chars = sum(len(turn.text) for turn in turns)
    redact_turn(turns[0])  # compile the patterns outside the timing
    timings, changed = [], 0
    for _ in range(args.repeats):
        started = time.perf_counter()
        changed = sum(redact_turn(turn) is not turn for turn in turns)
        timings.append(time.perf_counter() - started)
    median = statistics.median(timings)
    print(
        f"{len(turns):,} turns, {chars / 1e6:.1f} MB of text: median {median:.2f} s over "
        f"{args.repeats} runs = {len(turns) / median:,.0f} turns/s, "
        f"{chars / 1e6 / median:.2f} MB/s; turns changed: {changed}"
    )


if __name__ == "__main__":
    main()
