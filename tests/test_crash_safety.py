"""kill -9 during ingest and indexing, a few times (bench/crash.py runs the long mode)."""

from __future__ import annotations

from ireneo.bench.crash import CrashConfig, CrashRun


def test_nothing_acknowledged_is_lost_or_corrupt_after_kill_9(tmp_path):
    config = CrashConfig(
        kills=3, users=3, writers=4, max_up=1.5, recall_sample=15, meaning_sample=15
    )
    report = CrashRun(config, tmp_path, log=lambda line: None).run()
    assert report.kills == 3
    assert report.turns_acked > 0 and report.memories > 0
    assert report.kills_with_posts_in_flight > 0
    assert report.ok, report.to_dict()
