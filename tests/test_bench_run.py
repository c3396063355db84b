"""`ireneo bench` end to end on a small history: every method answers, every file is written."""

import json

from click.testing import CliRunner

from ireneo.cli import main


def test_bench_writes_tables_json_and_plots(tmp_path):
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main,
        ["bench", "--sizes", "60", "--langs", "en", "--questions", "12", "--seed", "5"]
        + ["--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    document = json.loads((out / "latest.json").read_text())
    [run] = document["runs"]
    assert (run["lang"], run["size"]) == ("en", 60)
    assert set(run["accuracy"]) == {"ireneo", "bm25", "dense", "funes_rrf"}
    for forms in run["accuracy"].values():
        for metrics in forms.values():
            assert all(0.0 <= value <= 1.0 for value in metrics.values())
            assert metrics["strict@1"] <= metrics["strict@3"] <= metrics["strict@8"]
    assert run["accuracy"]["ireneo"]["short"]["strict@8"] >= 0.9
    perf = run["perf"]
    assert perf["turns_per_s"] > 0 and perf["warm_p50_ms"] > 0 and perf["serve_rss_mb"] > 0
    assert perf["new_found_by_meaning"] == 1.0 and perf["new_keyword_ms"] > 0
    # timed against the reference's fusion, question by question in the same process
    assert perf["reference_p50_ms"] > 0 and perf["warm_vs_reference"] > 0
    assert document["config"]["seed"] == 5
    assert "family A, seed 5," in (out / "latest.md").read_text()
    assert "| en | 60 | ireneo | short |" in (out / "latest.md").read_text()
    assert "warm ÷ reference fusion" in (out / "latest.md").read_text()
    assert (out / "accuracy.png").stat().st_size > 10_000 and (
        out / "latest.md"
    ).read_text() in result.output
    assert (out / "latency.png").stat().st_size > 10_000
    assert not (out / "stores.png").exists()  # one store: nothing to compare
    # a log shows each stage as it starts, with the time since the run began
    stages = [line.split("] ", 1)[1] for line in result.stderr.splitlines() if line.startswith("[")]
    assert stages == [
        "en 60: writing the history",
        "en 60: indexing its 360 turns (in a child)",
        "en 60: questions, every method",
        "en 60: latency, memory, time to searchable",
    ]


def test_bench_compares_the_two_stores_in_one_run(tmp_path, pg_database):
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main,
        ["bench", "--sizes", "30", "--langs", "en", "--questions", "6", "--out", str(out)]
        + ["--database-url", pg_database.app_url],
    )
    assert result.exit_code == 0, result.output
    [run] = json.loads((out / "latest.json").read_text())["runs"]
    assert set(run["stores"]) == {"sqlite", "postgresql"}
    for perf in run["stores"].values():
        assert perf["turns_per_s"] > 0 and perf["warm_p50_ms"] > 0 and perf["cold_p50_ms"] > 0
        assert 0.0 <= perf["strict@3"] <= 1.0
        assert perf["new_found_by_meaning"] == 1.0
    # the same history, the same search: the same answers
    assert run["stores"]["postgresql"]["strict@3"] == run["stores"]["sqlite"]["strict@3"]
    assert "| en | 30 | postgresql |" in (out / "latest.md").read_text()
    assert (out / "stores.png").stat().st_size > 10_000
