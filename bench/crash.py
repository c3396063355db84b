"""Crash safety: kill -9 `ireneo serve` during ingest and indexing, many times, and check.

    python bench/crash.py --kills 50            # the long mode; writes bench/results/crash/
    python bench/crash.py --kills 5 --users 4   # a quick look

See ireneo.benchmark.crash for what is checked. Exit status 1 if anything was lost or corrupt.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from ireneo.benchmark.crash import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
