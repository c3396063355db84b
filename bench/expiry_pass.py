"""One pass of the server's memory expiry over a home's memories: its time, the memories it
opened, the process's RSS and open files after it.

    nice python bench/expiry_pass.py DIR/home/users
    nice python bench/expiry_pass.py --database-url postgresql://ireneo_app@HOST/DB

Point it at a copy of a server's users directory (bench/many_users.py --work DIR --reuse leaves
one), or at a PostgreSQL database as the application role: the pass removes what has expired.
Run it with PYTHONPATH set to two trees to compare them.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from ireneo.config import MemoryPolicy
from ireneo.server.expiry import MemoryExpiry
from ireneo.server.memories import OpenMemories


def rss_mb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("users", type=Path, nargs="?", help="a users directory (one memory per key)")
    p.add_argument("--database-url", help="instead: a PostgreSQL database (the server's role)")
    p.add_argument("--budget-mb", type=int, default=256, help="the registry's budget [256]")
    args = p.parse_args()
    if (args.users is None) == (args.database_url is None):
        p.error("give a users directory or --database-url")
    pool = None
    if args.database_url:
        from ireneo.store.postgres import open_pool

        pool = open_pool(args.database_url, max_size=2)
    registry = OpenMemories(
        args.users or Path("unused"),
        capacity=2048,
        budget_bytes=args.budget_mb << 20,
        database=pool,
    )
    job = MemoryExpiry(registry, MemoryPolicy(), lambda: datetime.now(UTC), 3600)
    before = rss_mb()
    wall, cpu = time.perf_counter(), time.process_time()
    removed = job.run_once()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{len(registry.keys_on_disk())} memories: pass {wall:.2f} s ({cpu:.2f} s CPU), "
        f"{removed} removed, {registry.opened} opened, {registry.open_count()} left open, "
        f"RSS {before} -> {rss_mb()} MB, {len(os.listdir('/proc/self/fd'))} open files; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    registry.close_all()
    if pool is not None:
        pool.close()


if __name__ == "__main__":
    main()
