"""Warm recalls with a busy Python thread beside them, on PostgreSQL and on SQLite, in one process.

    python bench/recall_beside_busy.py --database-url postgresql://… [--switch-ms 5 1]

The same histories (bench/pg_recall_cost.py's: the generator's, random unit vectors, copies
saved) are stored for `--users` users in the database and in SQLite files, then warm recalls
alternate between the two stores, alone and with a thread spinning Python beside them (a
stand-in for a server's event loop and other requests), at each switch interval given. Every
round trip to PostgreSQL gives up the interpreter lock, which the busy thread then keeps for
up to the switch interval: this shows what that costs against SQLite's reads in the process.
Prints the p50 and p95 of the recalls' wall time per case.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from ireneo import Memory
from ireneo.config import Settings
from ireneo.server.limits import Limits
from ireneo.server.tools import recall_answer
from ireneo.store.postgres import open_pool

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pg_recall_cost import spin, stock  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--recalls", type=int, default=40, help="recalls a store a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--switch-ms", type=float, nargs="+", default=[5.0, 1.0])
    args = parser.parse_args()
    settings = Settings.from_env()
    users = [f"busy-{os.getpid()}-{i}" for i in range(args.users)]
    queries = stock(args.database_url, users, args.conversations, settings)
    home = Path(tempfile.mkdtemp(prefix="ireneo-busy-"))
    pool = open_pool(args.database_url, max_size=4)
    stores = {
        "postgres": [Memory(database=pool, user=user, settings=settings) for user in users],
        "sqlite": [Memory(home / user, settings=settings) for user in users],
    }
    embedder = stores["postgres"][0].embedder
    limits = Limits()
    for memories in stores.values():
        for memory in memories:
            memory._embedder = embedder
    _stock_files(stores["sqlite"], args.conversations)  # the same histories as the database's

    def recall(memory: Memory, n: int) -> None:
        recall_answer(memory, queries[n % len(queries)], limits.recall_k, limits.max_result_chars)
        memory._refs.clear()

    for memories in stores.values():
        for n, memory in enumerate(memories):
            recall(memory, n)
    spinning = threading.Event()

    for beside in (False, True):
        if beside:
            spinning.set()
            threading.Thread(target=spin, args=(spinning,), daemon=True).start()
        for switch in args.switch_ms:
            sys.setswitchinterval(switch / 1000)
            walls: dict[str, list[float]] = {name: [] for name in stores}
            for _ in range(args.rounds):
                for name, memories in stores.items():
                    for n in range(args.recalls):
                        started = time.perf_counter()
                        recall(memories[n % len(memories)], n)
                        walls[name].append((time.perf_counter() - started) * 1000)
            figures = {
                name: f"p50 {statistics.median(v):.1f} ms, p95 {np.percentile(v, 95):.1f} ms"
                for name, v in walls.items()
            }
            print(
                f"busy thread {'beside' if beside else 'none'}, switch {switch:g} ms: {figures}, "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        spinning.clear()


def _stock_files(memories: list[Memory], conversations: int) -> None:
    """SQLite memories holding what `stock` put in the database."""
    from itertools import groupby

    from ireneo.benchmark.generate import generate

    history = generate(conversations, lang="en", family="A", seed=0, questions=20)
    rng = np.random.default_rng(0)
    for memory in memories:
        for _, turns in groupby(history.turns, key=lambda t: t.session_id):
            memory.store_turns(list(turns))
        memory.store.set_meta("model", memory.embedder.name)
        memory._vectors = True
        dim = len(memory.embedder.embed_query("dimension"))
        while batch := memory.store.pending_passages(1024):
            vectors = rng.standard_normal((len(batch), dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            memory.store.put_vectors([pid for pid, _ in batch], vectors)
        memory.store.save_copies()


if __name__ == "__main__":
    main()
