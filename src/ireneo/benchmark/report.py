"""A benchmark document as a markdown table and PNG plots. With several models in one run, every
table gets a model column, and the targets table compares each model with the first."""

from __future__ import annotations

from collections.abc import Callable
from math import nan
from pathlib import Path

METHOD_ORDER = ("ireneo", "funes_rrf", "bm25", "dense")
WARM_TARGET_MS = 10  # warm recall p50 at 10,000 conversations (README, "The benchmark")
FUNES_RECALL_MS = 200  # a whole recall of the reference, funes, on 4 CPUs
PERF_COLUMNS = [
    ("index_s", "index s", "{:.1f}"),
    ("turns_per_s", "turns/s", "{:.0f}"),
    ("index_peak_rss_mb", "index peak MB", "{:.0f}"),
    ("turns_per_cpu_s", "turns per CPU-s", "{:.0f}"),
    ("warm_p50_ms", "warm p50 ms", "{:.1f}"),
    ("warm_p95_ms", "warm p95 ms", "{:.1f}"),
    ("warm_vs_reference", "warm ÷ reference fusion", "{:.2f}×"),
    ("query_embed_p50_ms", "query embedding p50 ms", "{:.2f}"),
    ("mcp_p50_ms", "MCP recall p50 ms", "{:.1f}"),
    ("cold_p50_ms", "cold p50 ms", "{:.0f}"),
    ("serve_rss_mb", "serve RSS MB", "{:.0f}"),
    ("new_keyword_ms", "new: keyword ms", "{:.0f}"),
    ("new_meaning_ms", "new: meaning ms", "{:.0f}"),
    ("disk_mb", "disk MB", "{:.1f}"),
]


# Issue 26's targets: (perf key, label, format, at least (True) or at most, bound, the size of
# history it is set at (None: any)).
TARGETS = [
    ("turns_per_s", "index, turns/s", "{:.0f}", True, 400, 10_000),
    ("index_peak_rss_mb", "index peak RSS, MB", "{:.0f}", False, 600, 10_000),
    ("query_embed_p50_ms", "query embedding p50, ms", "{:.2f}", False, 6, None),
    ("warm_p50_ms", "warm recall p50, ms", "{:.1f}", False, 12, 10_000),
    ("mcp_p50_ms", "MCP recall p50, ms", "{:.1f}", False, 20, 10_000),
]
TARGET_OFFTOPIC = 0.90  # off-topic queries given no hit (locomo.TARGET_OFFTOPIC)
ASKED = 8  # the hits the accuracy stage asks for (run.KS's largest)


def _models(document: dict) -> list[str]:
    return document.get("models") or [document.get("model", "?")]


def _lead(run: dict, several: bool) -> str:
    """A row's first cells: language, size and, with several models, the model."""
    cells = f"| {run['lang']} | {run['size']:,} |"
    return cells + (f" {run.get('model', '?')} |" if several else "")


