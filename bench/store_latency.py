"""Recall latency and store throughput of the two stores at a history size, in one run.

    python bench/store_latency.py --conversations 10000 --database-url postgresql://…

Builds the same synthetic history (ireneo.benchmark.generate) in an embedded SQLite memory and as a
user of a PostgreSQL database (schema upgraded; the URL is the server's role). Turns are stored
with the Python API in batches of one conversation, as the server's ingest does; the vectors are
random unit vectors, put as the indexer puts them, so that the cost measured is the store's and
not the embedder's (accuracy is `ireneo bench --database-url`'s job). Then the benchmark's
questions (short and long forms) are recalled one after another, warm, with the real query
embedder. Then the copies search keeps in RAM are saved (Store.save_copies), and the first
recall of a fresh process is timed, with the saved copies and without them (a new process or
replica that would otherwise read every row). Prints one JSON document: turns stored per
second, recall p50/p95 in milliseconds, the time of the first recall in this process (which
loads the user's vectors), the time to save the copies, and a fresh process's first recall with
and without them, for each store.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from itertools import groupby
from pathlib import Path

import numpy as np
import psycopg

from ireneo import Memory
from ireneo.benchmark.generate import generate
from ireneo.config import Settings


def measure(memory: Memory, history, seed: int) -> dict[str, float]:
    conversations = [list(t) for _, t in groupby(history.turns, key=lambda t: t.session_id)]
    started = time.perf_counter()
    for turns in conversations:
        memory.store_turns(turns)
    store_s = time.perf_counter() - started
    rng = np.random.default_rng(seed)
    memory.store.set_meta("model", memory.embedder.name)
    dim = len(memory.embedder.embed_query("dimension"))
    while batch := memory.store.pending_passages(1024):
        vectors = rng.standard_normal((len(batch), dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        memory.store.put_vectors([pid for pid, _ in batch], vectors)
    queries = [q for question in history.questions for q in (question.short, question.long)]
    started = time.perf_counter()
    memory.recall(queries[0], k=8)
    first_ms = (time.perf_counter() - started) * 1000
    times = []
    for query in queries:
        started = time.perf_counter()
        memory.recall(query, k=8)
        times.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    memory.store.save_copies()
    save_ms = (time.perf_counter() - started) * 1000
    return {
        "turns": len(history.turns),
        "store_turns_per_s": len(history.turns) / store_s,
        "first_recall_ms": first_ms,
        "recall_p50_ms": statistics.median(times),
        "recall_p95_ms": statistics.quantiles(times, n=20)[-1],
        "recalls": len(times),
        "save_copies_ms": save_ms,
    }


FRESH_RECALL = """
import sys, time
from ireneo import Memory
from ireneo.config import Settings
home, database, user, query = sys.argv[1:]
opened = {"database": database or None, "user": user or None, "settings": Settings.from_env()}
with Memory(home or None, **opened) as memory:
    started = time.perf_counter()
    memory.recall(query, k=8)
print((time.perf_counter() - started) * 1000)
"""


def fresh_recall_ms(opened: dict, query: str, rounds: int = 3) -> float:
    """The median first recall of a fresh process opening the memory (`opened`: Memory's
    arguments), the recall alone: what a new process or replica pays before it has copies."""
    args = [opened.get("home", ""), opened.get("database", ""), opened.get("user", ""), query]
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", FRESH_RECALL, *map(str, args)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for _ in range(rounds)
    ]
    return statistics.median(times)


def compare_fresh(opened: dict, query: str) -> dict[str, float]:
    """A fresh process's first recall with the saved copies, then with them dropped."""
    with_copies = fresh_recall_ms(opened, query)
    if "home" in opened:
        with sqlite3.connect(opened["home"] / "memory.db") as db:
            db.execute("DELETE FROM saved_copies")
    else:
        with psycopg.connect(opened["database"]) as conn:
            conn.execute("SELECT set_config('app.user_id', %s, true)", (opened["user"],))
            conn.execute("DELETE FROM ireneo.saved_copies WHERE user_id = %s", (opened["user"],))
    return {
        "fresh_recall_saved_ms": with_copies,
        "fresh_recall_rows_ms": fresh_recall_ms(opened, query),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--database-url", required=True)
    args = parser.parse_args()
    history = generate(args.conversations, lang="en", family="A", seed=0, questions=args.questions)
    out: dict = {"conversations": args.conversations}
    settings = Settings.from_env()
    query = history.questions[0].short
    with tempfile.TemporaryDirectory(prefix="ireneo-store-latency-") as scratch:
        stores = {
            "sqlite": {"home": Path(scratch) / "home"},
            "postgresql": {
                "database": args.database_url,
                "user": f"store-latency-{uuid.uuid4().hex[:8]}",
            },
        }
        for name, opened in stores.items():
            with Memory(**opened, settings=settings) as memory:
                out[name] = measure(memory, history, 0)
            out[name].update(compare_fresh(opened, query))
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
