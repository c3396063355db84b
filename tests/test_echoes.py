"""Recall echoes (ireneo.echoes): an assistant turn that mostly repeats what recall returned to
the user shortly before is stored, flagged, readable, and left out of recall unless asked for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ireneo import Memory, echoes
from ireneo.config import Settings, SettingsError
from ireneo.echoes import EchoPolicy, overlap, trigrams
from ireneo.model import Block, Turn
from ireneo.render import render_turns
from ireneo.server.tools import returned_turns
from tests.conftest import conversation

NOW = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
SOURCES = {
    "handover": [
        "Shift handover: the pump bearing noise on motor K-2 is logged as ticket MT-4471.",
        "Noted. MT-4471 must be closed before the N-11 upgrade can be scheduled; "
        "Marek from maintenance will check the bearing on Thursday.",
    ],
    "jobs": [
        "The nightly reconciliation runs failed on feed F-204 from 09-23 to 09-25.",
        "I escalated F-204 to Priya, the integrations lead; she will answer by Friday.",
    ],
}
ECHO = (
    "Here are your open follow-ups: MT-4471 must be closed before the N-11 upgrade can be "
    "scheduled; Marek from maintenance will check the bearing on Thursday. I escalated F-204 to "
    "Priya, the integrations lead; she will answer by Friday."
)
FRESH = (
    "Before the ops meeting, draft the N-11 proposal with the capacity figures and send it "
    "to Jana for a review of the scrap numbers."
)


def turn(session_id: str, seq: int, role: str, text: str, ts: datetime = NOW) -> Turn:
    return Turn(session_id, f"{session_id}-{seq}", seq, ts, role, "test", (Block("text", text),))


@pytest.fixture
def memory(tmp_path, home):
    src = tmp_path / "src"
    for day, (session_id, texts) in enumerate(SOURCES.items(), start=1):
        conversation(src, session_id, texts, day=f"2026-10-0{day}")
    with Memory(home) as m:
        m.index([src])
        yield m


def recall_and_answer(memory: Memory, answer: str, *, now: datetime = NOW) -> None:
    """What the server does: the agent recalls, is shown passages, and answers in a new chat."""
    hits = memory.recall("follow-up MT-4471 F-204", k=3)
    memory.note_returned(returned_turns(hits), now)
    memory.store_turns(
        [
            turn("todo", 0, "user", "Give me one consolidated list of my open follow-ups."),
            turn("todo", 1, "assistant", answer),
        ],
        now=now + timedelta(minutes=1),
    )


def test_an_answer_that_repeats_recalled_passages_is_flagged_and_not_recalled(memory):
    recall_and_answer(memory, ECHO)
    stored = memory.get("todo")
    assert [t.echo for t in stored] == [False, True]
    assert stored[1].text == ECHO  # kept exactly as written
    assert "· assistant · recall echo" in render_turns(stored)
    for query in ("Marek bearing Thursday", "Priya integrations lead F-204", "open follow-ups"):
        hits = memory.recall(query, k=5)
        assert all(not (h.session_id == "todo" and h.seq == 1) for h in hits), query
        assert all(c.text != ECHO for h in hits for c in h.context)
    assert memory.recall("Marek bearing Thursday", k=1)[0].session_id == "handover"
    with_echoes = memory.recall("Marek bearing Thursday", k=5, include_echoes=True)
    assert any(h.session_id == "todo" and h.seq == 1 for h in with_echoes)


def test_a_new_answer_is_not_an_echo(memory):
    recall_and_answer(memory, FRESH)
    assert [t.echo for t in memory.get("todo")] == [False, False]
    assert memory.recall("draft the N-11 proposal for Jana", k=1)[0].session_id == "todo"


def test_a_new_fact_in_the_words_of_a_recalled_one_is_not_an_echo(memory):
    # The same sentences about another ticket: most trigrams were shown, but MT-5120 was not.
    recall_and_answer(memory, ECHO.replace("MT-4471", "MT-5120"))
    assert [t.echo for t in memory.get("todo")] == [False, False]


def test_only_recent_returns_count(memory):
    hits = memory.recall("follow-up MT-4471 F-204", k=3)
    memory.note_returned(returned_turns(hits), NOW)
    late = NOW + timedelta(hours=25)
    memory.store_turns([turn("todo", 1, "assistant", ECHO, late)], now=late)
    assert memory.get("todo")[0].echo is False


def test_a_user_repeating_a_passage_is_not_flagged(memory):
    hits = memory.recall("follow-up MT-4471 F-204", k=3)
    memory.note_returned(returned_turns(hits), NOW)
    memory.store_turns([turn("todo", 0, "user", ECHO)], now=NOW)
    assert memory.get("todo")[0].echo is False


def test_echo_detection_can_be_turned_off(home):
    settings = Settings.from_env({"IRENEO_ECHO_OVERLAP": "0"})
    with Memory(home, settings=settings) as other:
        assert not other.echo_policy.enabled
        recall_and_answer(other, ECHO)
        assert other.get("todo")[1].echo is False


def test_the_policy_reads_the_environment():
    env = {"IRENEO_ECHO_WINDOW_HOURS": "2", "IRENEO_ECHO_OVERLAP": "0.7"}
    assert Settings.from_env(env).echo_policy == EchoPolicy(timedelta(hours=2), 0.7)
    assert Settings.from_env({}).echo_policy == EchoPolicy(timedelta(hours=24), 0.5)
    with pytest.raises(SettingsError, match="IRENEO_ECHO_OVERLAP='2': .* at most 1"):
        Settings.from_env({"IRENEO_ECHO_OVERLAP": "2"})


def test_overlap_is_the_share_of_trigrams_found():
    sources = trigrams("the pump bearing noise on motor K-2 is logged as ticket MT-4471")
    assert overlap("the pump bearing noise on motor K-2 is logged as ticket MT-4471", sources) == 1
    assert overlap("Done.", sources) == 0  # too short to judge
    assert overlap("a completely different sentence about the weather and the lunch", sources) == 0


def test_a_post_reads_only_the_turns_shown_since_the_post_before(memory):
    """The echo test keeps the shown turns' words between posts (echoes.Shown): a busy user is
    shown thousands of turns a day, and reading them all again for every post grew with that."""
    recall_and_answer(memory, FRESH)
    read = memory._shown.reads
    assert read == len(memory.store.returned_texts(NOW - timedelta(hours=1))) > 0
    later = NOW + timedelta(minutes=2)
    memory.store_turns([turn("next", 1, "assistant", ECHO)], now=later)
    assert memory._shown.reads == read  # nothing shown since: nothing read
    assert memory.get("next")[0].echo  # and what was kept told the echo
    kept = memory._shown.size  # counted in what the server's registry holds open
    assert kept > 0 and memory.resident_bytes() == memory.store.resident_bytes() + kept
    memory.note_returned([("todo", 0)], later)
    memory.store_turns([turn("next", 2, "assistant", ECHO)], now=later)
    assert memory._shown.reads == read + 1  # one turn shown since: one read


def test_past_keep_chars_nothing_is_kept_and_echoes_are_still_told(memory, monkeypatch):
    monkeypatch.setattr(echoes, "KEEP_CHARS", 100)
    recall_and_answer(memory, ECHO)
    read = memory._shown.reads
    memory.store_turns([turn("next", 1, "assistant", ECHO)], now=NOW + timedelta(minutes=2))
    assert memory.get("next")[0].echo
    assert memory._shown.reads == 2 * read  # read again, all of them
    assert memory._shown.size == 0


def test_what_another_process_forgets_is_no_longer_shown_here(home):
    """A forget in another process cannot clear this one's kept words: the keys they are kept
    by (a turn's row id and content hash) drop out, even when the forgotten ids are reused."""
    since = NOW - timedelta(hours=1)
    with Memory(home) as memory, Memory(home) as other:
        first, second = SOURCES["handover"]
        memory.store_turns([turn("a", 0, "user", first), turn("a", 1, "assistant", second)])
        memory.note_returned([("a", 0), ("a", 1)], NOW)
        ids = {turn_id for turn_id, _ in memory.store.returned_keys(since)}
        assert "marek" in memory._shown.lines(memory.store, since)
        other.forget("a", now=NOW)
        other.store_turns([turn("b", seq, "user", t) for seq, t in enumerate(SOURCES["jobs"])])
        other.note_returned([("b", 0), ("b", 1)], NOW)
        assert {turn_id for turn_id, _ in memory.store.returned_keys(since)} == ids  # reused
        shown = memory._shown.lines(memory.store, since)
        assert "priya" in shown and "marek" not in shown
        memory.store_turns([turn("todo", 1, "assistant", ECHO)], now=NOW)
        assert memory.get("todo")[0].echo is False  # MT-4471 was never shown by what is left


def test_a_forget_here_drops_every_kept_word(memory):
    since = NOW - timedelta(hours=1)
    recall_and_answer(memory, FRESH)
    memory._shown.lines(memory.store, since)
    read = memory._shown.reads
    memory.forget("handover", now=NOW)
    left = memory.store.returned_texts(since)
    assert memory._shown.lines(memory.store, since).count("\n") + 1 == len(left) > 0
    assert memory._shown.reads == read + len(left)  # what is left read again: nothing was kept


def test_forgetting_removes_the_returned_records(memory):
    recall_and_answer(memory, FRESH)
    assert memory.store.returned_texts(NOW - timedelta(hours=1))
    memory.forget_all(now=NOW)
    assert memory.store.returned_texts(NOW - timedelta(hours=1)) == []


def test_a_turn_returned_again_is_recorded_once_at_its_latest(memory):
    """Every recall shows ~20 turns: the record keeps one row a turn, its latest return, so a
    busy memory's records stay as many as its turns shown within the window."""
    hits = memory.recall("follow-up MT-4471 F-204", k=3)
    shown = returned_turns(hits)
    for hour in range(5):
        memory.note_returned(shown, NOW + timedelta(hours=hour))
    db = memory.store._db
    assert db.execute("SELECT count(*) FROM returned").fetchone()[0] == len(set(shown))
    assert {at for (at,) in db.execute("SELECT at FROM returned")} == {"2026-10-20T13:00:00Z"}
    memory.note_returned(shown, NOW)  # an older return leaves the latest as it is
    assert len(memory.store.returned_texts(NOW + timedelta(hours=4))) == len(set(shown))


def test_records_past_the_window_are_removed_with_a_later_record(memory, monkeypatch):
    hits = memory.recall("follow-up MT-4471 F-204", k=3)
    memory.note_returned(returned_turns(hits)[:1], NOW)
    later = NOW + timedelta(hours=30)
    memory.note_returned([], later)  # within PRUNE_EVERY of the last removal: nothing done
    assert memory.store.returned_texts(NOW - timedelta(hours=1))
    monkeypatch.setattr(memory.store, "_pruned", memory.store._pruned - 60)
    memory.note_returned([], later)
    assert memory.store.returned_texts(NOW - timedelta(hours=1)) == []


def test_a_memory_keeps_its_records_through_the_upgrade(tmp_path):
    """A memory written before one record a turn keeps each turn's latest."""
    import sqlite3

    from ireneo.store.sqlite import MIGRATIONS, SQLiteStore

    home = tmp_path / "old"
    home.mkdir()
    db = sqlite3.connect(home / "memory.db", isolation_level=None)
    db.execute("CREATE TABLE migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
    for version, script in enumerate(MIGRATIONS[:8], start=1):
        db.executescript(
            f"BEGIN; INSERT INTO migrations VALUES ({version}, 'x'); {script}; COMMIT;"
        )
    db.execute("INSERT INTO sessions VALUES ('s', 'r')")
    db.execute(
        "INSERT INTO turns (id, session_id, turn_uuid, seq, ts, role, harness, blocks, "
        "content_hash) VALUES (7, 's', 'u', 0, '2026-10-01T00:00:00Z', 'user', 'test', "
        """'[["text", "The pump failed.", null]]', 'h')"""
    )
    for at in ("2026-10-20T09:00:00Z", "2026-10-20T11:00:00Z", "2026-10-20T10:00:00Z"):
        db.execute("INSERT INTO returned VALUES (7, ?)", (at,))
    db.close()
    store = SQLiteStore(home)
    assert store._db.execute("SELECT turn_id, at FROM returned").fetchall() == [
        (7, "2026-10-20T11:00:00Z")
    ]
    assert store.returned_texts(datetime(2026, 10, 20, 10, 30, tzinfo=UTC)) == ["The pump failed."]
    store.close()