def markdown(document: dict) -> str:
    runs = document["runs"]
    models = _models(document)
    several = len(models) > 1
    head, rule = (
        ("| lang | size | model |", "|---|---:|---|")
        if several
        else ("| lang | size |", "|---|---:|")
    )
    lines = [
        f"# ireneo bench, {document['started']}",
        "",
        f"{'Models' if several else 'Model'} {', '.join(models)}"
        + (
            " (each history's memory chose its own by its language)"
            if document.get("chosen")
            else ""
        )
        + ", "
        f"reranker {document.get('rerank', 'none')}, "
        f"family {document['config']['family']}, seed {document['config'].get('seed', 0)}, "
        f"{document['config']['questions']} questions per size, "
        f"{document['machine']['cores']} cores. hit@k: the answer is in the returned text; "
        "strict@k: a returned turn is from the right conversation.",
        "",
        "## Accuracy",
        "",
        f"{head} method | form | hit@1 | hit@3 | hit@8 | strict@1 | strict@3 | strict@8 |",
        f"{rule}---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for method in METHOD_ORDER:
            for form in ("long", "short"):
                m = run["accuracy"][method][form]
                cells = " | ".join(
                    f"{m[key]:.0%}"
                    for key in ("hit@1", "hit@3", "hit@8", "strict@1", "strict@3", "strict@8")
                )
                lines.append(f"{_lead(run, several)} {method} | {form} | {cells} |")
    lines += [
        "",
        "## ireneo against the baselines (strict@3, both forms; ratio > 1: ireneo better)",
        "",
        f"{head} ireneo | vs funes_rrf | vs bm25 | vs dense |",
        f"{rule}---:|---:|---:|---:|",
    ]
    for run in runs:
        own = _both_forms(run, "ireneo")
        ratios = " | ".join(
            f"{own / max(_both_forms(run, b), 1e-9):.2f}×" for b in METHOD_ORDER[1:]
        )
        lines.append(f"{_lead(run, several)} {own:.1%} | {ratios} |")
    lines += [
        "",
        "## Cost",
        "",
        f"{head} " + " | ".join(h for _, h, _ in PERF_COLUMNS) + " |",
        rule + "---:|" * len(PERF_COLUMNS),
    ]
    for run in runs:
        cells = " | ".join(  # n/a: a stage not run (no MCP recall in a quick run)
            fmt.format(run["perf"][key]) if key in run["perf"] else "n/a"
            for key, _, fmt in PERF_COLUMNS
        )
        lines.append(f"{_lead(run, several)} {cells} |")
    if any(run.get("nothing") for run in runs):
        lines += _nothing(runs, several, head, rule)
    lines += _targets(runs, models)
    failed = [(run, stage, why) for run in runs for stage, why in run.get("failed", {}).items()]
    if failed:
        lines += ["", "## Stages that failed (their figures are n/a)", ""]
        lines += [
            f"- {run['lang']} {run['size']:,} {run.get('model', '')}: {why}"
            for run, _, why in failed
        ]
    if any(run.get("stores") for run in runs):
        lines += _stores(runs, several)
    return "\n".join(lines) + "\n"


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.1%} of {whole:,}" if whole else "n/a"


def _nothing(runs: list[dict], several: bool, head: str, rule: str) -> list[str]:
    """ "Nothing relevant" both ways, through the tool, as `ireneo bench --locomo` counts it."""
    counted = next(run["nothing"] for run in runs if run.get("nothing"))
    langs, tool_k, k = list(counted["offtopic"]), counted.get("k", "k"), ASKED
    lines = [
        "",
        "## Nothing relevant, both ways (the tool's answer)",
        "",
        f"Answerable: every question in both forms, asked for the tool's {tool_k} hits (target: "
        f"none cut short; the last column: ireneo asked for {k}). Content-free: empty, punctuation, stop words only "
        "(target: no hit). Off-topic: the packaged questions about subjects absent from every "
        f"history (target: ≥ {TARGET_OFFTOPIC:.0%} with no hit).",
        "",
        f"{head} cut short | content-free with a hit | "
        + " | ".join(f"off-topic ({lang}) with no hit" for lang in langs)
        + f" | fewer than {k} of {k} |",
        rule + "---:|---:|" + "---:|" * len(langs) + "---:|",
    ]
    for run in runs:
        n = run.get("nothing")
        if not n:
            continue
        forms = run["accuracy"]["ireneo"]
        fewer = (forms["long"].get(f"fewer@{k}", nan) + forms["short"].get(f"fewer@{k}", nan)) / 2
        cells = [
            _share(n["cut_short"], n["answerable"]),
            _share(n["empty_with_hit"], n["empty"]),
            *(_share(n["offtopic_silent"].get(lang, 0), n["offtopic"][lang]) for lang in langs),
            f"{fewer:.1%}",
        ]
        lines.append(f"{_lead(run, several)} " + " | ".join(cells) + " |")
    return lines


