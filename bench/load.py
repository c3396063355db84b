"""Load: concurrent ingest and recall against a real `ireneo serve`, with RSS over time.

    python bench/load.py                                   # 50 clients, 20 users, 180 s
    python bench/load.py --clients 20 --seconds 30         # a quick look
    ireneo bench --load --clients 50 --seconds 180         # the same from the CLI
    # recall while ingest runs: 20 recalling clients, 4 posters, users of 1,000 conversations
    python bench/load.py --clients 20 --users 20 --conversations 1000 --posters 4 \
        --ingest-share 0 --seconds 60 --work /tmp/load-1000

Writes bench/results/load/latest.{md,json} and load.png. See ireneo.benchmark.load.
Exit status 1 on any error or any acknowledged turn missing.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from ireneo.benchmark.load import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
