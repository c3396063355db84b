"""A fresh `ireneo recall` on a memory with its saved copies and on the same memory without them.

    PYTHONPATH=src python bench/cold_recall.py HOME [--rounds 5] [--query TEXT]

HOME is an indexed memory (`ireneo bench` leaves one per size, `ireneo index` makes one). It is
copied twice into a temporary directory, one copy without its saved copies (the `saved_copies`
rows deleted, as a memory indexed before them has none), and the two take turns: a whole
process each time (`ireneo.benchmark.run.child`: timed from outside, with its own peak RSS). The hits are compared too: the copies
must not change what a recall returns.

Medians over the rounds; a busy machine moves both, so compare the two of one run.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

from ireneo.benchmark.run import child


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--query", default="EX-308 drive fault work order")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as work:
        saved, rebuilt = Path(work) / "saved", Path(work) / "rebuilt"
        for target in (saved, rebuilt):
            shutil.copytree(args.home, target)
        with sqlite3.connect(rebuilt / "memory.db") as db:
            held = db.execute("SELECT name FROM saved_copies").fetchall()
            db.execute("DELETE FROM saved_copies")
        if not held:
            sys.exit(f"{args.home} has no saved copies: index it with this version first")

        timings: dict[str, list[float]] = {"saved copies": [], "from the rows": []}
        peaks: dict[str, list[float]] = {name: [] for name in timings}
        outputs: dict[str, set[str]] = {name: set() for name in timings}
        for _ in range(args.rounds):
            for name, home in zip(timings, (saved, rebuilt), strict=True):
                seconds, peak, output = _fresh_recall(home, args.query)
                timings[name].append(seconds)
                peaks[name].append(peak)
                outputs[name].add(output)

    for name in timings:
        print(
            f"{name:14s} {statistics.median(timings[name]):.2f} s "
            f"(from {min(timings[name]):.2f} to {max(timings[name]):.2f}), "
            f"peak RSS {statistics.median(peaks[name]):.0f} MB"
        )
    same = len(outputs["saved copies"] | outputs["from the rows"]) == 1
    print("hits: the same" if same else "hits: DIFFERENT")


def _fresh_recall(home: Path, query: str) -> tuple[float, float, str]:
    """Seconds, peak RSS (MB) and hits of one `ireneo recall --json` process."""
    seconds, peak, output = child(
        "ireneo.cli", ["recall", "--home", str(home), "--json", "--", query]
    )
    return seconds, peak, output.replace(str(home), "HOME")


if __name__ == "__main__":
    main()