# One row of the targets table: label, target as written, the figure of a run, its format, and
# whether the figure meets the target (None: no target, or not at this size).
Row = tuple[str, str, Callable[[dict], float | None], str, Callable[[float], bool] | None]


def _targets(runs: list[dict], models: list[str]) -> list[str]:
    """Issue 26's targets beside each model's figures, one table per history; with several
    models, each against the first, measured in the same run."""
    first, others = models[0], models[1:]
    lines = [
        "",
        "## The targets, model by model",
        "",
        "A target set at 10,000 conversations is marked only at that size."
        + (f" Ratios: a model's figure ÷ {first}'s, same history, same run." if others else ""),
    ]
    for lang, size in dict.fromkeys((run["lang"], run["size"]) for run in runs):
        mine = {r.get("model", first): r for r in runs if (r["lang"], r["size"]) == (lang, size)}
        compared = [m for m in others if m in mine and first in mine]
        lines += [
            "",
            f"{lang}, {size:,} conversations:",
            "",
            "| measure | target | "
            + " | ".join([*mine, *(f"{m} ÷ {first}" for m in compared)])
            + " |",
            "|---|---|" + "---:|" * (len(mine) + len(compared)),
        ]
        for label, target, figure, fmt, met in _target_rows(size, list(mine.values())):
            values = {m: figure(run) for m, run in mine.items()}
            cells = [_cell(v, fmt, met) for v in values.values()]
            for m in compared:
                v, base = values[m], values[first]
                cells.append(f"{v / base:.2f}×" if _number(v) and _number(base) and base else "n/a")
            lines.append(f"| {label} | {target} | " + " | ".join(cells) + " |")
    return lines


def _target_rows(size: int, runs: list[dict]) -> list[Row]:
    rows: list[Row] = []
    for key, label, fmt, at_least, bound, at in TARGETS:
        target = ("≥ " if at_least else "≤ ") + f"{bound:g}" + (f" at {at:,}" if at else "")
        met = None
        if at is None or at == size:
            met = (lambda v, b=bound: v >= b) if at_least else (lambda v, b=bound: v <= b)
        rows.append((label, target, lambda run, key=key: run["perf"].get(key), fmt, met))
    rows.insert(
        1,
        (
            "index, turns per CPU-second",
            "",
            lambda run: run["perf"].get("turns_per_cpu_s"),
            "{:.0f}",
            None,
        ),
    )
    rows += [
        ("strict@3, both forms", "", lambda run: _both(run, "ireneo", "strict@3"), "{:.1%}", None),
        ("hit@8, both forms", "", lambda run: _both(run, "ireneo", "hit@8"), "{:.1%}", None),
    ]
    if not all(run.get("nothing") for run in runs):
        return rows
    none = lambda v: v == 0  # noqa: E731
    rows += [
        (
            "answerable cut short",
            "0",
            lambda run: _part(run, "cut_short", "answerable"),
            "{:.1%}",
            none,
        ),
        (
            "content-free with a hit",
            "0",
            lambda run: _part(run, "empty_with_hit", "empty"),
            "{:.1%}",
            none,
        ),
    ]
    for lang in runs[0]["nothing"]["offtopic"]:
        rows.append(
            (
                f"off-topic ({lang}) with no hit",
                f"≥ {TARGET_OFFTOPIC:.0%}",
                lambda run, lang=lang: _offtopic(run, lang),
                "{:.1%}",
                lambda v: v >= TARGET_OFFTOPIC,
            )
        )
    return rows


def _number(value: float | None) -> bool:
    return value is not None and value == value  # NaN: not measured


def _cell(value: float | None, fmt: str, met: Callable[[float], bool] | None) -> str:
    if not _number(value):  # not measured: no MCP stage in a quick run
        return "n/a"
    mark = "" if met is None else (" met" if met(value) else " NOT met")
    return fmt.format(value) + mark


