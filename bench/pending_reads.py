"""What an index run reads to find the passages without a vector, on SQLite: the counters and
the newest vector (SQLiteStore.count_pending, pending_passages) against the join over every
passage that both ran before, in one process, taking turns.

    python bench/pending_reads.py --work DIR [--conversations 1000] [--pending 7] [--rounds 8]

Builds (once, in DIR) a memory of a generated history of `--conversations` conversations
(six turns each), then takes the vectors of its newest `--pending` passages away, as a post
leaves them for the indexer. Each round times what one index run asked before (the join's
count twice, then its first batch of 64) and what it asks now, 20 times each, and prints the
medians of the rounds' medians (CPU, milliseconds). Both must find the same passages.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from ireneo import Memory
from ireneo.benchmark.generate import generate, write_funes_jsonl

JOIN = "FROM passages p LEFT JOIN vectors v ON v.passage_id = p.id WHERE v.passage_id IS NULL"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True, help="where the memory is kept (built once)")
    p.add_argument("--conversations", type=int, default=1000)
    p.add_argument("--pending", type=int, default=7, help="newest passages left without a vector")
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args()

    home = args.work / f"memory-{args.conversations}"
    if not home.exists():
        history = generate(args.conversations, seed=3, questions=0)
        write_funes_jsonl(history, args.work / f"in-{args.conversations}")
        with Memory(home) as memory:
            memory.index([args.work / f"in-{args.conversations}"])
    with Memory(home) as memory:
        store = memory.store
        db = store._db  # the join needs this store's own connection: SQLite only
        with store._transaction() as tx:
            newest = tx.execute("SELECT max(id) FROM passages").fetchone()[0]
            tx.execute("DELETE FROM vectors WHERE passage_id > ?", (newest - args.pending,))

        def before() -> tuple[int, list[int]]:
            count = db.execute(f"SELECT count(*) {JOIN}").fetchone()[0]
            db.execute(f"SELECT count(*) {JOIN}").fetchone()
            rows = db.execute(f"SELECT p.id, p.text {JOIN} AND p.id > 0 ORDER BY p.id LIMIT 64")
            return count, [pid for pid, _ in rows.fetchall()]

        def now() -> tuple[int, list[int]]:
            count = store.count_pending()
            store.count_pending()
            return count, [pid for pid, _ in store.pending_passages(64)]

        assert before() == now(), (before(), now())
        passages = db.execute("SELECT count(*) FROM passages").fetchone()[0]
        print(f"{passages:,} passages, {args.pending} without a vector")
        medians: dict[str, list[float]] = {"before (joins)": [], "now (counters)": []}
        for _ in range(args.rounds):
            for runs, fn in zip(medians.values(), (before, now), strict=True):
                cpu = []
                for _ in range(20):
                    started = time.process_time()
                    fn()
                    cpu.append(time.process_time() - started)
                runs.append(1000 * statistics.median(cpu))
        for name, runs in medians.items():
            print(f"  {name:16s} {statistics.median(runs):8.3f} ms CPU an index run")
        # the store is left as a post leaves it: the next run embeds the passages again


if __name__ == "__main__":
    main()
