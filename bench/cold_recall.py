"""A fresh `ireneo recall` on a memory with its saved copies and on the same memory without them;
or, with `--users`, what a server pays to open many small memories and keep them open.

    PYTHONPATH=src python bench/cold_recall.py HOME [--rounds 5] [--query TEXT]
    PYTHONPATH=src python bench/cold_recall.py --users USERS_DIR [--limit 120] [--recalls 1]

HOME is an indexed memory (`ireneo bench` leaves one per size, `ireneo index` makes one). It is
copied twice into a temporary directory, one copy without its saved copies (the `saved_copies`
rows deleted, as a memory indexed before them has none), and the two take turns: a whole
process each time (`ireneo.benchmark.run.child`: timed from outside, with its own peak RSS). The hits are compared too: the copies
must not change what a recall returns.

Medians over the rounds; a busy machine moves both, so compare the two of one run.

`--users` (a server's `users` directory, e.g. a many-users run's home; it is read, not written)
opens each memory as the server does, recalls it as `recall_my_conversations` does (the model
loaded once, shared), `--recalls` times with the benchmark's questions, and keeps it open. It
prints the median CPU of opening a memory, of its first (cold) recall and of a warm one, and
the RSS each open memory holds (glibc's free memory trimmed, as the server trims it) against
its own estimate (`Store.resident_bytes`, which the server's open-memory budget sums). Run it
with another tree's `src` on PYTHONPATH to compare trees on the same memories.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ireneo.benchmark.run import child


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home", type=Path, nargs="?")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--query", default="EX-308 drive fault work order")
    parser.add_argument("--users", type=Path, help="open many memories of this directory")
    parser.add_argument("--limit", type=int, default=120, help="memories opened (--users)")
    parser.add_argument("--recalls", type=int, default=1, help="recalls a memory (--users)")
    args = parser.parse_args()
    if args.users is not None:
        many_memories(args.users, args.limit, args.recalls)
        return
    if args.home is None:
        parser.error("name a HOME, or --users")

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


def many_memories(users: Path, limit: int, recalls: int) -> None:
    """Open up to `limit` memories of `users`, each recalled `recalls` times and kept open."""
    from ireneo import Memory
    from ireneo.benchmark.generate import generate
    from ireneo.config import Settings
    from ireneo.server.limits import Limits
    from ireneo.server.tools import recall_answer

    homes = sorted(p for p in users.iterdir() if (p / "memory.db").exists())[: limit + 1]
    if len(homes) < 2:
        sys.exit(f"{users} holds no memories")
    settings, limits = Settings.from_env(), Limits()
    questions = generate(40, lang="en", family="A", seed=1, questions=40).questions
    queries = [question.short for question in questions]
    scratch = Path(tempfile.mkdtemp(prefix="ireneo-cold-"))
    first = Memory(_copy(homes[0], scratch), settings=settings)  # loads the model, warms up
    embedder = first.embedder
    recall_answer(first, queries[0], limits.recall_k, limits.max_result_chars)
    first.close()
    held: list = []
    cpu: dict[str, list[float]] = {"open": [], "first recall": [], "warm recall": []}
    before = _rss()
    for n, home in enumerate(homes[1:]):
        copy = _copy(home, scratch)  # a copy: a memory opened may write (its log, a record)
        started = time.process_time()
        memory = Memory(copy, settings=settings)
        memory._embedder = embedder
        done = time.process_time()
        cpu["open"].append((done - started) * 1000)
        for r in range(max(1, recalls)):
            query = queries[(7 * n + r) % len(queries)]
            recall_answer(memory, query, limits.recall_k, limits.max_result_chars)
            started, done = done, time.process_time()
            cpu["first recall" if r == 0 else "warm recall"].append((done - started) * 1000)
        held.append(memory)
    after = _rss()
    if recalls < 2:  # a warm recall of each, once the RSS is read
        for n, memory in enumerate(held):
            started = time.process_time()
            query = queries[(7 * n + 3) % len(queries)]
            recall_answer(memory, query, limits.recall_k, limits.max_result_chars)
            cpu["warm recall"].append((time.process_time() - started) * 1000)
    estimate = statistics.mean(memory.store.resident_bytes() for memory in held)
    real = (after - before) / len(held)
    for memory in held:
        memory.close()
    shutil.rmtree(scratch, ignore_errors=True)
    for name, times in cpu.items():
        if times:
            print(f"{name:13s} {statistics.median(times):.2f} ms of CPU (median of {len(times)})")
    print(
        f"held open: {len(held)} memories, {real / 1024:.0f} KiB of RSS each, "
        f"estimated {estimate / 1024:.0f} KiB ({estimate / real:.2f} of it)"
    )


def _copy(home: Path, scratch: Path) -> Path:
    target = scratch / home.name
    shutil.copytree(home, target)
    return target


def _rss() -> int:
    """This process's resident bytes, after a collection and glibc's trim (as the server's)."""
    import ctypes
    import gc
    import os

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _fresh_recall(home: Path, query: str) -> tuple[float, float, str]:
    """Seconds, peak RSS (MB) and hits of one `ireneo recall --json` process."""
    seconds, peak, output = child(
        "ireneo.cli", ["recall", "--home", str(home), "--json", "--", query]
    )
    return seconds, peak, output.replace(str(home), "HOME")


if __name__ == "__main__":
    main()
