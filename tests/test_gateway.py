"""The gateway body → turns conversion: every refusal names its field, nothing half-parsed."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from ireneo.errors import FormatError
from ireneo.formats.gateway import parse_gateway_body

BODY = {
    "user": "alice@example.com",
    "conversation_id": "conv_01-A",
    "turns": [
        {"ts": "2026-10-08T09:14:00Z", "role": "user", "text": "What did we decide about N-11?"},
        {"id": "m-2", "ts": "2026-10-08T11:15:00+02:00", "role": "assistant", "text": "Go ahead."},
    ],
}


def body(**changes):
    out = copy.deepcopy(BODY)
    out.update(changes)
    return out


def with_turn(index, **changes):
    out = copy.deepcopy(BODY)
    for key, value in changes.items():
        if value is ...:
            out["turns"][index].pop(key, None)
        else:
            out["turns"][index][key] = value
    return out


def test_a_good_body_becomes_turns_in_order():
    user, cid, turns = parse_gateway_body(copy.deepcopy(BODY))
    assert (user, cid) == ("alice@example.com", "conv_01-A")
    assert [t.seq for t in turns] == [0, 1]
    assert [t.turn_uuid for t in turns] == ["conv_01-A-0", "m-2"]
    assert {t.session_id for t in turns} == {"conv_01-A"}
    assert {t.harness for t in turns} == {"gateway"}
    assert turns[1].ts == datetime(2026, 10, 8, 9, 15, tzinfo=UTC)
    assert turns[0].text == "What did we decide about N-11?"
    assert turns[0].blocks[0].block_type == "text"


def test_a_null_or_empty_id_falls_back_to_the_position():
    _, _, turns = parse_gateway_body(with_turn(1, id=None))
    assert turns[1].turn_uuid == "conv_01-A-1"
    _, _, turns = parse_gateway_body(with_turn(1, id=""))
    assert turns[1].turn_uuid == "conv_01-A-1"


def test_text_is_kept_verbatim():
    text = "  line one\n\tline two  "
    _, _, turns = parse_gateway_body(with_turn(0, text=text))
    assert turns[0].text == text


BAD = [
    ("not an object", ["a list"], "body"),
    ("missing user", body(user=...), "user"),
    ("blank user", body(user="  "), "user"),
    ("user not a string", body(user=42), "user"),
    ("user too long", body(user="u" * 300), "user"),
    ("missing conversation id", body(conversation_id=...), "conversation_id"),
    ("unsafe conversation id", body(conversation_id="../etc"), "conversation_id"),
    ("conversation id with a colon", body(conversation_id="a:b"), "conversation_id"),
    ("empty conversation id", body(conversation_id=""), "conversation_id"),
    ("long conversation id", body(conversation_id="c" * 129), "conversation_id"),
    ("conversation id not a string", body(conversation_id=7), "conversation_id"),
    ("missing turns", body(turns=...), "turns"),
    ("turns not a list", body(turns={"ts": "x"}), "turns"),
    ("no turns", body(turns=[]), "turns"),
    ("unknown top-level field", body(extra=1), "extra"),
    ("turn not an object", body(turns=["hello"]), "turns[0]"),
    ("unknown turn field", with_turn(1, content="hi"), "turns[1].content"),
    ("missing ts", with_turn(1, ts=...), "turns[1].ts"),
    ("bad ts", with_turn(1, ts="yesterday"), "turns[1].ts"),
    ("ts without a zone", with_turn(1, ts="2026-10-08T09:14:00"), "turns[1].ts"),
    ("ts not a string", with_turn(1, ts=1760000000), "turns[1].ts"),
    ("missing role", with_turn(0, role=...), "turns[0].role"),
    ("blank role", with_turn(0, role=""), "turns[0].role"),
    ("role not a string", with_turn(0, role=["user"]), "turns[0].role"),
    ("missing text", with_turn(0, text=...), "turns[0].text"),
    ("text not a string", with_turn(0, text=["hi"]), "turns[0].text"),
    ("empty text", with_turn(0, text=""), "turns[0].text"),
    ("blank text", with_turn(0, text=" \n "), "turns[0].text"),
    ("id not a string", with_turn(1, id=5), "turns[1].id"),
    ("duplicate ids", with_turn(1, id="conv_01-A-0"), "turns[1].id"),
]


def _fix(value):
    """`...` in the table means: drop that field."""
    if isinstance(value, dict):
        return {k: _fix(v) for k, v in value.items() if v is not ...}
    return value


@pytest.mark.parametrize(("case", "bad", "where"), BAD, ids=[case for case, _, _ in BAD])
def test_a_bad_body_is_refused_naming_the_field(case, bad, where):
    with pytest.raises(FormatError) as caught:
        parse_gateway_body(_fix(bad))
    assert caught.value.where == where
    assert str(caught.value).startswith(f"{where}: ")
