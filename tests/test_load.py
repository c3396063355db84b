"""A short load run in CI: concurrent ingest and recall, 0 errors, every acknowledged turn
stored (`python -m ireneo.benchmark.load` runs the long mode and reports the figures)."""

from __future__ import annotations

import json

from ireneo.benchmark.load import LoadConfig, LoadRun, save
from tests import pg_cluster  # a database of its own: the bench's user names are fixed


def test_a_short_load_run_has_no_errors_and_loses_nothing(tmp_path):
    report = LoadRun(LoadConfig(clients=10, users=5, seconds=12), tmp_path / "work").run()
    assert report.total_errors == 0, report.error_examples
    assert report.acked_turns_missing == 0
    assert report.operations["ingest"]["count"] > 0 and report.operations["recall"]["count"] > 0
    assert report.turns_acked >= report.operations["ingest"]["count"] // 2
    assert report.rss["peak_mb"] > 0
    assert 0 <= report.stolen <= 1  # the host's other guests' share, from Linux's /proc/stat

    out = tmp_path / "out"
    markdown = save(report, out).read_text()
    assert "| recall |" in markdown and "| ingest |" in markdown
    assert "given to the host's other guests in the run" in markdown
    assert json.loads((out / "latest.json").read_text())["total_errors"] == 0
    assert (out / "load.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_paced_load_run_starts_about_its_rate_spread_over_the_run(tmp_path):
    """With a rate, the clients start ~rate x seconds operations at random times (Poisson: 80
    expected here, sd ~9), not as many as the server answers back to back (hundreds)."""
    config = LoadConfig(clients=4, users=2, seconds=8, ingest_share=0.5, rate=10)
    report = LoadRun(config, tmp_path / "work").run()
    assert report.total_errors == 0, report.error_examples
    assert report.acked_turns_missing == 0
    started = sorted(s.at for s in report.samples)
    assert 45 <= len(started) <= 120, len(started)
    assert started[-1] < 8.0
    assert sum(at >= 6.0 for at in started) >= len(started) / 10  # spread, not bunched up
    assert "at 10 a second in all" in save(report, tmp_path / "out").read_text()


def test_a_run_on_a_reused_work_directory_posts_new_turns(tmp_path):
    """A second run in the same work directory posts conversations numbered after the first's:
    were they the first run's again, the store would add nothing for them."""
    config = LoadConfig(clients=3, users=2, seconds=4, ingest_share=1.0, client="raw")
    first = LoadRun(config, tmp_path / "work").run()
    second = LoadRun(config, tmp_path / "work").run()
    assert first.total_errors == second.total_errors == 0
    assert second.acked_turns_missing == 0
    assert first.turns_acked > 2 * config.users  # the first run posted in its timed run too
    lines = (tmp_path / "work" / "server.log").read_text().splitlines()
    posts = [json.loads(line) for line in lines if '"event": "ingest"' in line]
    timed = sum(sample.op == "ingest" for run in (first, second) for sample in run.samples)
    assert len(posts) == timed + 2 * config.users > 20  # with each user's untimed first post
    # every turn either run was answered 202 for is a turn the store added
    assert sum(post["added"] for post in posts) == first.turns_acked + second.turns_acked


def test_a_short_load_run_on_postgres_has_no_errors_and_loses_nothing(pg_database, tmp_path):
    """The same on PostgreSQL, the agents on the raw client (each recall one JSON-RPC post);
    every acknowledged turn is read back from the database."""
    config = LoadConfig(
        clients=6,
        users=4,
        seconds=10,
        database_url=pg_cluster.prepare(pg_database.superuser_url).app_url,
        client="raw",
    )
    report = LoadRun(config, tmp_path / "work").run()
    assert report.total_errors == 0, report.error_examples
    assert report.turns_acked > 0
    assert report.acked_turns_missing == 0
    assert report.operations["ingest"]["count"] > 0 and report.operations["recall"]["count"] > 0
