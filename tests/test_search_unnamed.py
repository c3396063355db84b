"""The meaning side reads the query without the names of the memory's speakers
(search.Fusion.unnamed_meaning): turns are embedded without their speaker."""

from dataclasses import replace

import pytest

from ireneo import search
from tests.conftest import turn_line, write_jsonl


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Melanie paint?", "What did paint?"),
        ("When did Melanie's family go camping?", "When did family go camping?"),
        ("Did Caroline and Melanie meet?", "Did and meet?"),
        ("Melanie", "Melanie"),  # nothing else would be left
        ("What did Melanies paint?", "What did Melanies paint?"),  # another word
        ("What did the user decide?", "What did the user decide?"),  # a role, not a name
    ],
)
def test_a_query_without_its_speakers_names(query, expected):
    assert search._without_speakers(query, ["Caroline", "Melanie", "user", "text"]) == expected


GREETINGS = [
    "Hey Melanie! Long time no talk, Melanie!",
    "Melanie, so good to hear from you!",
    "Hi Melanie, how was your week?",
]


@pytest.fixture
def chat(memory, tmp_path):
    """Two people; the other one greets Melanie by name, and Melanie never says it."""
    lines = []
    for n, greeting in enumerate(GREETINGS):
        turns = [
            ("Caroline", greeting),
            ("Melanie", "Busy as always, thanks for asking."),
            ("Caroline", "Same here, the weather is awful."),
            ("Melanie", "The trains were late all week."),
            ("Caroline", "Mine too, I walked to work twice."),
            ("Melanie", "Good exercise at least."),
            ("Caroline", "True. Anything else new?"),
            ("Melanie", "Let's catch up properly soon."),
        ]
        if n == 1:
            turns[7] = ("Melanie", "I finished a watercolour of the harbour at sunset.")
        lines += [
            turn_line(f"chat{n}", i, text, role=role, ts=f"2026-10-0{n + 1}T09:0{i}:00Z")
            for i, (role, text) in enumerate(turns)
        ]
    write_jsonl(tmp_path / "chat.funes.jsonl", lines)
    memory.index([tmp_path])
    return memory


QUERY = "What has Melanie been painting?"


def test_a_speakers_name_does_not_draw_the_turns_that_greet_them(chat):
    """Asked about what a speaker did, meaning finds their turn, not the greetings that name
    them; the words (which the query shares with no turn but the name) cannot."""
    assert _shows(chat.recall(QUERY, k=1)[0]) == ("chat1", True)
    chat.fusion = replace(chat.fusion, unnamed_meaning=False)
    assert _shows(chat.recall(QUERY, k=1)[0]) != ("chat1", True)  # what the rule changes


def _shows(hit) -> tuple[str, bool]:
    """The hit's conversation, and whether it shows the painting."""
    return hit.session_id, any("watercolour" in t.text for t in [hit, *hit.context])


def test_whether_the_memory_answers_is_judged_on_the_query_as_asked(chat):
    """Only the ranking reads the query without the names: a query that is only a speaker's
    name finds what it found before."""
    found = [(h.session_id, h.seq) for h in chat.recall("Melanie", k=3)]
    chat.fusion = replace(chat.fusion, unnamed_meaning=False)
    assert found == [(h.session_id, h.seq) for h in chat.recall("Melanie", k=3)]
