"""A benchmark document as a markdown table and PNG plots."""

from __future__ import annotations

from pathlib import Path

METHOD_ORDER = ("ireneo", "funes_rrf", "bm25", "dense")
WARM_TARGET_MS = 10  # warm recall p50 at 10,000 conversations (README, "The benchmark")
FUNES_RECALL_MS = 200  # a whole recall of the reference, funes, on 4 CPUs
PERF_COLUMNS = [
    ("index_s", "index s", "{:.1f}"),
    ("turns_per_s", "turns/s", "{:.0f}"),
    ("index_peak_rss_mb", "index peak MB", "{:.0f}"),
    ("warm_p50_ms", "warm p50 ms", "{:.1f}"),
    ("warm_p95_ms", "warm p95 ms", "{:.1f}"),
    ("warm_vs_reference", "warm ÷ reference fusion", "{:.2f}×"),
    ("cold_p50_ms", "cold p50 ms", "{:.0f}"),
    ("serve_rss_mb", "serve RSS MB", "{:.0f}"),
    ("new_keyword_ms", "new: keyword ms", "{:.0f}"),
    ("new_meaning_ms", "new: meaning ms", "{:.0f}"),
    ("disk_mb", "disk MB", "{:.1f}"),
]


def markdown(document: dict) -> str:
    runs = document["runs"]
    lines = [
        f"# ireneo bench, {document['started']}",
        "",
        f"Model {document.get('model', '?')}, reranker {document.get('rerank', 'none')}, "
        f"family {document['config']['family']}, seed {document['config'].get('seed', 0)}, "
        f"{document['config']['questions']} questions per size, "
        f"{document['machine']['cores']} cores. hit@k: the answer is in the returned text; "
        "strict@k: a returned turn is from the right conversation.",
        "",
        "## Accuracy",
        "",
        "| lang | size | method | form | hit@1 | hit@3 | hit@8 | strict@1 | strict@3 | strict@8 |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for method in METHOD_ORDER:
            for form in ("long", "short"):
                m = run["accuracy"][method][form]
                cells = " | ".join(
                    f"{m[key]:.0%}"
                    for key in ("hit@1", "hit@3", "hit@8", "strict@1", "strict@3", "strict@8")
                )
                lines.append(f"| {run['lang']} | {run['size']:,} | {method} | {form} | {cells} |")
    lines += [
        "",
        "## ireneo against the baselines (strict@3, both forms; ratio > 1: ireneo better)",
        "",
        "| lang | size | ireneo | vs funes_rrf | vs bm25 | vs dense |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        own = _both_forms(run, "ireneo")
        ratios = " | ".join(
            f"{own / max(_both_forms(run, b), 1e-9):.2f}×" for b in METHOD_ORDER[1:]
        )
        lines.append(f"| {run['lang']} | {run['size']:,} | {own:.1%} | {ratios} |")
    lines += [
        "",
        "## Cost",
        "",
        "| lang | size | " + " | ".join(h for _, h, _ in PERF_COLUMNS) + " |",
        "|---|---:|" + "---:|" * len(PERF_COLUMNS),
    ]
    for run in runs:
        cells = " | ".join(
            fmt.format(run["perf"].get(key, float("nan"))) for key, _, fmt in PERF_COLUMNS
        )
        lines.append(f"| {run['lang']} | {run['size']:,} | {cells} |")
    if any(run.get("stores") for run in runs):
        lines += _stores(runs)
    return "\n".join(lines) + "\n"


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


def _stores(runs: list[dict]) -> list[str]:
    lines = [
        "",
        "## Stores: embedded SQLite and PostgreSQL, same histories, same run",
        "",
        "| lang | size | store | " + " | ".join(h for _, h, _ in STORE_COLUMNS) + " |",
        "|---|---:|---|" + "---:|" * len(STORE_COLUMNS),
    ]
    for run in runs:
        for store, perf in run.get("stores", {}).items():
            cells = " | ".join(
                fmt.format(perf.get(key, float("nan"))) for key, _, fmt in STORE_COLUMNS
            )
            lines.append(f"| {run['lang']} | {run['size']:,} | {store} | {cells} |")
    return lines


def _both_forms(run: dict, method: str) -> float:
    forms = run["accuracy"][method]
    return (forms["long"]["strict@3"] + forms["short"]["strict@3"]) / 2


def plots(document: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = document["runs"]
    langs = sorted({r["lang"] for r in runs}, key=["en", "ru", "ko"].index)
    paths = []
    fig, axes = plt.subplots(len(langs), 2, figsize=(10, 3.2 * len(langs)), squeeze=False)
    for row, lang in enumerate(langs):
        mine = sorted((r for r in runs if r["lang"] == lang), key=lambda r: r["size"])
        sizes = [r["size"] for r in mine]
        for col, k in enumerate((3, 8)):
            ax = axes[row][col]
            for method in METHOD_ORDER:
                ax.plot(
                    sizes, [_both(r, method, f"strict@{k}") for r in mine], marker="o", label=method
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
        mine = sorted((r for r in runs if r["lang"] == lang), key=lambda r: r["size"])
        sizes = [r["size"] for r in mine]
        axes[0].plot(
            sizes, [r["perf"]["warm_p50_ms"] for r in mine], marker="o", label=f"{lang} warm p50"
        )
        axes[0].plot(
            sizes,
            [r["perf"]["warm_p95_ms"] for r in mine],
            marker="x",
            ls="--",
            label=f"{lang} warm p95",
        )
        axes[1].plot(
            sizes, [r["perf"]["cold_p50_ms"] for r in mine], marker="o", label=f"{lang} cold p50"
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
    return paths


def _stores_plot(runs: list[dict], path: Path, plt) -> Path:  # noqa: ANN001 - pyplot
    """The two stores side by side, by size: indexing speed, warm and fresh recall."""
    panels = [
        ("turns_per_s", "index, turns/s"),
        ("warm_p50_ms", "warm recall p50 (ms)"),
        ("cold_p50_ms", "fresh process recall p50 (ms)"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 3.5))
    with_stores = [run for run in runs if run.get("stores")]
    for lang in sorted({r["lang"] for r in with_stores}, key=["en", "ru", "ko"].index):
        mine = sorted((r for r in with_stores if r["lang"] == lang), key=lambda r: r["size"])
        for store in mine[0]["stores"]:
            for ax, (key, _) in zip(axes, panels, strict=True):
                ax.plot(
                    [r["size"] for r in mine],
                    [r["stores"][store][key] for r in mine],
                    marker="o",
                    label=f"{lang} {store}",
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
