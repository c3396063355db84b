"""The settings: every IRENEO_* variable read in ireneo.config, one rule per kind, documented."""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from ireneo import Memory
from ireneo.cli import main
from ireneo.config import EchoPolicy, MemoryPolicy, Settings, SettingsError, model_cache
from tests.conftest import conversation

ROOT = Path(__file__).resolve().parent.parent


def documented() -> list[str]:
    text = (ROOT / "docs/install.md").read_text()
    return re.findall(r"^\| `(IRENEO_[A-Z0-9_]+)` \|", text, re.M)


def test_the_table_of_variables_lists_exactly_what_config_reads():
    read = Settings.variables()
    rows = documented()
    assert len(rows) == len(set(rows)), "a variable is listed twice"
    assert set(read) - set(rows) == set(), "read in config.py, missing from docs/install.md"
    assert set(rows) - set(read) == set(), "in docs/install.md, read nowhere"


def test_no_other_module_reads_an_ireneo_variable():
    reads = re.compile(r"""(environ\.get\(|environ\[|getenv\()\s*["']IRENEO_""")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "src/ireneo").rglob("*.py"))
        if path.name != "config.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if reads.search(line)
    ]
    assert offenders == []


@pytest.mark.parametrize("name", Settings.variables())
def test_a_value_is_taken_or_refused_in_the_same_words(name):
    """Every reader refuses what it cannot read with `NAME='value': give …`; text is taken."""
    for value in ("nonsense", "-1", "0", "nan"):
        try:
            Settings.from_env({name: value})
        except SettingsError as exc:
            if name == "IRENEO_JWT_PUBLIC_KEY":  # a PEM key, or the path of a file holding one
                assert str(exc).startswith(f"{name} is neither a PEM key nor a readable file")
            else:
                assert str(exc).startswith(f"{name}={value!r}: give "), str(exc)


def test_each_kind_has_one_rule():
    def refusal(name: str, value: str) -> str:
        with pytest.raises(SettingsError) as caught:
            Settings.from_env({name: value})
        return str(caught.value)

    assert (
        refusal("IRENEO_RECALL_K", "0") == "IRENEO_RECALL_K='0': give a whole number of at least 1"
    )
    assert refusal("IRENEO_RECALL_K", "2.5").endswith("give a whole number of at least 1")
    assert refusal("IRENEO_EMBED_THREADS", "x").endswith("give a whole number of at least 1")
    assert refusal("IRENEO_RECALL_TIMEOUT", "0").endswith("give a number greater than 0")
    assert refusal("IRENEO_RETENTION_DAYS", "inf").endswith("give a number greater than 0")
    assert refusal("IRENEO_MEMORY_DEDUP", "-1").endswith("give a number of at least 0")
    assert refusal("IRENEO_ECHO_OVERLAP", "1.5").endswith("of at least 0 and at most 1")
    for name in ("IRENEO_DEV", "IRENEO_REDACT", "IRENEO_MEMORY_TOOLS", "IRENEO_DB_UPGRADE"):
        assert refusal(name, "maybe") == f"{name}='maybe': give 1 or 0 (also true/false, " + (
            "yes/no, on/off)"
        )


def test_on_and_off_read_the_same_way_whatever_the_default():
    names = ("IRENEO_DEV", "IRENEO_REDACT", "IRENEO_MEMORY_TOOLS", "IRENEO_DB_UPGRADE")

    def read(value: str) -> tuple[bool, ...]:
        s = Settings.from_env(dict.fromkeys(names, value))
        return (s.dev, s.redact, s.memory_tools, s.db_upgrade)

    for on, off in (("1", "0"), ("true", "false"), ("Yes", "No"), (" on ", "OFF")):
        assert read(on) == (True, True, True, True)
        assert read(off) == (False, False, False, False)
    assert read(" ") == (False, True, True, False)  # blank: each one's default


