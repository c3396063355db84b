"""Explicit memories (ireneo.memories) on a real store and the real default embedder: storing,
near-duplicates, hybrid search, fail-closed tags, deletion, expiry on a controllable clock,
ranking factors, and conversation recall left exactly as it was."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from ireneo import Memory
from ireneo.config import Settings, SettingsError
from ireneo.memories import (
    ExplicitMemories,
    InvalidMemory,
    MemoryPolicy,
    render_memory,
    render_memory_hits,
)
from ireneo.store import sqlite as sqlite_store
from tests.conftest import conversation

T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)

RAHUL = "Rahul's payment failed with UPI; paying by card worked last time."


class Clock:
    def __init__(self, now: datetime = T0):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def memories(memory, clock) -> ExplicitMemories:
    return ExplicitMemories(memory, policy=MemoryPolicy(), now=clock)


def texts(hits) -> list[str]:
    return [hit.memory.content for hit in hits]


# -- storing and near-duplicates ------------------------------------------------------------------


def test_store_returns_an_id_and_keeps_the_memory(memories):
    written = memories.store(RAHUL, tags=["Billing", " payment "], importance="high", source="chat")
    assert written.created and written.updates == 0
    assert written.memory_id.startswith("mem-")
    record = memories.get(written.memory_id)
    assert record.content == RAHUL
    assert record.tags == ("billing", "payment")
    assert record.importance_name == "high"
    assert record.source == "chat"
    assert record.created_at == record.updated_at == T0
    assert memories.count() == 1


def test_a_near_duplicate_updates_the_memory_keeping_its_creation_date(memories, clock):
    first = memories.store(RAHUL, tags=["billing"], importance="low")
    clock.advance(days=3)
    again = memories.store(
        "Rahul's payment failed with UPI; paying by card worked.", tags=["upi"], importance="medium"
    )
    assert not again.created and again.memory_id == first.memory_id and again.updates == 1
    record = memories.get(first.memory_id)
    assert record.content == "Rahul's payment failed with UPI; paying by card worked."
    assert record.created_at == T0 and record.updated_at == T0 + timedelta(days=3)
    assert record.tags == ("billing", "upi")  # united
    assert record.importance_name == "medium"  # the higher of the two
    assert record.updates == 1
    memories.store(RAHUL, importance="low")
    assert memories.get(first.memory_id).updates == 2
    assert memories.get(first.memory_id).importance_name == "medium"  # never lowered
    assert memories.count() == 1


def test_facts_that_differ_only_in_identifiers_are_not_merged(memories):
    # cosine 0.953 with the default model: a plain threshold would overwrite one with the other
    a = memories.store("Ticket MT-2056 is open for the bearing hot on extruder EX-388.")
    b = memories.store("Ticket MT-5985 is open for the bearing hot on extruder EX-301.")
    assert a.created and b.created and a.memory_id != b.memory_id
    assert memories.count() == 2


def test_near_duplicates_written_at_once_land_as_one_memory_with_every_tag(memories):
    from concurrent.futures import ThreadPoolExecutor

    memories.store("The K-2 pump is serviced on Mondays.")  # the first write records the model
    levels = ["low", "medium", "high", "low"]
    with ThreadPoolExecutor(4) as pool:
        written = list(
            pool.map(
                lambda i: memories.store(RAHUL, tags=[f"t{i}"], importance=levels[i]), range(4)
            )
        )
    assert sum(w.created for w in written) == 1 and len({w.memory_id for w in written}) == 1
    assert sorted(w.updates for w in written) == [0, 1, 2, 3]
    record = memories.get(written[0].memory_id)
    assert sorted(record.tags) == ["t0", "t1", "t2", "t3"] and record.updates == 3
    assert record.importance_name == "high"
    assert memories.count() == 2


def test_the_dedup_threshold_is_configurable(memory, clock):
    off = ExplicitMemories(memory, policy=MemoryPolicy(dedup=1.01), now=clock)
    off.store(RAHUL)
    assert off.store(RAHUL).created  # even the same text is kept twice
    assert off.count() == 2
    loose = ExplicitMemories(memory, policy=MemoryPolicy(dedup=0.5), now=clock)
    assert not loose.store("Rahul paid by card after the UPI payment failed.").created
    assert loose.count() == 2


def test_dedup_comes_from_the_memory_settings(home):
    settings = Settings.from_env({"IRENEO_MEMORY_DEDUP": "1.5"})
    with Memory(home, settings=settings) as other:
        other.memories.store(RAHUL)
        assert other.memories.store(RAHUL).created


def test_the_first_memory_records_the_embedding_model(memory, memories):
    assert memory.store.get_meta("model") is None
    memories.store(RAHUL)
    assert memory.store.get_meta("model") == memory.model_name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": "   "}, "empty"),
        ({"content": "x" * 8001}, "at most 8000 characters"),
        ({"content": "fine", "importance": "urgent"}, "low, medium or high"),
        ({"content": "fine", "tags": "billing"}, "list of strings"),
        ({"content": "fine", "tags": [3]}, "list of strings"),
        ({"content": "fine", "tags": [f"t{i}" for i in range(21)]}, "at most 20 tags"),
        ({"content": "fine", "tags": ["x" * 65]}, "at most 64 characters"),
        ({"content": "fine", "source": "s" * 257}, "at most 256 characters"),
    ],
)
def test_bad_memories_are_refused_and_nothing_is_stored(memories, kwargs, message):
    with pytest.raises(InvalidMemory, match=message):
        memories.store(**kwargs)
    assert memories.count() == 0


# -- search ---------------------------------------------------------------------------------------


@pytest.fixture
def stocked(memories) -> ExplicitMemories:
    memories.store(RAHUL, tags=["billing"], importance="high")
    memories.store("Prefers email over phone calls for any follow-up.", tags=["contact"])
    memories.store("Ticket MT-4471 blocks the N-11 upgrade on compressor K-2.", importance="low")
    memories.store("The office wifi password changes every March.")  # no tags
    return memories


def test_search_finds_by_keyword_and_by_meaning(stocked):
    assert texts(stocked.search("MT-4471", limit=1)) == [
        "Ticket MT-4471 blocks the N-11 upgrade on compressor K-2."
    ]
    assert texts(stocked.search("mt4471", limit=1))[0].startswith("Ticket MT-4471")
    # no word in common with the memory: found by its meaning
    assert texts(stocked.search("how should we contact them", limit=1)) == [
        "Prefers email over phone calls for any follow-up."
    ]
    assert texts(stocked.search("my payment isn't going through again", limit=1)) == [RAHUL]


def test_search_is_best_first_and_limited(stocked):
    hits = stocked.search("payment card", limit=2)
    assert len(hits) == 2
    assert hits[0].memory.content == RAHUL
    assert hits[0].score >= hits[1].score
    assert stocked.search("   ") == []


def test_a_tag_filter_admits_any_of_its_tags_and_never_an_untagged_memory(stocked):
    assert texts(stocked.search("payment", tags=["BILLING"])) == [RAHUL]
    assert set(texts(stocked.search("anything", tags=["billing", "contact"]))) == {
        RAHUL,
        "Prefers email over phone calls for any follow-up.",
    }
    # the untagged memory matches the query word for word, and still never a tag filter
    assert stocked.search("office wifi password March", tags=["wifi"]) == []
    assert stocked.search("office wifi password March", tags=["billing"]) != []
    assert "The office wifi password changes every March." not in texts(
        stocked.search("office wifi password March", tags=["billing", "contact"], limit=10)
    )
    # no filter (None or an empty list) admits it
    assert texts(stocked.search("office wifi password", limit=1)) == [
        "The office wifi password changes every March."
    ]
    assert texts(stocked.search("office wifi password", tags=[], limit=1)) == [
        "The office wifi password changes every March."
    ]


def test_min_importance_keeps_that_level_and_above(stocked):
    assert texts(stocked.search("anything at all", min_importance="high")) == [RAHUL]
    medium = texts(stocked.search("anything at all", min_importance="medium"))
    assert len(medium) == 3 and not any("MT-4471" in t for t in medium)
    assert len(stocked.search("anything at all", min_importance="low")) == 4
    with pytest.raises(InvalidMemory):
        stocked.search("x", min_importance="urgent")


def test_search_counts_uses(stocked):
    hit = stocked.search("MT-4471", limit=1)[0]
    assert hit.memory.uses == 0
    stocked.search("MT-4471", limit=1)
    assert stocked.get(hit.memory.memory_id).uses == 2
    stocked.search("MT-4471", limit=1, count_use=False)
    assert stocked.get(hit.memory.memory_id).uses == 2


def test_delete_forgets_only_that_memory(stocked):
    target = stocked.search("MT-4471", limit=1)[0].memory.memory_id
    assert stocked.delete(target)
    assert not stocked.delete(target)
    assert not stocked.delete("mem-000000000000")
    assert stocked.count() == 3
    assert all("MT-4471" not in t for t in texts(stocked.search("MT-4471 K-2 N-11")))


def test_memories_of_two_homes_never_mix(tmp_path, clock):
    with Memory(tmp_path / "alice") as alice, Memory(tmp_path / "bob") as bob:
        a = ExplicitMemories(alice, now=clock)
        b = ExplicitMemories(bob, now=clock)
        alice_id = a.store(RAHUL, tags=["billing"]).memory_id
        b.store(RAHUL, tags=["billing"])  # the same words: no dedup across users
        assert b.count() == 1 and a.count() == 1
        assert not b.delete(alice_id)
        assert a.get(alice_id).content == RAHUL


# -- expiry on a controllable clock ----------------------------------------------------------------


def test_low_importance_memories_expire_after_the_configured_age(memory, clock):
    mems = ExplicitMemories(memory, policy=MemoryPolicy(low_max_age_days=30), now=clock)
    old_low = mems.store("Parking at gate B this week.", importance="low").memory_id
    mems.store("Invoices go to finance@example.com.", importance="medium")
    mems.store("Contract renewal is due in June.", importance="high")
    clock.advance(days=20)
    young_low = mems.store("The canteen closes early on Fridays.", importance="low").memory_id
    clock.advance(days=10, seconds=1)  # old_low is 30 days and a second old, young_low 10 days

    # hidden at once, before the job runs
    assert old_low not in [h.memory.memory_id for h in mems.search("parking gate B", limit=10)]
    assert mems.count() == 4
    assert mems.expire() == 1
    assert mems.count() == 3
    assert {r.memory_id for r in mems.all()} >= {young_low}
    assert mems.expire() == 0

    clock.advance(days=25)  # young_low is now 35 days old; medium and high never expire
    assert mems.expire() == 1
    assert sorted(r.importance_name for r in mems.all()) == ["high", "medium"]


def test_an_update_restarts_a_low_memorys_age(memory, clock):
    mems = ExplicitMemories(memory, policy=MemoryPolicy(low_max_age_days=30), now=clock)
    memory_id = mems.store(RAHUL, importance="low").memory_id
    clock.advance(days=25)
    mems.store(RAHUL, importance="low")  # a near-duplicate: updated now
    clock.advance(days=25)
    assert mems.expire() == 0
    assert mems.get(memory_id).content == RAHUL


def test_expiry_can_be_turned_off(memory, clock):
    mems = ExplicitMemories(memory, policy=MemoryPolicy(low_max_age_days=0), now=clock)
    mems.store("Parking at gate B this week.", importance="low")
    clock.advance(days=3650)
    assert mems.expire() == 0
    assert len(mems.search("parking")) == 1


# -- ranking factors ------------------------------------------------------------------------------

TWINS = ("Locker code 1111 for the gym on floor two.", "Locker code 2222 for the gym on floor two.")


def test_importance_weights_rank_equally_relevant_memories(memory, clock):
    mems = ExplicitMemories(memory, policy=MemoryPolicy(importance_weights=(1, 1, 2)), now=clock)
    mems.store(TWINS[0], importance="low")
    mems.store(TWINS[1], importance="high")
    hits = mems.search("gym locker code floor two", limit=2)
    assert texts(hits) == [TWINS[1], TWINS[0]]
    assert hits[0].score == pytest.approx(2 * hits[0].relevance)


def test_a_half_life_prefers_recent_memories(memory, clock):
    mems = ExplicitMemories(
        memory, policy=MemoryPolicy(half_life_days=1, low_max_age_days=0), now=clock
    )
    mems.store(TWINS[1])
    clock.advance(days=10)
    mems.store(TWINS[0])
    assert texts(mems.search("gym locker code floor two", limit=2))[0] == TWINS[0]
    neutral = ExplicitMemories(memory, policy=MemoryPolicy(), now=clock)
    hits = neutral.search("gym locker code floor two", limit=2, count_use=False)
    assert [h.score for h in hits] == [h.relevance for h in hits]  # the defaults change nothing


def test_a_use_weight_prefers_memories_used_before(memory, clock):
    mems = ExplicitMemories(memory, policy=MemoryPolicy(use_weight=1.0), now=clock)
    mems.store(TWINS[0])
    used = mems.store(TWINS[1]).memory_id
    for _ in range(7):
        mems.search("locker 2222", limit=1)
    assert mems.get(used).uses == 7
    assert texts(mems.search("gym locker code floor two", limit=2))[0] == TWINS[1]


def test_the_policy_reads_the_environment():
    env = {
        "IRENEO_MEMORY_DEDUP": "0.9",
        "IRENEO_MEMORY_HALF_LIFE_DAYS": "60",
        "IRENEO_MEMORY_IMPORTANCE_WEIGHTS": "0.8, 1, 1.2",
        "IRENEO_MEMORY_USE_WEIGHT": "0.1",
        "IRENEO_MEMORY_LOW_MAX_AGE_DAYS": "7",
    }
    policy = Settings.from_env(env).memory_policy
    assert policy == MemoryPolicy(0.9, 60.0, (0.8, 1.0, 1.2), 0.1, 7.0)
    assert Settings.from_env({}).memory_policy == MemoryPolicy()
    assert MemoryPolicy() == MemoryPolicy(0.95, 0.0, (1.0, 1.0, 1.0), 0.0, 30.0)
    for bad in (
        {"IRENEO_MEMORY_DEDUP": "high"},
        {"IRENEO_MEMORY_HALF_LIFE_DAYS": "-1"},
        {"IRENEO_MEMORY_IMPORTANCE_WEIGHTS": "1,2"},
        {"IRENEO_MEMORY_IMPORTANCE_WEIGHTS": "1,0,1"},
    ):
        with pytest.raises(SettingsError, match=next(iter(bad))):
            Settings.from_env(bad)


# -- memories and conversations together ------------------------------------------------------------

CONVERSATIONS = {
    "pay-1": [
        "My order won't go through, the UPI payment failed twice.",
        "Sorry about that. Could you try paying by card instead?",
        "Paying by card worked, thanks.",
    ],
    "ship-1": [
        "Where is my parcel? Tracking number TRK-5521.",
        "It left the depot this morning and arrives tomorrow.",
    ],
    "k2-1": [
        "The pump bearing noise on motor K-2 is logged as ticket MT-4471.",
        "MT-4471 must be closed before the N-11 upgrade.",
    ],
}
QUERIES = ["payment failed", "UPI card", "parcel tracking", "MT-4471", "N-11 upgrade", "bearing"]


def _recall_all(memory: Memory) -> list[tuple]:
    return [
        [(h.session_id, h.seq, round(h.score, 9), h.kind) for h in memory.recall(q, k=5)]
        for q in QUERIES
    ]


def test_conversation_recall_is_unchanged_by_memories(memory, tmp_path):
    for sid, turns in CONVERSATIONS.items():
        conversation(tmp_path / "src", sid, turns)
    memory.index([tmp_path / "src"])
    before = _recall_all(memory)
    # memories that repeat the conversations' own words, and many others
    for turns in CONVERSATIONS.values():
        for text in turns:
            memory.memories.store(text, tags=["copy"])
    for i in range(30):
        memory.memories.store(f"Unrelated note {i}: order O-{1000 + i} was shipped by courier.")
    assert _recall_all(memory) == before
    assert all(kind == "conversation" for hits in before for *_, kind in hits)


def test_recall_of_both_marks_each_hit_and_never_drops_a_conversation(memory, tmp_path):
    for sid, turns in CONVERSATIONS.items():
        conversation(tmp_path / "src", sid, turns)
    memory.index([tmp_path / "src"])
    memory.memories.store(RAHUL, tags=["billing"], importance="high")
    memory.memories.store("Prefers email over phone calls.")
    conversations = memory.recall("payment failed UPI", k=3)
    both = memory.memories.recall("payment failed UPI", k=3, memories_k=2)
    assert [h for h in both if h.kind == "conversation"] == conversations
    found = [h for h in both if h.kind == "memory"]
    assert len(found) == 2 and found[0].text == RAHUL
    assert found[0].role == "memory" and found[0].session_id.startswith("mem-")
    assert [h.score for h in both] == sorted((h.score for h in both), reverse=True)


# -- storage --------------------------------------------------------------------------------------


def test_a_memory_written_before_migration_2_opens_and_recalls_the_same(home, tmp_path):
    conversation(tmp_path / "src", "pay-1", CONVERSATIONS["pay-1"])
    with Memory(home) as old:
        old.index([tmp_path / "src"])
        before = [(h.session_id, h.seq, h.score) for h in old.recall("payment", k=3)]
    # Take the file back to the schema of migration 1: what the later migrations added goes.
    db = sqlite3.connect(home / "memory.db")
    db.executescript(
        """
        DROP TABLE memories_vocab; DROP TABLE memories_fts; DROP TABLE memory_vectors;
        DROP TABLE memory_tags; DROP TABLE memories; DROP TABLE forget_log;
        DROP TABLE returned; ALTER TABLE turns DROP COLUMN echo;
        DROP TRIGGER passages_df_ad; DROP TABLE term_df;
        DROP TRIGGER passages_counted_ad; ALTER TABLE corpus DROP COLUMN passage_deletes;
        DROP TRIGGER passages_ai; DROP TRIGGER passages_ad;
        DROP TRIGGER passages_unsave; DROP TRIGGER vectors_unsave; DROP TABLE saved_copies;
        CREATE VIRTUAL TABLE passages_fts USING fts5(
            terms, content='passages', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE passages_vocab USING fts5vocab(passages_fts, 'row');
        INSERT INTO passages_fts (passages_fts) VALUES ('rebuild');
        CREATE TRIGGER passages_ai AFTER INSERT ON passages BEGIN
            INSERT INTO passages_fts (rowid, terms) VALUES (new.id, new.terms);
            UPDATE corpus SET passages = passages + 1, terms = terms + new.term_count;
        END;
        CREATE TRIGGER passages_ad AFTER DELETE ON passages BEGIN
            INSERT INTO passages_fts (passages_fts, rowid, terms)
                VALUES ('delete', old.id, old.terms);
            UPDATE corpus SET passages = passages - 1, terms = terms - old.term_count;
        END;
        DELETE FROM migrations WHERE version > 1;
        """
    )
    assert [v for (v,) in db.execute("SELECT version FROM migrations")] == [1]
    db.close()
    with Memory(home) as memory:
        assert [(h.session_id, h.seq, h.score) for h in memory.recall("payment", k=3)] == before
        memory.memories.store(RAHUL)
        assert texts(memory.memories.search("card")) == [RAHUL]
        assert [t.echo for t in memory.get("pay-1")] == [False] * len(CONVERSATIONS["pay-1"])
        passages = memory.status().passages
        conversation(tmp_path / "more", "pay-2", ["a refund of the second payment"])
        memory.index([tmp_path / "more"])  # the triggers migration 7 made count it
        assert memory.status().passages == passages + 1
        assert memory.recall("refund", k=1)[0].session_id == "pay-2"
    db = sqlite3.connect(home / "memory.db")
    versions = [v for (v,) in db.execute("SELECT version FROM migrations ORDER BY version")]
    assert versions == list(range(1, len(sqlite_store.MIGRATIONS) + 1))
    assert not db.execute(
        "SELECT name FROM sqlite_master WHERE name LIKE 'passages_fts%'"
    ).fetchall()
    assert db.execute("SELECT passages FROM corpus").fetchone() == (passages + 1,)
    db.close()


def test_vectors_of_another_model_are_made_again(memory, memories):
    memory_id = memories.store(RAHUL).memory_id
    # as if stored before `ireneo reembed` changed the model
    memory.store.memory_put_vectors([memory_id], np.ones((1, 3), dtype=np.float32), "old-model")
    assert memory.store.memories_unembedded(memory.model_name, 10) == [(memory_id, RAHUL)]
    assert texts(memories.search("paid with a credit card")) == [RAHUL]
    assert memory.store.memories_unembedded(memory.model_name, 10) == []


def test_memories_survive_reopening(home, clock):
    with Memory(home) as memory:
        memory_id = ExplicitMemories(memory, now=clock).store(RAHUL, tags=["billing"]).memory_id
    with Memory(home) as memory:
        assert ExplicitMemories(memory, now=clock).get(memory_id).tags == ("billing",)


# -- text -------------------------------------------------------------------------------------------


def test_the_rendered_memory_is_pinned(memories, clock):
    memory_id = memories.store(
        "Prefers PostgreSQL.\nAsked twice.", tags=["db", "prefs"], importance="high"
    ).memory_id
    record = memories.get(memory_id)
    assert render_memory(1, record) == (
        f"[1] {memory_id} · 2026-10-01 · high · tags: db, prefs\n    | Prefers PostgreSQL.\n    | Asked twice."
    )
    clock.advance(days=2)
    memories.store("Prefers PostgreSQL.\nAsked twice!")
    record = memories.get(memory_id)
    assert render_memory(2, record).startswith(
        f"[2] {memory_id} · 2026-10-01 (updated 2026-10-03) · high · tags: db, prefs\n"
    )
    other = memories.store("No tags here.").memory_id
    assert render_memory(3, memories.get(other)) == (
        f"[3] {other} · 2026-10-03 · medium · no tags\n    | No tags here."
    )


def test_rendered_hits_are_capped_with_a_count_of_what_was_cut(memories):
    for i in range(6):
        memories.store(f"Report R-{i}: " + "the reject rate stayed at four percent. " * 6)
    hits = memories.search("reject rate", limit=6)
    text = render_memory_hits(hits, max_chars=700)
    assert len(text) <= 700
    assert text.startswith("[1] mem-")
    assert text.endswith("more memories cut]")
    alone = render_memory_hits(hits[:1], max_chars=120)  # the best one alone is too long
    assert len(alone) <= 120 and alone.endswith(" […]")
    header, text = alone.split("\n")
    assert header == render_memory_hits(hits[:1]).split("\n")[0] and text.startswith("    | ")
    # not even the header fits: no header cut short, only the mark
    assert render_memory_hits(hits[:1], max_chars=50) == "[…]"
