"""`ireneo import SOURCE`: real fixture files into a real memory, through the click command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ireneo import Memory
from ireneo.importing import import_, import_paths
from tests.conftest import SAMPLES
from tests.conftest_import import (
    CHATGPT_FILE,
    CLAUDE_FILE,
    CLAUDE_SESSION,
    CODEX_SESSION,
    FIXTURES,
)


@pytest.fixture
def run(home):
    def invoke(source: str, *args: str, code: int = 0, env: dict | None = None):
        result = CliRunner().invoke(import_, [source, "--home", str(home), *args], env=env)
        assert result.exit_code == code, result.output
        return result

    return invoke


def counts(result) -> dict:
    document = json.loads(result.stdout)
    return {key: value for key, value in document.items() if key != "refused"}


def test_claude_code_import_then_again_changes_nothing(run, home):
    first = counts(run("claude-code", "--json", str(FIXTURES / "claude_code")))
    assert first == {
        "source": "claude-code",
        "files_read": 3,
        "files_empty": 1,
        "files_refused": 0,
        "conversations": 2,
        "turns_added": 11,
        "turns_replaced": 0,
        "turns_unchanged": 0,
        "passages_embedded": 11,
    }
    again = counts(run("claude-code", "--json", str(FIXTURES / "claude_code")))
    assert again | {"turns_unchanged": 0} == first | {"turns_added": 0, "passages_embedded": 0}
    assert again["turns_unchanged"] == 11
    with Memory(home) as memory:
        hits = memory.recall("decimal comma MT-7781", k=3)
        assert hits[0].session_id == CLAUDE_SESSION
        assert {s.session_id for s in memory.sessions()} == {
            CLAUDE_SESSION,
            f"{CLAUDE_SESSION}-agent-a9f3c21",
        }
        [tool] = [t for t in memory.get(CLAUDE_SESSION) if t.role == "tool"][:1]
        assert tool.harness == "claude_code" and tool.blocks[0].tool_name == "Bash"


def test_text_output_is_one_summary_line(run):
    result = run("codex", str(FIXTURES / "codex"))
    assert result.stdout == (
        "codex: 2 files read (0 without messages), 0 refused; 2 conversations; "
        "turns: 14 added, 0 replaced, 0 unchanged; 14 passages embedded\n"
    )


def test_a_damaged_file_is_reported_and_skipped_the_rest_imported(run, home, tmp_path):
    projects = tmp_path / "projects"
    shutil.copytree(FIXTURES / "claude_code", projects)
    project = projects / "-home-alice-plant-reports"
    good = CLAUDE_FILE.read_text(encoding="utf-8")
    broken = project / "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d.jsonl"
    # a session whose last line was cut short: refused whole, none of its turns stored
    broken.write_text(good.replace(CLAUDE_SESSION, "9a8b7c6d")[:-60] + "\n", encoding="utf-8")
    result = run("claude-code", "--json", str(projects), code=1)
    document = json.loads(result.stdout)
    assert document["files_refused"] == 1 and document["conversations"] == 2
    [refusal] = document["refused"]
    assert refusal.startswith(f"{broken}:13: not JSON")
    with Memory(home) as memory:
        assert "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d" not in {
            s.session_id for s in memory.sessions()
        }
    text = run("claude-code", str(projects), code=1)
    assert f"refused {broken}:13: not JSON" in text.stderr


def test_codex_import_default_dir_follows_codex_home(run, tmp_path):
    codex_home = tmp_path / "codex-home"
    shutil.copytree(FIXTURES / "codex", codex_home / "sessions")
    document = counts(run("codex", "--json", env={"CODEX_HOME": str(codex_home)}))
    assert document["conversations"] == 2 and document["turns_added"] == 14


def test_claude_code_default_dir_missing_says_what_to_do(run, tmp_path):
    result = run("claude-code", code=1, env={"CLAUDE_CONFIG_DIR": str(tmp_path / "nowhere")})
    assert "nowhere/projects: no such directory" in result.output
    assert "give the directory of your Claude Code transcripts" in result.output


def test_chatgpt_import_and_recall(run, home):
    document = counts(run("chatgpt", "--json", str(CHATGPT_FILE)))
    assert document["files_read"] == 1
    assert document["conversations"] == 2  # the never-used chat has no turn
    assert document["turns_added"] == 9
    with Memory(home) as memory:
        [hit] = memory.recall("film supplier deliveries Tuesdays", k=1)
        assert hit.session_id == "67081f3c-1d2e-8002-b5f6-c7d8e9f0a1b2"
        assert hit.ts.isoformat().startswith("2026-10-10T10:00")
    again = counts(run("chatgpt", "--json", str(CHATGPT_FILE)))
    assert (again["turns_added"], again["turns_unchanged"]) == (0, 9)


def test_chatgpt_damaged_export_is_refused_whole(run, home, tmp_path):
    data = json.loads(CHATGPT_FILE.read_text(encoding="utf-8"))
    data[1]["current_node"] = "lost"
    bad = tmp_path / "conversations.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    document = json.loads(run("chatgpt", "--json", str(bad), code=1).stdout)
    assert document["conversations"] == 0 and document["turns_added"] == 0
    assert "current_node 'lost' is not in the mapping" in document["refused"][0]
    with Memory(home) as memory:
        assert memory.sessions() == []  # not even the first, undamaged conversation


def test_funes_import_is_index(run):
    first = counts(run("funes", "--json", str(SAMPLES)))
    assert first["files_read"] == 6 and first["turns_added"] == 24
    assert first["conversations"] is None
    again = counts(run("funes", "--json", str(SAMPLES)))
    assert again["turns_added"] == 0 and again["passages_embedded"] == 0


def test_edited_source_text_replaces_the_old_turn(home, tmp_path):
    source = tmp_path / "s.jsonl"
    source.write_text(CLAUDE_FILE.read_text(encoding="utf-8"), encoding="utf-8")
    with Memory(home) as memory:
        import_paths(memory, "claude-code", [source])
        source.write_text(
            source.read_text(encoding="utf-8").replace("Add a test", "Add two tests"),
            encoding="utf-8",
        )
        report = import_paths(memory, "claude-code", [source])
        assert (report.turns.added, report.turns.replaced, report.turns.unchanged) == (0, 1, 8)
        assert memory.scan("s", "Add two tests")


def test_import_sessions_sit_with_the_other_harnesses(run, home):
    run("claude-code", str(FIXTURES / "claude_code"))
    run("codex", str(FIXTURES / "codex"))
    run("chatgpt", str(CHATGPT_FILE))
    with Memory(home) as memory:
        harnesses = {memory.get(s.session_id)[0].harness for s in memory.sessions()}
        assert harnesses == {"claude_code", "codex", "chatgpt"}
        hits = memory.recall("F-204 partition missing", k=1)
        assert hits[0].session_id == CODEX_SESSION


def test_import_group_lists_its_sources():
    result = CliRunner().invoke(import_, ["--help"])
    assert result.exit_code == 0
    for source in ("claude-code", "codex", "chatgpt", "funes"):
        assert source in result.output


def test_paths_are_checked_before_anything_is_read(run, tmp_path: Path):
    result = run("chatgpt", str(tmp_path / "missing.json"), code=2)
    assert "does not exist" in result.output