def _part(run: dict, part: str, whole: str) -> float | None:
    n = run["nothing"]
    return n[part] / n[whole] if n[whole] else None


def _offtopic(run: dict, lang: str) -> float | None:
    n = run["nothing"]
    asked = n["offtopic"].get(lang, 0)
    return n["offtopic_silent"].get(lang, 0) / asked if asked else None


STORE_COLUMNS = [
    ("turns_per_s", "index turns/s", "{:.0f}"),
    ("warm_p50_ms", "warm p50 ms", "{:.1f}"),
    ("warm_p95_ms", "warm p95 ms", "{:.1f}"),
    ("cold_p50_ms", "cold p50 ms", "{:.0f}"),
    ("new_keyword_ms", "new: keyword ms", "{:.0f}"),
    ("disk_mb", "disk MB", "{:.1f}"),
    ("strict@3", "ireneo strict@3", "{:.1%}"),
    ("hit@3", "ireneo hit@3", "{:.1%}"),
]


def _stores(runs: list[dict], several: bool = False) -> list[str]:
    head = "| lang | size | model | store | " if several else "| lang | size | store | "
    lines = [
        "",
        "## Stores: embedded SQLite and PostgreSQL, same histories, same run",
        "",
        head + " | ".join(h for _, h, _ in STORE_COLUMNS) + " |",
        ("|---|---:|---|---|" if several else "|---|---:|---|") + "---:|" * len(STORE_COLUMNS),
    ]
    for run in runs:
        for store, perf in run.get("stores", {}).items():
            cells = " | ".join(
                fmt.format(perf.get(key, float("nan"))) for key, _, fmt in STORE_COLUMNS
            )
            lines.append(f"{_lead(run, several)} {store} | {cells} |")
    return lines


def _both_forms(run: dict, method: str) -> float:
    forms = run["accuracy"][method]
    return (forms["long"]["strict@3"] + forms["short"]["strict@3"]) / 2


