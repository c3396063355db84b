import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_cli_reference_matches_the_commands():
    check = subprocess.run([sys.executable, "scripts/cli_docs.py", "--check"], cwd=ROOT)
    assert check.returncode == 0, "docs/cli.md is stale: run python scripts/cli_docs.py"