def test_the_environment_gives_the_memory_and_embedding_settings(tmp_path):
    env = {
        "IRENEO_HOME": "~/memories",
        "IRENEO_USER": "alice",
        "IRENEO_MODEL": "e5-small-q8",
        "IRENEO_RERANK": "sentences",
        "IRENEO_REDACT": "off",
        "IRENEO_ECHO_WINDOW_HOURS": "2",
        "IRENEO_ECHO_OVERLAP": "0",
        "IRENEO_EMBED_THREADS": "3",
        "IRENEO_MODEL_CACHE": str(tmp_path / "cache"),
        "IRENEO_MAX_QUERY_CHARS": "200",
        "IRENEO_MEMORY_IMPORTANCE_WEIGHTS": "0.5, 1, 2",
    }
    s = Settings.from_env(env)
    assert s.home == Path("~/memories").expanduser() and s.user == "alice"
    assert (s.model, s.rerank, s.redact) == ("e5-small-q8", "sentences", False)
    assert s.echo_policy == EchoPolicy(timedelta(hours=2), 0.0) and not s.echo_policy.enabled
    assert (s.embed_threads, s.model_cache) == (3, tmp_path / "cache")
    assert s.max_query_chars == 200
    assert s.memory_policy == MemoryPolicy(importance_weights=(0.5, 1.0, 2.0))
    assert model_cache(env) == tmp_path / "cache"
    plain = Settings.from_env({"XDG_CACHE_HOME": str(tmp_path)})
    assert plain.embed_threads is None and plain.model_cache == tmp_path / "ireneo" / "models"


def test_the_reader_and_the_class_have_the_same_defaults(monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert Settings.from_env({}) == Settings()


def test_a_memory_reads_its_settings_not_the_environment(home, monkeypatch):
    monkeypatch.setenv("IRENEO_REDACT", "0")
    monkeypatch.setenv("IRENEO_ECHO_OVERLAP", "0")
    monkeypatch.setenv("IRENEO_RERANK", "sentences")
    with Memory(home) as memory:  # the built-in defaults
        assert memory.redact and memory.echo_policy.enabled and memory.rerank is None
        assert memory.settings == Settings()
    with Memory(home, settings=Settings.from_env()) as memory:
        assert not memory.redact and not memory.echo_policy.enabled
        assert memory.rerank == "sentences"
    with Memory(home, settings=Settings.from_env(), redact=True, rerank=None) as memory:
        assert memory.redact and memory.rerank == "sentences"  # rerank None: the settings'


def test_config_imports_no_other_part_of_ireneo():
    """A leaf: any layer may import it without a cycle (a function may import lazily)."""
    tree = ast.parse((ROOT / "src/ireneo/config.py").read_text())
    imported = [
        alias.name if isinstance(node, ast.Import) else node.module
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [node])
    ]
    assert imported and not [name for name in imported if name and name.startswith("ireneo")]


def test_the_cli_reads_the_environment_once_and_passes_it_down(tmp_path, home):
    """The CLI is a door: IRENEO_REDACT=0 there reaches the memory; a bad value stops it."""
    secret = "AKIAIOSFODNN7EXAMPLE"
    src = conversation(tmp_path / "src", "keys", [f"the key {secret}"]).parent
    runner = CliRunner()
    off = {"IRENEO_REDACT": "0"}
    result = runner.invoke(main, ["index", "--home", str(home), str(src)], env=off)
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["get", "--home", str(home), "keys"], env=off)
    assert secret in result.output
    result = runner.invoke(main, ["status", "--home", str(home)], env={"IRENEO_RECALL_K": "many"})
    assert result.exit_code == 1
    assert "IRENEO_RECALL_K='many': give a whole number of at least 1" in result.output


def test_a_worker_process_reads_its_parents_command_line_choices(tmp_path):
    """`ireneo serve --workers N`: each worker builds its settings from the environment, so the
    parent's flags (--home, --dev) travel there; the schema upgrade is the parent's alone."""
    parent = Settings.from_env({}, home=tmp_path / "home", dev=True, db_upgrade=True)
    worker = Settings.from_env(parent.worker_env())
    assert (worker.home, worker.dev, worker.db_upgrade) == (tmp_path / "home", True, False)
    quiet = Settings.from_env({"IRENEO_DEV": "1"}, home=tmp_path / "home", dev=False)
    assert Settings.from_env(quiet.worker_env()).dev is False