def plots(document: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = document["runs"]
    models = _models(document)
    several = len(models) > 1
    langs = sorted({r["lang"] for r in runs}, key=["en", "ru", "ko"].index)
    paths = []
    fig, axes = plt.subplots(len(langs), 2, figsize=(10, 3.2 * len(langs)), squeeze=False)
    for row, lang in enumerate(langs):
        for col, k in enumerate((3, 8)):
            ax = axes[row][col]
            for number, model in enumerate(models):
                mine = _series(runs, lang, model if several else None)
                if not mine:  # a language its memory gave another model
                    continue
                sizes = [r["size"] for r in mine]
                for colour, method in enumerate(METHOD_ORDER):
                    ax.plot(
                        sizes,
                        [_both(r, method, f"strict@{k}") for r in mine],
                        marker="o",
                        color=f"C{colour}",
                        ls=("-", "--", ":", "-.")[number % 4],
                        label=f"{method} · {model}" if several else method,
                    )
            ax.set(
                title=f"{lang}: strict hit@{k}",
                xscale="log",
                ylim=(0, 1.02),
                xlabel="conversations",
            )
            ax.grid(alpha=0.3)
    axes[0][0].legend(loc="lower left")
    fig.tight_layout()
    paths.append(out / "accuracy.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for lang in langs:
        for model in models:
            mine = _series(runs, lang, model if several else None)
            if not mine:
                continue
            sizes = [r["size"] for r in mine]
            name = f"{lang} {model}" if several else lang
            axes[0].plot(
                sizes,
                [r["perf"]["warm_p50_ms"] for r in mine],
                marker="o",
                label=f"{name} warm p50",
            )
            axes[0].plot(
                sizes,
                [r["perf"]["warm_p95_ms"] for r in mine],
                marker="x",
                ls="--",
                label=f"{name} warm p95",
            )
            axes[1].plot(
                sizes,
                [r["perf"]["cold_p50_ms"] for r in mine],
                marker="o",
                label=f"{name} cold p50",
            )
    axes[0].axhline(WARM_TARGET_MS, color="grey", lw=0.8, ls=":", label="target p50")
    axes[1].axhline(FUNES_RECALL_MS, color="grey", lw=0.8, ls=":", label="funes (000 seed)")
    axes[0].set(title="recall latency, in process (ms)", xscale="log", xlabel="conversations")
    axes[1].set(title="recall latency, fresh process (ms)", xscale="log", xlabel="conversations")
    for ax in axes:
        ax.set_ylim(bottom=0)  # from zero: a few milliseconds must not look like a cliff
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "latency.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    if any(run.get("stores") for run in runs):
        paths.append(_stores_plot(runs, out / "stores.png", plt))
    if several:
        paths.append(_models_plot(runs, models, out / "models.png", plt))
    return paths


def _series(runs: list[dict], lang: str, model: str | None) -> list[dict]:
    """A language's runs by size, of one model (None: every run)."""
    mine = (r for r in runs if r["lang"] == lang and model in (None, r.get("model")))
    return sorted(mine, key=lambda r: r["size"])


def _models_plot(runs: list[dict], models: list[str], path: Path, plt) -> Path:  # noqa: ANN001
    """Each model's figure beside the others' for each history, with issue 26's targets."""
    panels = [(key, label, bound) for key, label, _, _, bound, _ in TARGETS]
    panels.append(("strict@3", "strict@3, both forms", None))
    histories = list(dict.fromkeys((run["lang"], run["size"]) for run in runs))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.6))
    width = 0.8 / len(models)
    for ax, (key, label, bound) in zip(axes, panels, strict=True):
        for number, model in enumerate(models):
            values = []
            for lang, size in histories:
                run = next(
                    (
                        r
                        for r in runs
                        if (r["lang"], r["size"], r.get("model")) == (lang, size, model)
                    ),
                    None,
                )
                value = None if run is None else _figure(run, key)
                values.append(value if _number(value) else 0.0)
            ax.bar(
                [x + (number - (len(models) - 1) / 2) * width for x in range(len(histories))],
                values,
                width,
                label=model,
            )
        if bound is not None:
            ax.axhline(bound, color="grey", lw=0.8, ls=":", label="target")
        ax.set_xticks(range(len(histories)), [f"{lang} {size:,}" for lang, size in histories])
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _figure(run: dict, key: str) -> float | None:
    return _both(run, "ireneo", key) if "@" in key else run["perf"].get(key)


def _stores_plot(runs: list[dict], path: Path, plt) -> Path:  # noqa: ANN001 - pyplot
    """The two stores side by side, by size: indexing speed, warm and fresh recall."""
    panels = [
        ("turns_per_s", "index, turns/s"),
        ("warm_p50_ms", "warm recall p50 (ms)"),
        ("cold_p50_ms", "fresh process recall p50 (ms)"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 3.5))
    with_stores = [run for run in runs if run.get("stores")]
    models = list(dict.fromkeys(r.get("model") for r in with_stores))
    several = len(models) > 1
    for lang in sorted({r["lang"] for r in with_stores}, key=["en", "ru", "ko"].index):
        for model in models:
            mine = _series(with_stores, lang, model if several else None)
            if not mine:
                continue
            for store in mine[0]["stores"]:
                for ax, (key, _) in zip(axes, panels, strict=True):
                    ax.plot(
                        [r["size"] for r in mine],
                        [r["stores"][store][key] for r in mine],
                        marker="o",
                        label=f"{lang} {model} {store}" if several else f"{lang} {store}",
                    )
    for ax, (_, title) in zip(axes, panels, strict=True):
        ax.set(title=title, xscale="log", xlabel="conversations")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _both(run: dict, method: str, metric: str) -> float:
    forms = run["accuracy"][method]
    return (forms["long"][metric] + forms["short"][metric]) / 2
