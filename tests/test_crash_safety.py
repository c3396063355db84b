"""kill -9 during ingest and indexing, a few times (bench/crash.py runs the long mode)."""

from __future__ import annotations

from bench.crash import CrashConfig, CrashRun

from tests import pg_cluster  # a database of its own: the bench's user names are fixed


def test_nothing_acknowledged_is_lost_or_corrupt_after_kill_9(tmp_path):
    config = CrashConfig(
        kills=3, users=3, writers=4, max_up=1.5, recall_sample=15, meaning_sample=15
    )
    report = CrashRun(config, tmp_path, log=lambda line: None).run()
    assert report.kills == 3
    assert report.turns_acked > 0 and report.memories > 0
    assert report.kills_with_posts_in_flight > 0
    assert report.ok, report.to_dict()


def test_nothing_acknowledged_is_lost_on_postgres_after_kill_9(pg_database, tmp_path):
    """The same with the memories in PostgreSQL (no integrity_check there: see bench/crash.py)."""
    config = CrashConfig(
        kills=2,
        users=2,
        writers=3,
        max_up=1.5,
        recall_sample=8,
        meaning_sample=8,
        database_url=pg_cluster.prepare(pg_database.superuser_url).app_url,
    )
    report = CrashRun(config, tmp_path, log=lambda line: None).run()
    assert report.kills == 2
    assert report.turns_acked > 0 and report.memories == 2
    assert report.meaning_checked > 0
    assert report.ok, report.to_dict()
