"""The rules both stores share (store/base.py), on their own: what a written turn does, which
stored memory a new one updates, and what the updated memory then holds. The stores run them on
real rows in test_index.py, test_memories.py and test_postgres.py."""

from __future__ import annotations

from datetime import UTC, datetime

from ireneo.model import Block, Turn
from ireneo.store.base import MemoryDraft, StoredMemory, merged, near_duplicate, turn_changes

T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)


def write(session_id: str, turn_uuid: str, digest: str):
    turn = Turn(session_id, turn_uuid, 0, T0, "user", "test", (Block("text", digest),))
    return (turn, digest, [])


def stored(row: int, terms: str, **fields) -> StoredMemory:
    values = {"tags": (), "importance": 1, "source": None, "updates": 0, **fields}
    return StoredMemory(row, f"mem-{row}", terms, **values)


def draft(terms: str, tags: tuple[str, ...] = (), importance: int = 1, source=None):
    return MemoryDraft(terms, terms, tags, importance, source)


def test_a_turn_is_added_replaced_or_left_by_its_hash():
    turns = [write("c1", "a", "h1"), write("c1", "b", "h2"), write("c2", "a", "h3")]
    stored_hashes = {("c1", "a"): "h1", ("c1", "b"): "old"}
    assert turn_changes(turns, stored_hashes) == ["unchanged", "replaced", "added"]


def test_a_key_given_twice_counts_as_two_writes_in_a_row():
    turns = [write("c1", "a", "h1"), write("c1", "a", "h1"), write("c1", "a", "h2")]
    assert turn_changes(turns, {}) == ["added", "unchanged", "replaced"]
    assert turn_changes(turns, {("c1", "a"): "h2"}) == ["replaced", "unchanged", "replaced"]


def test_the_nearest_memory_with_the_same_digit_terms_is_the_duplicate():
    nearest = [stored(1, "ticket mt2056 ex388"), stored(2, "ticket mt5985 ex301"), stored(3, "x")]
    assert near_duplicate(draft("ticket mt5985 on ex301"), nearest) == nearest[1]
    assert near_duplicate(draft("ticket mt0001 on ex301"), nearest) is None
    assert near_duplicate(draft("no digits here"), nearest) == nearest[2]
    assert near_duplicate(draft("anything"), []) is None


def test_an_update_unites_tags_raises_importance_and_keeps_a_source_unless_given():
    old = stored(1, "card", tags=("billing", "upi"), importance=2, source="chat")
    new = merged(old, draft("paid by card", tags=("upi", "card"), importance=0))
    assert new == MemoryDraft("paid by card", "paid by card", ("billing", "upi", "card"), 2, "chat")
    assert merged(old, draft("card", source="email")).source == "email"
