import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from ireneo import Memory
from ireneo.formats.funes_jsonl import parse_record
from ireneo.index import embed_pending, find_files, index_files, store_turns
from ireneo.store import Filters
from tests.conftest import conversation, turn_line, write_jsonl


def test_index_then_reindex_does_no_work(memory, tmp_path):
    conversation(tmp_path / "src", "c1", ["Ticket MT-4471 is open on K-2", "Noted, K-2 stays slow"])
    first = memory.index([tmp_path / "src"])
    assert (first.files_indexed, first.turns.added, first.embedded) == (1, 2, 2)
    again = memory.index([tmp_path / "src"])
    assert (again.files_indexed, again.files_unchanged, again.turns.added, again.embedded) == (
        0,
        1,
        0,
        0,
    )


def test_touched_file_is_read_but_nothing_re_embedded(memory, tmp_path):
    path = conversation(tmp_path / "src", "c1", ["alpha turn", "beta turn"])
    memory.index([path])
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    report = memory.index([path])
    assert (report.files_unchanged, report.embedded) == (1, 0)


def test_resent_turn_with_new_text_replaces_the_old(memory, tmp_path):
    path = conversation(tmp_path / "src", "c1", ["the budget is 40k", "ok"])
    memory.index([path])
    conversation(tmp_path / "src", "c1", ["the budget is 55k", "ok", "and a new third turn"])
    report = memory.index([path])
    assert (report.turns.added, report.turns.replaced, report.turns.unchanged, report.embedded) == (
        1,
        1,
        1,
        2,
    )
    assert [t.text for t in memory.get("c1")] == ["the budget is 55k", "ok", "and a new third turn"]
    assert not [h for h in memory.recall("40k") if "40k" in h.text + str(h.context)]
    assert memory.recall("55k")[0].text == "the budget is 55k"


def test_a_repeated_text_is_embedded_once_and_every_copy_gets_its_vector(memory, tmp_path):
    thanks = "Thanks, have a good rest of your shift!"
    for n in range(3):
        conversation(tmp_path / "src", f"c{n}", [f"pump P-00{n} tripped again", thanks])
    index_files(memory.store, memory.embedder.split, find_files([tmp_path / "src"]))

    class Counting:  # the real model, with a list of what it was asked to embed
        def __init__(self, model):
            self.model, self.asked = model, []

        def embed_passages(self, texts):
            self.asked += texts
            return self.model.embed_passages(texts)

    counting = Counting(memory.embedder)
    assert embed_pending(memory.store, counting) == 6
    assert sorted(counting.asked) == sorted(
        [thanks] + [f"pump P-00{n} tripped again" for n in range(3)]
    )
    alone = memory.embedder.embed_passages([thanks])[0]
    found = memory.store.dense_search(alone, 4, Filters())
    assert [score for _, score in found[:3]] == pytest.approx([1.0, 1.0, 1.0], abs=0.01)
    assert found[3][1] < 0.9


def test_pending_passages_resume_after_the_last_id_got(memory, tmp_path):
    conversation(tmp_path / "src", "c1", ["first turn", "second turn", "third turn"])
    index_files(memory.store, memory.embedder.split, find_files([tmp_path / "src"]))
    pending = memory.store.pending_passages(10)
    assert [text for _, text in pending] == ["first turn", "second turn", "third turn"]
    first, second, third = (pid for pid, _ in pending)
    assert memory.store.pending_passages(10, after=first) == pending[1:]
    memory.store.put_vectors([second], memory.embedder.embed_passages(["second turn"]))
    assert memory.store.pending_passages(10) == [pending[0], pending[2]]
    assert memory.store.pending_passages(1, after=first) == [pending[2]]
    assert memory.store.pending_passages(10, after=third) == []


def test_pending_counts_and_reads_agree_with_a_join_through_every_write(tmp_path):
    """SQLite's count_pending reads the triggers' counters and its pending_passages may start
    after the newest vector: both must give what a join over every passage gives, whatever was
    embedded, forgotten or dropped in between."""
    with Memory(tmp_path / "home") as memory:
        _pending_agree(memory, tmp_path)


def _pending_agree(memory: Memory, tmp_path) -> None:
    store = memory.store

    def joined() -> list[tuple[int, str]]:
        return store._db.execute(
            "SELECT p.id, p.text FROM passages p LEFT JOIN vectors v ON v.passage_id = p.id "
            "WHERE v.passage_id IS NULL ORDER BY p.id"
        ).fetchall()

    def agree() -> list[tuple[int, str]]:
        expected = joined()
        assert store.count_pending() == len(expected)
        assert store.pending_passages(100) == expected
        assert store.pending_passages(2) == expected[:2]
        return expected

    for name in ("c1", "c2", "c3"):
        conversation(tmp_path / "src", name, [f"{name} first turn", f"{name} second turn"])
    index_files(store, memory.embedder.split, find_files([tmp_path / "src"]))
    ids = [pid for pid, _ in agree()]
    assert len(ids) == 6

    def embed(pids: list[int]) -> None:
        store.put_vectors(pids, memory.embedder.embed_passages(["a turn"] * len(pids)))

    embed(ids[:2])  # the oldest: what is pending is all newer than the newest vector
    assert [pid for pid, _ in agree()] == ids[2:]
    embed([ids[4]])  # one in the middle: ids[2], ids[3] are older than it
    assert [pid for pid, _ in agree()] == [ids[2], ids[3], ids[5]]
    now = datetime.now(UTC)
    store.forget_conversation("c3", actor="test", now=now)  # ids[4] (a vector) and ids[5]
    assert [pid for pid, _ in agree()] == [ids[2], ids[3]]
    embed([ids[2], ids[3]])
    assert agree() == []
    conversation(tmp_path / "more", "c4", ["c4 first turn"])
    index_files(store, memory.embedder.split, find_files([tmp_path / "more"]))
    assert len(agree()) == 1  # a new passage, stored after the deletion
    embed([pid for pid, _ in agree()])
    # c1 sent again with new words: its embedded passages go (their vectors by cascade)
    conversation(tmp_path / "src", "c1", ["c1 first turn, edited", "c1 second turn, edited"])
    index_files(store, memory.embedder.split, find_files([tmp_path / "src"]))
    assert [text for _, text in agree()] == ["c1 first turn, edited", "c1 second turn, edited"]
    store.drop_vectors()
    assert len(agree()) == 5
    assert embed_pending(store, memory.embedder) == 5
    assert agree() == []


