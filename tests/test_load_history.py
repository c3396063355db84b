"""The load harness's recall-while-ingest mode: users start with a stored history, clients only
recall, posters only post; any marker of another user in an answer is an error."""

from __future__ import annotations

from ireneo.benchmark.load import LoadConfig, LoadRun, foreign_marks, history_text
from ireneo.benchmark.traffic import marker


def test_another_users_marker_in_an_answer_is_seen():
    own = f"{marker(3, 12, 4)} and {history_text(3, 7, 1)}"
    assert foreign_marks(own, 3) == []
    theirs = f"{own} {marker(4, 12, 4)} {history_text(11, 0, 0)}"
    assert foreign_marks(theirs, 3) == [marker(4, 12, 4), "BG-011-0"]


def test_recall_while_posters_ingest_over_a_stored_history(tmp_path):
    config = LoadConfig(
        clients=4, users=2, seconds=8, ingest_share=0.0, posters=2, conversations=30
    )
    report = LoadRun(config, tmp_path / "work").run()
    assert report.total_errors == 0, report.error_examples
    assert report.acked_turns_missing == 0
    assert report.operations["recall"]["count"] > 0 and report.operations["ingest"]["count"] > 0
    assert report.cpu_s["server"] > 0 and report.cpu_s["clients"] > 0
    homes = list((tmp_path / "work" / "home" / "users").iterdir())
    assert len(homes) == 2 and all((h / ".history-30").exists() for h in homes)
