"""The server's expiry pass with real memories: it opens only the ones with something to expire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from ireneo.config import MemoryPolicy
from ireneo.memories import ExplicitMemories
from ireneo.memory import Memory
from ireneo.server.expiry import MemoryExpiry
from ireneo.server.memories import OpenMemories, user_key
from ireneo.store.sqlite import expirable_in

THEN = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
NOW = THEN + timedelta(days=40)


THINGS = ["the spare key is under the blue pot", "the cat is called Miso", "Tuesday is gym day"]


def saved(home, importance: str, when: datetime, thing: int = 0) -> None:
    with Memory(home) as memory:
        ExplicitMemories(memory, now=lambda: when).store(THINGS[thing], importance=importance)


def test_expirable_in_sees_only_old_low_importance_memories(tmp_path):
    home = tmp_path / "m"
    assert not expirable_in(home, NOW)  # no memory file
    saved(home, "high", THEN, 0)
    saved(home, "low", NOW, 1)
    assert not expirable_in(home, NOW - timedelta(days=30))
    saved(home, "low", THEN, 2)  # old and low: expires
    assert expirable_in(home, NOW - timedelta(days=30))


def test_a_pass_opens_only_the_memories_with_something_to_expire(tmp_path):
    users = tmp_path / "users"
    keys = [user_key(f"user-{n}") for n in range(12)]
    for n, key in enumerate(keys):
        # one old low memory in every fourth user; recent or important ones elsewhere
        saved(users / key, "low" if n % 4 == 0 else "high", THEN if n % 2 == 0 else NOW)
    registry = OpenMemories(users, capacity=64)
    expiry = MemoryExpiry(registry, MemoryPolicy(low_max_age_days=30), lambda: NOW, 3600)
    try:
        assert expiry.run_once() == 3
    finally:
        registry.close_all()
    assert registry.opened == 3
    assert not any(expirable_in(users / key, NOW - timedelta(days=30)) for key in keys)


def test_a_pass_with_expiry_off_opens_nothing(tmp_path):
    users = tmp_path / "users"
    saved(users / user_key("a"), "low", THEN)
    registry = OpenMemories(users, capacity=64)
    expiry = MemoryExpiry(registry, MemoryPolicy(low_max_age_days=0), lambda: NOW, 3600)
    assert expiry.run_once() == 0 and registry.opened == 0


def test_a_pass_on_postgres_opens_only_the_memories_with_something_to_expire(pg_database):
    """The users to expire are asked in their own row-level-security scope, not opened."""
    from ireneo.store.postgres import expirable, open_pool
    from tests import pg_cluster

    database = pg_cluster.prepare(pg_database.superuser_url)  # no other test's users
    pool = open_pool(database.app_url, max_size=4)
    try:
        keys = [user_key(f"user-{n}") for n in range(12)]
        for n, key in enumerate(keys):
            with Memory(database=pool, user=key) as memory:
                when = THEN if n % 2 == 0 else NOW
                ExplicitMemories(memory, now=lambda when=when: when).store(
                    THINGS[0], importance="low" if n % 4 == 0 else "high"
                )
        cutoff = NOW - timedelta(days=30)
        assert expirable(pool, keys, cutoff) == [keys[0], keys[4], keys[8]]
        registry = OpenMemories(Path("unused"), capacity=64, database=pool)
        expiry = MemoryExpiry(registry, MemoryPolicy(low_max_age_days=30), lambda: NOW, 3600)
        try:
            assert expiry.run_once() == 3
        finally:
            registry.close_all()
        assert registry.opened == 3
        assert expirable(pool, keys, cutoff) == []
    finally:
        pool.close()