def test_document_frequencies_follow_every_write(memory, tmp_path):
    def frequencies() -> dict[str, int]:
        words = ["budget", "zanzibar", "mt4471", "55"]
        return memory.store.term_stats(words).document_frequency

    path = conversation(tmp_path / "src", "c1", ["zanzibar budget MT-4471", "budget ok budget"])
    conversation(tmp_path / "src", "c2", ["the budget is fine"])
    memory.index([tmp_path / "src"])
    assert frequencies() == {"budget": 3, "zanzibar": 1, "mt4471": 1}
    conversation(tmp_path / "src", "c1", ["the budget is 55k", "budget ok budget"])
    memory.index([path])
    assert frequencies() == {"budget": 3, "55": 1}  # the edited turn's old words are gone
    # a turn twice in one write, edited between (no reader lets that through; the store counts
    # it right anyway): only its last text counts
    twice = [parse_record(turn_line("c3", 0, text), "t") for text in ("zanzibar ok", "55 ok")]
    store_turns(memory.store, memory.embedder.split, twice)
    assert [t.text for t in memory.get("c3")] == ["55 ok"]
    assert frequencies() == {"budget": 3, "55": 2}


def test_bad_file_refused_whole_other_files_index(memory, tmp_path):
    good = conversation(tmp_path / "src", "good", ["pump P-003 seal leak", "ticket MT-1040"])
    bad = write_jsonl(
        tmp_path / "src" / "bad.funes.jsonl",
        [turn_line("bad", 0, "unique-marker-zebra"), {"session_id": "bad"}],
    )
    report = memory.index([tmp_path / "src"])
    assert report.files_indexed == 1
    assert [str(e) for e in report.refused] == [f"{bad}:2: missing field 'turn_uuid'"]
    assert not [h for h in memory.recall("unique-marker-zebra") if h.session_id == "bad"]
    assert [s.session_id for s in memory.sessions()] == ["good"]
    assert good.exists()


def test_thinking_and_tool_blocks_are_indexed_and_filterable(memory, tmp_path):
    thought = turn_line("c1", 0, "")
    thought["blocks"] = [
        {"block_type": "thinking", "text": "consider the quokka hypothesis"},
        {"block_type": "tool_use", "text": "grep -r wombat .", "tool_name": "Bash"},
    ]
    memory.index(
        [write_jsonl(tmp_path / "a.funes.jsonl", [thought, turn_line("c1", 1, "lunch is at noon")])]
    )
    assert memory.recall("quokka", k=1)[0].seq == 0
    assert memory.recall("wombat", k=1, block_types=["tool_use"])[0].seq == 0
    assert [h.seq for h in memory.recall("quokka", block_types=["text"])] == [1]


def test_long_turn_is_split_and_its_end_still_found(memory, tmp_path):
    filler = " ".join(f"word{i}" for i in range(3000))
    memory.index([conversation(tmp_path, "long", [filler + " the final secret is zanzibar-77"])])
    assert memory.status().passages > 1
    hit = memory.recall("zanzibar-77", k=1)[0]
    assert hit.session_id == "long" and hit.text.endswith("zanzibar-77")


KILLER = """
import sys
from ireneo import Memory
from ireneo.index import embed_pending, find_files, index_files
from ireneo.store import Filters
from ireneo import index
index.EMBED_BATCH = 8
m = Memory(sys.argv[1])
def progress(done, total):
    print(done, flush=True)
m.index([sys.argv[2]], progress=progress)
"""


def test_killed_mid_index_reopens_consistent_and_rerun_finishes(home, tmp_path):
    src = tmp_path / "src"
    for c in range(40):
        conversation(
            src,
            f"c{c}",
            [f"conversation {c} about machine K-{c} and ticket MT-{1000 + c}"] * 1
            + [f"reply {c} {i}" for i in range(5)],
        )
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLER, str(home), str(src)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip()  # at least one batch of vectors committed
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    db = sqlite3.connect(home / "memory.db")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()

    with Memory(home) as memory:
        status = memory.status()
        assert status.turns == 240 and 0 < status.embedded < status.passages
        assert memory.pending() == status.passages - status.embedded
        report = memory.index([src])
        assert report.embedded == status.passages - status.embedded
        assert memory.pending() == 0
        assert memory.recall("MT-1037", k=1)[0].session_id == "c37"
