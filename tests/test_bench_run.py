"""`ireneo bench` end to end on a small history: every method answers, every file is written."""

import json
import os
import re

import pytest
from click.testing import CliRunner

from ireneo.benchmark import locomo, mcp
from ireneo.benchmark.generate import generate
from ireneo.cli import main

STAGES = [
    "indexing its {turns} turns (in a child)",
    "questions, every method",
    "nothing relevant, both ways",
    "latency, memory, time to searchable",
    "MCP recall through a real server",
]


def stages(result) -> list[str]:
    """The stages a run logged as they started, without their times."""
    return [line.split("] ", 1)[1] for line in result.stderr.splitlines() if line.startswith("[")]


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
    assert perf["query_embed_p50_ms"] > 0
    # asked through a real server and MCP client, every call answered
    assert perf["mcp_p50_ms"] > 0 and perf["mcp_unavailable"] == 0
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
    assert stages(result) == ["en 60: writing the history"] + [
        "en 60: " + stage.format(turns=360) for stage in STAGES
    ]


def test_bench_counts_nothing_relevant_both_ways(tmp_path):
    """The synthetic run asks what `--locomo` asks, through the tool: every answerable question
    in both forms, the content-free queries, the packaged off-topic sets; and tables it."""
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main,
        ["bench", "--sizes", "30", "--langs", "en", "--questions", "6", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    [run] = json.loads((out / "latest.json").read_text())["runs"]
    nothing = run["nothing"]
    assert nothing["answerable"] == 2 * 6 and nothing["k"] == locomo.K
    assert nothing["empty"] == len(locomo.EMPTY_QUERIES) and nothing["empty_with_hit"] == 0
    assert nothing["unavailable"] == 0
    for lang in locomo.OFFTOPIC_LANGS:
        assert nothing["offtopic"][lang] == len(locomo.offtopic_queries(lang))
        assert 0 <= nothing["offtopic_silent"][lang] <= nothing["offtopic"][lang]
    for form in ("long", "short"):
        assert 0.0 <= run["accuracy"]["ireneo"][form]["fewer@8"] <= 1.0
    text = (out / "latest.md").read_text()
    assert "## Nothing relevant, both ways (the tool's answer)" in text
    cut = f"{nothing['cut_short'] / 12:.1%} of 12"
    empty = f"0.0% of {len(locomo.EMPTY_QUERIES)}"
    english = f"{nothing['offtopic_silent']['en'] / nothing['offtopic']['en']:.1%}"
    assert f"| en | 30 | {cut} | {empty} | {english} of {nothing['offtopic']['en']} |" in text
    assert "| content-free with a hit | 0 | 0.0% met |" in text


def test_bench_measures_models_side_by_side(tmp_path):
    out = tmp_path / "results"
    models = ("minilm-l6-v2-q8", "e5-small-q8")
    result = CliRunner().invoke(
        main,
        ["bench", "--sizes", "30", "--langs", "en", "--questions", "6", "--out", str(out)]
        + ["--models", ",".join(models)],
    )
    assert result.exit_code == 0, result.output
    document = json.loads((out / "latest.json").read_text())
    assert document["models"] == list(models)
    runs = document["runs"]
    assert [(r["lang"], r["size"], r["model"]) for r in runs] == [("en", 30, m) for m in models]
    for run in runs:
        perf = run["perf"]
        assert perf["turns_per_s"] > 0 and perf["index_peak_rss_mb"] > 0
        # the child's own CPU time: some, and at most every core for the whole time
        assert 0 < perf["index_cpu_s"] <= os.cpu_count() * perf["index_s"]
        assert perf["turns_per_cpu_s"] == pytest.approx(180 / perf["index_cpu_s"])
        assert perf["query_embed_p50_ms"] > 0 and perf["warm_p50_ms"] > 0
        assert perf["mcp_p50_ms"] > 0 and perf["mcp_unavailable"] == 0
        assert run["accuracy"]["ireneo"]["short"]["strict@8"] >= 0.8
        assert run["nothing"]["answerable"] == 12 and run["nothing"]["empty_with_hit"] == 0
    # one history, written once, indexed by each model in turn
    assert stages(result) == ["en 30: writing the history"] + [
        f"en 30 · {model}: " + stage.format(turns=180) for model in models for stage in STAGES
    ]
    text = (out / "latest.md").read_text()
    assert "| en | 30 | e5-small-q8 | ireneo | short |" in text
    header = "| measure | target | minilm-l6-v2-q8 | e5-small-q8 | e5-small-q8 ÷ minilm-l6-v2-q8 |"
    assert header in text
    # each ratio is of the two figures measured in this run
    row = re.search(r"\| index, turns/s \| ≥ 400 at 10,000 \| (\d+) \| (\d+) \| ([\d.]+)× \|", text)
    assert row, text
    first, second = (r["perf"]["turns_per_s"] for r in runs)
    assert (int(row[1]), int(row[2])) == (round(first), round(second))
    assert row[3] == f"{second / first:.2f}"
    assert re.search(r"\| query embedding p50, ms \| ≤ 6 \| [\d.]+ (NOT )?met \|", text)
    assert (out / "models.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--models", "minilm-l6-v2-q8,minilm-l6-v2-q8"], "give distinct model names"),
        (["--models", "minilm-l6-v2-q8,"], "give distinct model names"),
        (["--models", "minilm-l6-v2-q8", "--model", "e5-small-q8"], "in place of --model"),
        (["--models", "minilm-l6-v2-q8,no-such-model"], "no-such-model"),
    ],
)
def test_bench_refuses_bad_models_before_any_work(tmp_path, args, message):
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main, ["bench", "--sizes", "30", "--langs", "en", "--out", str(out), *args]
    )
    assert result.exit_code != 0 and message in result.output
    assert not out.exists()


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


def test_mcp_stage_names_the_servers_last_words_when_it_cannot_start(tmp_path):
    """A server that cannot start fails the stage with its log's end (the run keeps its other
    figures and reports the stage as failed: run.run_model)."""
    home = tmp_path / "server-home"
    home.mkdir()
    (home / "users").write_text("a file where the users' folder should be")
    with pytest.raises(mcp.ServerFailed, match=r"ireneo serve exited .*File exists"):
        mcp.mcp_latency(home, generate(5, questions=2).questions)
