"""`ireneo bench` end to end on a small history: every method answers, every file is written."""

import json

from click.testing import CliRunner

from ireneo.cli import main


def test_bench_writes_tables_json_and_plots(tmp_path):
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main, ["bench", "--sizes", "60", "--langs", "en", "--questions", "12", "--out", str(out)]
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
    assert "| en | 60 | ireneo | short |" in (out / "latest.md").read_text()
    assert (out / "accuracy.png").stat().st_size > 10_000 and (
        out / "latest.md"
    ).read_text() in result.output
    assert (out / "latency.png").stat().st_size > 10_000
