"""A user's layout read from PostgreSQL right after a bulk import, before the planner has
statistics for the user's rows: the read a replica's first recall makes without saved copies.

    python bench/pg_layout_read.py --conversations 3000 --database-url postgresql://…

Stores a synthetic history for a new user (turns only: the layout needs no vectors), then
reads the user's layout in a fresh store, three times, and prints the times in milliseconds
as JSON. The store reads it with nested loops off (PostgresStore._stream): planned from an
estimate of a few rows, a nested loop compared every passage with every turn.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from itertools import groupby

from ireneo import Memory
from ireneo.benchmark.generate import generate
from ireneo.config import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=3000)
    parser.add_argument("--database-url", required=True)
    args = parser.parse_args()
    history = generate(args.conversations, lang="en", family="A", seed=0, questions=1)
    user = f"layout-read-{uuid.uuid4().hex[:8]}"
    settings = Settings.from_env()
    with Memory(database=args.database_url, user=user, settings=settings) as memory:
        for _, turns in groupby(history.turns, key=lambda turn: turn.session_id):
            memory.store_turns(list(turns))
    reads = []
    for _ in range(3):
        with Memory(database=args.database_url, user=user, settings=settings) as memory:
            started = time.perf_counter()
            memory.store.layout()
            reads.append(round((time.perf_counter() - started) * 1000, 1))
    print(json.dumps({"conversations": args.conversations, "layout_read_ms": reads}))


if __name__ == "__main__":
    main()
