"""ireneo without its extras: each test runs the real command line in a child process where the
extra's packages cannot be imported (sys.modules blocks them, as a venv without them would).
The core does the default job; a part that needs a missing extra is a one-line error naming
the pip command. (.ci/run also runs the README's first command in a venv holding only the core.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import SAMPLES

BLOCKED = {
    "ko": ["kiwipiepy"],
    "postgres": ["psycopg", "psycopg_pool", "pgvector"],
    "bench": ["matplotlib"],
    "local": ["tokenizers"],
}


def ireneo(*args: str, without: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`ireneo ARGS` in a child process where the `without` extra's packages are missing."""
    blocked = ", ".join(repr(name) for name in BLOCKED[without])
    script = (
        "import sys\n"
        f"sys.modules.update(dict.fromkeys([{blocked}]))\n"
        "from ireneo.cli import main\n"
        "main(sys.argv[1:], prog_name='ireneo')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def one_line_error(run: subprocess.CompletedProcess, extra: str) -> str:
    assert run.returncode == 1, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].endswith(f"pip install 'ireneo[{extra}]'"), lines[0]
    return lines[0]


def test_without_kiwi_a_new_memory_reads_korean_by_bigrams(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    indexed = ireneo("index", "--home", home, str(SAMPLES), without="ko")
    assert indexed.returncode == 0, indexed.stderr
    found = ireneo("recall", "--home", home, "--json", "-k", "1", "--", "냉각기 점검", without="ko")
    assert json.loads(found.stdout)["hits"][0]["session_id"] == "2026-10-10-hoegi-ko"
    status = ireneo("status", "--home", home, "--json", without="ko")
    assert json.loads(status.stdout)["korean"] == "bigrams"
    text = ireneo("status", "--home", home, without="ko").stdout
    assert "pip install 'ireneo[ko]'" in text


def test_a_memory_that_reads_korean_by_morphemes_names_the_extra_without_kiwi(
    tmp_path: Path,
) -> None:
    home = str(tmp_path / "home")
    made = subprocess.run(
        [sys.executable, "-m", "ireneo.cli", "index", "--home", home, str(SAMPLES)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    english = ireneo("recall", "--home", home, "-k", "1", "--", "MT-4471", without="ko")
    assert english.returncode == 0 and "MT-4471" in english.stdout
    korean = ireneo("recall", "--home", home, "--", "냉각기 점검", without="ko")
    line = one_line_error(korean, "ko")
    assert "reads Korean by morphemes" in line and "kiwipiepy is not installed" in line


def test_without_psycopg_postgres_is_a_one_line_error_and_sqlite_serves(tmp_path: Path) -> None:
    url = "postgresql://ireneo_app@127.0.0.1:1/ireneo"
    upgrade = ireneo("db", "upgrade", "--database-url", url, without="postgres")
    assert "psycopg is not installed" in one_line_error(upgrade, "postgres")
    recall = ireneo(
        "recall",
        "--json",
        "--",
        "x",
        without="postgres",
        env={**_env(tmp_path), "IRENEO_DATABASE_URL": url, "IRENEO_USER": "alice"},
    )
    one_line_error(recall, "postgres")
    served = subprocess.run(  # the SQLite server's app is built without PostgreSQL's packages
        [
            sys.executable,
            "-c",
            "import sys\n"
            "sys.modules.update(dict.fromkeys(['psycopg', 'psycopg_pool', 'pgvector']))\n"
            "from pathlib import Path\n"
            "from ireneo.server.app import create_app\n"
            "from ireneo.config import Settings\n"
            "create_app(Settings(home=Path(sys.argv[1]), ingest_key='k' * 32,\n"
            "                    jwt_secret='s' * 48, jwt_issuer='i', jwt_audience='a'))\n"
            "print(sorted(m for m in sys.modules if m.startswith('ireneo.store.p')))\n",
            str(tmp_path / "srv"),
        ],
        capture_output=True,
        text=True,
    )
    assert served.returncode == 0, served.stderr
    assert served.stdout.strip() == "[]"


def test_without_matplotlib_the_bench_refuses_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = ireneo("bench", "--quick", "--out", str(out), without="bench")
    assert "matplotlib is not installed" in one_line_error(run, "bench")
    assert not out.exists()


def _env(tmp_path: Path) -> dict:
    import os

    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("IRENEO_HOME", None)
    return env


def test_onnx_is_needed_only_to_build_a_graph(tmp_path: Path) -> None:
    """Once the default model's 8-bit graph is built (here, by this process), indexing and
    recall run where onnx cannot be imported: it stays out of the serving path."""
    from ireneo.embed import load_embedder

    load_embedder().embed_query("build the graph once")
    home = str(tmp_path / "home")
    script = (
        "import sys\n"
        "sys.modules['onnx'] = None\n"
        "from ireneo.cli import main\n"
        "main(sys.argv[1:], prog_name='ireneo')\n"
    )
    for args in (["index", "--home", home, str(SAMPLES)], ["recall", "--home", home, "MT-4471"]):
        run = subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr
    assert "MT-4471" in run.stdout


def test_without_tokenizers_the_default_model_serves_and_a_cross_encoder_names_the_extra(
    tmp_path: Path,
) -> None:
    """The default model reads its WordPiece tokenizer itself (ireneo.embed.wordpiece): index
    and recall run without the `tokenizers` package; a cross-encoder needs it."""
    from tests.conftest_models import overlap_cross_encoder

    home = str(tmp_path / "home")
    indexed = ireneo("index", "--home", home, str(SAMPLES), without="local")
    assert indexed.returncode == 0, indexed.stderr
    found = ireneo("recall", "--home", home, "-k", "1", "--", "the chiller alarm", without="local")
    assert found.returncode == 0 and "[1]" in found.stdout, found.stderr
    reranker = str(overlap_cross_encoder(tmp_path / "ce"))
    reranked = ireneo("recall", "--home", home, "--rerank", reranker, "--", "x", without="local")
    assert "tokenizers is not installed" in one_line_error(reranked, "local")
