import json

import pytest

from ireneo.errors import FormatError
from ireneo.formats import funes_jsonl
from tests.conftest import turn_line, write_jsonl


def refusal(tmp_path, lines) -> FormatError:
    path = write_jsonl(tmp_path / "bad.funes.jsonl", lines)
    with pytest.raises(FormatError) as info:
        funes_jsonl.read_file(path)
    return info.value


def test_reads_every_field(tmp_path):
    line = turn_line("s1", 0, "hello", ts="2026-10-08T09:14:00+02:00")
    line["blocks"].append({"block_type": "tool_use", "text": "ls -la", "tool_name": "Bash"})
    line["cwd"] = "/tmp"
    [turn] = funes_jsonl.read_file(write_jsonl(tmp_path / "a.funes.jsonl", [line]))
    assert (turn.session_id, turn.turn_uuid, turn.seq, turn.role, turn.harness) == (
        "s1",
        "s1-0",
        0,
        "user",
        "test",
    )
    assert turn.ts.isoformat() == "2026-10-08T07:14:00+00:00"
    assert [b.block_type for b in turn.blocks] == ["text", "tool_use"]
    assert turn.blocks[1].tool_name == "Bash"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d.pop("ts"), "missing field 'ts'"),
        (lambda d: d.update(ts="yesterday"), "bad ts 'yesterday'"),
        (lambda d: d.update(ts="2026-10-08T09:14:00"), "bad ts"),
        (lambda d: d.update(seq=-1), "seq must be a whole number"),
        (lambda d: d.update(seq="3"), "seq must be a whole number"),
        (lambda d: d.update(session_id="a:b"), "session_id may not contain ':'"),
        (lambda d: d.update(harness="Claude Code"), "harness 'Claude Code'"),
        (
            lambda d: d.update(blocks=[{"block_type": "image", "text": "x"}]),
            "blocks[0].block_type 'image'",
        ),
        (
            lambda d: d.update(blocks=[{"block_type": "text", "text": 3}]),
            "blocks[0].text must be a string",
        ),
        (lambda d: d.update(role=""), "role must be a non-empty string"),
    ],
)
def test_refuses_bad_line_naming_file_and_line(tmp_path, change, reason):
    bad = turn_line("s1", 1, "second")
    change(bad)
    error = refusal(tmp_path, [turn_line("s1", 0, "first"), bad])
    assert error.where.endswith("bad.funes.jsonl:2")
    assert reason in error.reason


def test_refuses_broken_json_and_non_objects(tmp_path):
    assert "not JSON" in refusal(tmp_path, ['{"session_id": "s1",']).reason
    assert "JSON object" in refusal(tmp_path, ["[1, 2]"]).reason


def test_refuses_duplicate_turn_uuid(tmp_path):
    error = refusal(tmp_path, [turn_line("s1", 0, "a"), turn_line("s1", 1, "b", uuid="s1-0")])
    assert error.where.endswith(":2") and "appears twice" in error.reason


def test_refuses_invalid_utf8_with_line(tmp_path):
    path = tmp_path / "bin.funes.jsonl"
    path.write_bytes(json.dumps(turn_line("s1", 0, "a")).encode() + b"\n\xff\xfe\n")
    with pytest.raises(FormatError) as info:
        funes_jsonl.read_file(path)
    assert info.value.where.endswith(":2") and "UTF-8" in info.value.reason


def test_round_trip_through_to_line(tmp_path):
    original = turn_line("s1", 0, "Ünïcödé — кириллица, 한국어, 🚀")
    [turn] = funes_jsonl.read_file(write_jsonl(tmp_path / "u.funes.jsonl", [original]))
    assert json.loads(funes_jsonl.to_line(turn)) == original
