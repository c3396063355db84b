"""The embedded store's reads of turn windows (store/sqlite.py): each window's turns are those
of its own conversation, whatever characters the conversation's id holds."""

from __future__ import annotations

from ireneo import Memory
from tests.conftest import turn_line, write_jsonl


def test_a_conversation_id_holding_nul_reads_its_own_turns(home, tmp_path):
    """The .funes.jsonl format admits any string without ':' as a session_id. Windows bound as
    one JSON value are read by SQLite's JSON functions, which end a string at NUL: the window
    of "a\\x00b" read the turns of "a", and recall showed them as a hit of "a\\x00b"."""
    lines = [
        turn_line("a", 0, "alpha apple orchard"),
        turn_line("a", 1, "alpha reply"),
        turn_line("a\x00b", 0, "bravo boiler valve"),
        turn_line("a\x00b", 1, "bravo reply"),
    ]
    source = write_jsonl(tmp_path / "src" / "two.funes.jsonl", lines)
    with Memory(home) as memory:
        memory.index([source])
        windows = memory.store.turn_windows([("a\x00b", None, None), ("a", 0, 0)])
        assert [[(t.session_id, t.seq) for t in window] for window in windows] == [
            [("a\x00b", 0), ("a\x00b", 1)],
            [("a", 0)],
        ]
        hits = memory.recall("bravo boiler", k=1)
        assert hits[0].session_id == "a\x00b" and hits[0].text == "bravo boiler valve"
        memory.note_returned([("a\x00b", 0)])  # recorded as its own turn too
        assert memory.store.returned_texts(hits[0].ts.replace(year=2000)) == ["bravo boiler valve"]


def test_a_turn_read_again_is_read_as_it_is_now(home, tmp_path):
    """Turns read are kept by their whole row (store.rows.kept): a turn edited since,
    one marked an echo, and one too long to keep are each read as they are now."""
    from dataclasses import replace

    from ireneo.formats import funes_jsonl
    from ireneo.store import rows

    long = "the long report " * (rows.KEPT_TURN_CHARS // 8)
    lines = [turn_line("a", 0, "first words"), turn_line("a", 1, long)]
    with Memory(home) as memory:
        memory.store_turns(funes_jsonl.read_file(write_jsonl(tmp_path / "a.funes.jsonl", lines)))
        first = memory.store.turn_windows([("a", None, None)])[0]
        again = memory.store.turn_windows([("a", None, None)])[0]
        assert again == first and again[0] is first[0]  # kept
        assert again[1] == first[1] and again[1] is not first[1]  # too long: parsed again
        assert first[1].text == long
        edited = [turn_line("a", 0, "second words")]
        memory.store_turns(funes_jsonl.read_file(write_jsonl(tmp_path / "b.funes.jsonl", edited)))
        now = memory.store.turn_windows([("a", 0, 0)])[0]
        assert [t.text for t in now] == ["second words"]
        turn = now[0]
        with memory.store._lock:
            memory.store._db.execute("UPDATE turns SET echo = 1 WHERE seq = 0")
        assert memory.store.turn_windows([("a", 0, 0)])[0] == [replace(turn, echo=True)]
