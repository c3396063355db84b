"""The importers' readers on fixture files written in each tool's own format
(tests/fixtures/import/, shapes in docs/import.md), and on damaged copies of them."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from ireneo.errors import FormatError
from ireneo.formats import chatgpt, claude_code, codex
from ireneo.model import format_ts
from tests.conftest_import import (
    CHATGPT_FILE,
    CLAUDE_DIR,
    CLAUDE_FILE,
    CLAUDE_SESSION,
    CODEX_EARLY,
    CODEX_FILE,
    CODEX_SESSION,
)


def shape(turns) -> list[tuple]:
    return [
        (t.seq, t.role, [(b.block_type, b.tool_name) for b in t.blocks], format_ts(t.ts))
        for t in turns
    ]


def damaged_copy(source: Path, tmp_path: Path, edit) -> Path:
    """A copy of a fixture with its lines changed by `edit(lines) -> lines`."""
    lines = source.read_text(encoding="utf-8").splitlines()
    target = tmp_path / source.name
    target.write_text("\n".join(edit(lines)) + "\n", encoding="utf-8")
    return target


# -- Claude Code ------------------------------------------------------------------------------


def test_claude_code_turns_roles_blocks_and_ids():
    turns = claude_code.read_file(CLAUDE_FILE)
    assert {t.session_id for t in turns} == {CLAUDE_SESSION}
    assert {t.harness for t in turns} == {"claude_code"}
    assert shape(turns) == [
        (0, "user", [("text", None)], "2026-10-02T08:15:01Z"),
        (1, "assistant", [("thinking", None)], "2026-10-02T08:15:05Z"),
        (2, "assistant", [("tool_use", "Bash")], "2026-10-02T08:15:06Z"),
        (3, "tool", [("tool_result", "Bash")], "2026-10-02T08:15:07Z"),
        (4, "assistant", [("text", None)], "2026-10-02T08:15:12Z"),
        (5, "assistant", [("tool_use", "Edit")], "2026-10-02T08:15:13Z"),
        (6, "tool", [("tool_result", "Edit")], "2026-10-02T08:15:14Z"),
        (7, "assistant", [("text", None)], "2026-10-02T08:15:20Z"),
        (8, "user", [("text", None)], "2026-10-02T08:16:02Z"),
    ]
    # the source's own ids: each record's uuid
    assert turns[0].turn_uuid == "a1e4f6c2-0b7d-4f3e-8a59-1c2d3e4f5a61"
    assert turns[0].text.startswith("The scrap script for Riverside crashes")
    assert json.loads(turns[2].blocks[0].text)["command"] == (
        "python scrap.py data/riverside-2026-09.csv"
    )
    assert "could not convert string to float" in turns[3].text
    assert (
        turns[6].blocks[0].text == "The file /home/alice/plant-reports/scrap.py has been updated."
    )
    # the /clear command record (isMeta), the summary, snapshot and system records say nothing
    assert not any("<command-name>" in t.text for t in turns)


def test_claude_code_subagent_and_empty_sessions():
    [agent] = [p for p in claude_code.find_files([CLAUDE_DIR]) if p.name.startswith("agent-")]
    turns = claude_code.read_file(agent)
    assert [t.session_id for t in turns] == [f"{CLAUDE_SESSION}-agent-a9f3c21"] * 2
    assert [t.role for t in turns] == ["user", "assistant"]
    snapshots_only = CLAUDE_DIR / "0d3e5f7a-9b1c-4d2e-8f3a-5b6c7d8e9f01.jsonl"
    assert claude_code.read_file(snapshots_only) == []


def test_claude_code_reads_a_record_written_twice_once(tmp_path):
    copy = damaged_copy(CLAUDE_FILE, tmp_path, lambda lines: [*lines, lines[4]])
    assert len(claude_code.read_file(copy)) == len(claude_code.read_file(CLAUDE_FILE))


@pytest.mark.parametrize(
    ("edit", "line", "reason"),
    [
        (lambda lines: [*lines[:-1], lines[-1][:40]], 13, "not JSON"),  # a line cut short
        (lambda lines: [*lines, '{"role": "user", "content": "hi"}'], 14, "no record type"),
        (lambda lines: [*lines, "[1, 2]"], 14, "must be a JSON object"),
        (
            lambda lines: [*lines[:3], lines[3].replace('"uuid"', '"id"'), *lines[4:]],
            4,
            "needs a uuid",
        ),
        (
            lambda lines: [
                *lines[:3],
                lines[3].replace("2026-10-02T08:15:01.102Z", "today"),
                *lines[4:],
            ],
            4,
            "bad timestamp 'today'",
        ),
        (
            lambda lines: [
                *lines[:3],
                lines[3].replace('"content":"The', '"text":"The'),
                *lines[4:],
            ],
            4,
            "needs a message with content",
        ),
    ],
)
def test_claude_code_refuses_a_damaged_file_naming_file_and_line(tmp_path, edit, line, reason):
    with pytest.raises(FormatError) as info:
        claude_code.read_file(damaged_copy(CLAUDE_FILE, tmp_path, edit))
    assert info.value.where == f"{tmp_path / CLAUDE_FILE.name}:{line}"
    assert reason in info.value.reason


def test_claude_code_refuses_a_file_that_is_not_utf8(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_bytes(CLAUDE_FILE.read_bytes() + b'{"type": "user", "x": "\xff"}\n')
    with pytest.raises(FormatError, match=r"x\.jsonl:14: not valid UTF-8"):
        claude_code.read_file(bad)


# -- Codex --------------------------------------------------------------------------------------


def test_codex_rollout_turns_roles_blocks_and_ids():
    turns = codex.read_file(CODEX_FILE)
    assert {t.session_id for t in turns} == {CODEX_SESSION}
    assert {t.harness for t in turns} == {"codex"}
    assert shape(turns) == [
        (0, "user", [("text", None)], "2026-10-05T07:58:30Z"),
        (1, "assistant", [("thinking", None)], "2026-10-05T07:58:33Z"),
        (2, "assistant", [("tool_use", "shell")], "2026-10-05T07:58:33Z"),
        (3, "tool", [("tool_result", "shell")], "2026-10-05T07:58:34Z"),
        (4, "assistant", [("text", None)], "2026-10-05T07:58:40Z"),
        (5, "user", [("text", None)], "2026-10-05T07:59:51Z"),
        (6, "assistant", [("tool_use", "apply_patch")], "2026-10-05T07:59:55Z"),
        (7, "tool", [("tool_result", "apply_patch")], "2026-10-05T07:59:55Z"),
        (8, "assistant", [("text", None)], "2026-10-05T08:00:02Z"),
    ]
    assert [t.turn_uuid for t in turns][:3] == ["line-5", "line-9", "line-10"]
    text = "\n".join(t.text for t in turns)
    # developer instructions, AGENTS.md and the environment context are not what anybody said
    assert "<environment_context>" not in text and "AGENTS.md" not in text
    assert "permissions instructions" not in text
    assert "ENCRYPTED" not in text  # reasoning's opaque ciphertext stays out
    # a shell output comes out of Codex's {"output", "metadata"} wrapper
    assert turns[3].blocks[0].text == (
        "214:ERROR load step: input partition missing for feed F-204 (2026-10-04)\n"
    )
    assert turns[6].blocks[0].text.startswith("*** Begin Patch")
    # event_msg lines repeat the response items: nothing is read twice
    assert sum("Run 8812 stopped" in t.text for t in turns) == 1


def test_codex_early_shape_gets_the_session_start_time():
    turns = codex.read_file(CODEX_EARLY)
    assert {t.session_id for t in turns} == {"6a1d2e3f-4b5c-4d6e-8f7a-9b0c1d2e3f4a"}
    assert shape(turns) == [
        (0, "user", [("text", None)], "2025-05-14T10:02:11Z"),
        (1, "assistant", [("thinking", None)], "2025-05-14T10:02:11Z"),
        (2, "assistant", [("tool_use", "local_shell")], "2025-05-14T10:02:11Z"),
        (3, "tool", [("tool_result", "local_shell")], "2025-05-14T10:02:11Z"),
        (4, "assistant", [("text", None)], "2025-05-14T10:02:11Z"),
    ]
    assert turns[3].blocks[0].text == "12:  SUM(qty) AS qty\n"


def test_codex_ids_stay_put_when_the_rollout_grows(tmp_path):
    before = codex.read_file(CODEX_FILE)
    grown_line = json.dumps(
        {
            "timestamp": "2026-10-05T08:05:00.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "One more thing."}],
            },
        }
    )
    after = codex.read_file(damaged_copy(CODEX_FILE, tmp_path, lambda lines: [*lines, grown_line]))
    assert after[: len(before)] == before
    assert after[-1].text == "One more thing." and after[-1].seq == len(before)


@pytest.mark.parametrize(
    ("edit", "line", "reason"),
    [
        (lambda lines: lines[1:], 1, "a response_item before the session_meta line"),
        (lambda lines: ['{"hello": "world"}', *lines], 1, "not a Codex rollout"),
        (lambda lines: [*lines[:-1], lines[-1][:30]], 19, "not JSON"),
        (
            lambda lines: [
                *lines[:4],
                lines[4].replace('"timestamp":"2026-10-05T07:58:30.904Z",', ""),
                *lines[5:],
            ],
            5,
            "needs a timestamp",
        ),
        (lambda lines: [*lines, '{"payload": {}}'], 20, "not a Codex rollout line"),
    ],
)
def test_codex_refuses_a_damaged_rollout_naming_file_and_line(tmp_path, edit, line, reason):
    with pytest.raises(FormatError) as info:
        codex.read_file(damaged_copy(CODEX_FILE, tmp_path, edit))
    assert info.value.where == f"{tmp_path / CODEX_FILE.name}:{line}"
    assert reason in info.value.reason


def test_codex_refuses_a_claude_code_transcript():
    with pytest.raises(FormatError, match="not a Codex rollout"):
        codex.read_file(CLAUDE_FILE)


# -- ChatGPT ------------------------------------------------------------------------------------


def test_chatgpt_follows_the_current_branch():
    first, second, unused = chatgpt.read_file(CHATGPT_FILE)
    assert {t.session_id for t in first} == {"67041a2b-9c3d-8001-a4e5-b6c7d8e9f0a1"}
    assert {t.harness for t in first} == {"chatgpt"}
    assert [t.turn_uuid for t in first] == [
        "m-u1",
        "m-a1",
        "m-u2b",
        "m-th",
        "m-code",
        "m-out",
        "m-a3",
    ]
    assert shape(first) == [
        (0, "user", [("text", None)], "2026-10-07T10:00:10Z"),
        (1, "assistant", [("text", None)], "2026-10-07T10:00:14Z"),
        (2, "user", [("text", None)], "2026-10-07T10:01:30Z"),
        (3, "assistant", [("thinking", None)], "2026-10-07T10:01:32Z"),
        (4, "assistant", [("tool_use", "python")], "2026-10-07T10:01:34Z"),
        (5, "tool", [("tool_result", "python")], "2026-10-07T10:01:35Z"),
        # no create_time: the time of the message before it
        (6, "assistant", [("text", None)], "2026-10-07T10:01:35Z"),
    ]
    text = "\n".join(t.text for t in first)
    assert "Abandoned branch" not in text  # edited away by the user
    assert "Be brief" not in text and "two plants" not in text  # custom instructions
    assert "Thought for 3s" not in text
    assert first[2].text == (
        "Check this label photo too: how many units per shift over three shifts, exactly?"
    )
    assert first[4].blocks[0].text == "print(2185 / 3)"
    assert [t.role for t in second] == ["user", "assistant"]
    assert unused == []


def test_chatgpt_reads_the_zip_and_the_directory_of_an_export(tmp_path):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(CHATGPT_FILE, "conversations.json")
        z.writestr("user.json", "{}")
    assert chatgpt.read_file(archive) == chatgpt.read_file(CHATGPT_FILE)
    assert chatgpt.find_files([CHATGPT_FILE.parent]) == [CHATGPT_FILE.resolve()]
    with pytest.raises(FileNotFoundError, match="no conversations.json"):
        chatgpt.find_files([tmp_path])


def _export_with(tmp_path: Path, change) -> Path:
    data = json.loads(CHATGPT_FILE.read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "where", "reason"),
    [
        (lambda d: d[1].update(current_node="gone"), "conversations[1]", "current_node 'gone'"),
        (lambda d: d[1].pop("mapping"), "conversations[1]", "mapping must be an object"),
        (
            lambda d: d[0]["mapping"]["m-u1"].update(parent="m-a3"),
            "conversations[0]",
            "form a loop",
        ),
        (
            lambda d: d[0]["mapping"]["m-a1"]["message"].update(author={}),
            "conversations[0]",
            "needs author.role",
        ),
        (
            lambda d: d[1]["mapping"]["u21"]["message"].update(create_time="yesterday"),
            "conversations[1]",
            "must be Unix seconds",
        ),
        (lambda d: d.__setitem__(2, d[1]), "conversations[2]", "is also conversations[1]"),
    ],
)
def test_chatgpt_refuses_a_damaged_export_whole(tmp_path, change, where, reason):
    path = _export_with(tmp_path, change)
    with pytest.raises(FormatError) as info:
        chatgpt.read_file(path)
    assert info.value.where.startswith(f"{path}:{where}")
    assert reason in info.value.reason


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"conversations": 3}', "expected a list of conversations"),
        ('[{"id": "a", "mapping": {}', "not JSON"),
        ("[1]", "a conversation must be an object"),
    ],
)
def test_chatgpt_refuses_what_is_not_an_export(tmp_path, content, reason):
    path = tmp_path / "conversations.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError, match=reason):
        chatgpt.read_file(path)


def test_chatgpt_refuses_a_claude_code_transcript(tmp_path):
    copy = shutil.copy(CLAUDE_FILE, tmp_path / "conversations.json")
    with pytest.raises(FormatError, match="not JSON"):
        chatgpt.read_file(Path(copy))
