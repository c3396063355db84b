"""A query made only of identifiers the memory holds is answered by keywords alone: the vector
of "MT-4471" means nothing, and computing and scanning it cost most of a recall."""

import subprocess
import sys

import pytest

from ireneo import Memory
from ireneo.analyze import identifiers_only
from ireneo.search import _seed_terms
from ireneo.store import TermStats
from tests.conftest import conversation


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("MT-4471", ["mt4471"]),
        ("mt4471", ["mt4471"]),
        ("  MT-4471?  ", ["mt4471"]),
        ("(MT-4471), «K-2»", ["mt4471", "k2"]),
        ("MT-4471 pump", []),  # a word: it may mean something
        ("what about MT-4471", []),
        ("4471", []),  # a number alone may be a year or an amount
        ("CH-294의", []),  # Korean attaches a particle: the query holds a word
        ("", []),
        ("?!", []),
    ],
)
def test_a_query_made_of_identifiers(query: str, expected: list[str]) -> None:
    assert identifiers_only(query) == expected


@pytest.fixture
def tickets(memory, tmp_path):
    """Three conversations about a mixer, one of them naming its ticket."""
    conversation(
        tmp_path,
        "ticket",
        [
            "The mixer at the north plant keeps tripping its breaker.",
            "I opened ticket MT-4471 for the mixer; maintenance comes on Tuesday.",
            "Thanks, I will tell the night shift.",
        ],
    )
    conversation(
        tmp_path,
        "other",
        [
            "The mixer in building two is noisy again.",
            "Ticket MT-5120 covers it, the bearing is due for a change.",
        ],
        day="2026-10-02",
    )
    conversation(
        tmp_path, "lunch", ["Where shall we eat today?", "The noodle place."], day="2026-10-03"
    )
    memory.index([tmp_path])
    return memory


def embedded_queries(memory) -> list[str]:
    """Every text the memory embeds as a query from now on (the real model still does it)."""
    asked: list[str] = []
    embed = memory._embed_query

    def counted(text: str):
        asked.append(text)
        return embed(text)

    memory._embed_query = counted
    return asked


def test_identifiers_the_memory_holds_are_found_without_a_vector(tickets) -> None:
    asked = embedded_queries(tickets)
    for query in ("MT-4471", "mt4471", "MT4471?"):
        hits = tickets.recall(query, k=3)
        assert hits[0].session_id == "ticket" and "MT-4471" in hits[0].text
    assert asked == []


def test_identifiers_are_answered_where_they_are_written(memory, tmp_path) -> None:
    """A query of identifiers asks where they were written: a conversation that writes MT-4471,
    whole or with a space ("MT 4471"), answers it; one that only shares a part of it (another
    MT ticket, 4471 litres, both apart) does not fill the rest of the answer."""
    for session, text in [
        ("ticket", "I opened ticket MT-4471 for the mixer; maintenance comes on Tuesday."),
        ("spaced", "Maintenance closed MT 4471 on Friday, the breaker is fine now."),
        ("other", "Ticket MT-5120 covers the bearing of the mixer in building two."),
        ("litres", "The line used 4471 litres of water last month."),
        ("apart", "MT-5200 is the mixer's new seal; the tank holds 4471 litres."),
        ("lunch", "Where shall we eat today? The noodle place."),
    ]:
        conversation(tmp_path, session, [text, "Thanks, noted."])
    memory.index([tmp_path])
    for query in ("MT-4471", "mt4471", "MT-4471?"):
        assert sorted(hit.session_id for hit in memory.recall(query, k=4)) == ["spaced", "ticket"]
    # both identifiers held: a conversation that writes either answers
    found = {hit.session_id for hit in memory.recall("MT-4471 MT-5120", k=4)}
    assert found == {"ticket", "spaced", "other"}


def test_the_candidates_of_identifiers_come_from_their_rarest_terms() -> None:
    """Every ticket shares "mt": its passages would all be counted, then none shown. The
    joined term and each identifier's rarest part find every window that writes one."""
    stats = TermStats(1000, 20.0, {"mt": 400, "4471": 3, "mt4471": 2, "k": 90, "2": 300})
    asked = _seed_terms(["mt4471", "k2"], [["mt", "4471"], ["k", "2"]], stats)
    assert asked == ["mt4471", "k2", "4471", "k"]


def test_a_query_with_words_or_an_unknown_identifier_is_embedded(tickets) -> None:
    asked = embedded_queries(tickets)
    assert tickets.recall("MT-4471 breaker", k=3)[0].session_id == "ticket"
    tickets.recall("MT-9999", k=3)  # nowhere in the memory: its meaning side still looks
    tickets.recall("MT-4471 MT-9999", k=3)  # one of them is not held
    assert asked == ["MT-4471 breaker", "MT-9999", "MT-4471 MT-9999"]


def test_identifiers_the_memory_holds_wake_no_other_thread(tmp_path) -> None:
    """Keywords alone answer them on the caller's thread: no thread of the query pool starts
    to embed nothing (a hand-off costs two context switches a recall, docs/reliability.md).
    A query in words does start one, to embed it beside the keyword side."""
    chats = tmp_path / "chats"
    conversation(chats, "ticket", ["The mixer trips its breaker.", "I opened MT-4471 for it."])
    with Memory(tmp_path / "memory") as memory:
        memory.index([chats])
    script = (
        "import sys, threading\n"
        "from ireneo import Memory\n"
        "with Memory(sys.argv[1]) as memory:\n"
        "    assert memory.recall(sys.argv[2], k=3)\n"
        "print(sorted(t.name for t in threading.enumerate()))\n"
    )

    def threads(query: str) -> str:
        run = [sys.executable, "-c", script, str(tmp_path / "memory"), query]
        return subprocess.run(run, capture_output=True, text=True, check=True).stdout

    assert "ireneo-query" not in threads("MT-4471")
    assert "ireneo-query" in threads("what trips the mixer's breaker?")
