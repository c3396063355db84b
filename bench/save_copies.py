"""Save search's copies in every memory of a server's users directory, as indexing them with this
version would: a home indexed before small memories had saved copies gets them now, so that a
many-users `--reuse` run opens its memories as a server on this version would.

    python bench/save_copies.py HOME/users

Each memory is opened, its copies brought up to date from its rows and saved when the store's
rule says so (Store.save_copies), and closed. Prints how many were saved and the time taken.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ireneo.store.sqlite import SQLiteStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("users", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    homes = sorted(p for p in args.users.iterdir() if (p / "memory.db").exists())
    saved = 0
    for home in homes:
        store = SQLiteStore(home)
        try:
            before = store._saved_rows("layout")
            store.save_copies()
            saved += store._saved_rows("layout") != before
        finally:
            store.close()
    print(
        f"{saved} of {len(homes)} memories saved their copies in {time.perf_counter() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
