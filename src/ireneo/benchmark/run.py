"""`ireneo bench`: accuracy and cost of recall on synthetic histories, against baselines.

For each language and size: generate a history, then for each model asked (`models`, side by
side on the same history; else `model`): index it in a child process (time, peak RSS), ask every
question in its long and short form through ireneo and three baselines built on the same store
(BM25 only, dense only, and funes' fusion: BM25 top-30 + dense top-30, RRF k=60), measure
"nothing relevant" both ways through the tool (`benchmark.locomo`'s measure), then warm latency,
query embedding and serving RSS in a fresh child, MCP recall through a real server (not with
`quick`), cold latency as whole `ireneo recall` processes, and how fast a new conversation
becomes searchable. Results go to `bench/results/` as JSON, a markdown table and PNG plots.
Ratios against the baselines, and between models, come from the same run.

With a PostgreSQL `database_url`, each history is also stored there (as a user of its own) and
measured the same way (index throughput, ireneo's accuracy, warm and cold latency), so the two
stores are compared in one run.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from ireneo import search
from ireneo.analyze import query_terms
from ireneo.benchmark import mcp
from ireneo.benchmark.generate import (
    History,
    Question,
    generate,
    write_funes_jsonl,
    write_questions,
)
from ireneo.config import Settings
from ireneo.embed import DEFAULT_MODEL, load_embedder
from ireneo.embed.choose import MULTILINGUAL_MODEL
from ireneo.errors import UnknownModel
from ireneo.memory import Memory
from ireneo.model import Hit
from ireneo.render import render_hit
from ireneo.store import Filters, TermStats

KS = (1, 3, 8)
BASELINE_DEPTH = 30


@dataclass
class Config:
    sizes: tuple[int, ...] = (1000, 3000, 10000)
    langs: tuple[str, ...] = ("en", "ru", "ko")
    family: str = "A"
    questions: int = 100
    cold_samples: int = 5
    seed: int = 0
    model: str | None = None
    # several models, each measured on the same histories in this run ("model" is then unused)
    models: tuple[str, ...] = ()
    out: Path = Path("bench/results")
    database_url: str | None = None  # also measure the PostgreSQL store (the app role's URL)
    mcp: bool = True  # MCP recall through a real `ireneo serve` (a server start per memory)

    @classmethod
    def quick(cls, **overrides) -> Config:
        return cls(
            **{
                "sizes": (1000,),
                "langs": ("en",),
                "questions": 50,
                "cold_samples": 3,
                "mcp": False,
                **overrides,
            }
        )

    def chosen_models(self) -> tuple[str | None, ...]:
        """The models measured, in order (the first is the one the others are compared with);
        None: each memory's own, chosen by the language of its history (ireneo.embed.choose)."""
        return self.models or (self.model,)


@dataclass
class Run:
    lang: str
    size: int
    model: str = DEFAULT_MODEL
    accuracy: dict[str, dict[str, dict[str, float]]] = field(
        default_factory=dict
    )  # method→form→metric
    perf: dict[str, float] = field(default_factory=dict)
    stores: dict[str, dict[str, float]] = field(default_factory=dict)  # store→metric
    nothing: dict = field(default_factory=dict)  # locomo.Nothing's counts, in this memory
    failed: dict[str, str] = field(default_factory=dict)  # stage → why, for a stage that failed


# -- the methods compared, all on the same store -------------------------------------------------


def method_ireneo(memory: Memory, query: str, k: int) -> list[Hit]:
    return memory.recall(query, k=k)


def method_bm25(memory: Memory, query: str, k: int) -> list[Hit]:
    """Okapi BM25 over all the query's terms, best passage per turn."""
    return _turn_hits(memory, _bm25_ranking(memory, query, search.CANDIDATES), k)


def method_dense(memory: Memory, query: str, k: int) -> list[Hit]:
    vector = memory.embedder.embed_query(query)
    return _turn_hits(memory, memory.store.dense_search(vector, search.CANDIDATES, Filters()), k)


def method_funes_rrf(memory: Memory, query: str, k: int) -> list[Hit]:
    """The reference's fusion: reciprocal rank fusion of the two top-30 lists, k=60, equal weights."""
    lexical = _bm25_ranking(memory, query, BASELINE_DEPTH)
    dense = memory.store.dense_search(memory.embedder.embed_query(query), BASELINE_DEPTH, Filters())
    scores: dict[int, float] = {}
    for ranking in (lexical, dense):
        for position, (pid, _) in enumerate(ranking):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (60 + position + 1)
    return _turn_hits(memory, list(scores.items()), k)


def _bm25_ranking(memory: Memory, query: str, depth: int) -> list[tuple[int, float]]:
    """The `depth` passages BM25 ranks best for all the query's terms, `(passage_id, score)`,
    best first: the score is the rank's (1, 1/2, 1/3...), which is all a baseline uses."""
    words = query_terms(query, hangul=memory.hangul)
    layout = memory.store.layout()
    stats = memory.store.term_stats(words) if words else TermStats(0, 0.0, {})
    found = search.keyword_candidates(layout, stats, words, depth, Filters())
    return [(pid, 1 / rank) for rank, pid in enumerate(layout.ids[found].tolist(), start=1)]


def _turn_hits(memory: Memory, passage_scores: list[tuple[int, float]], k: int) -> list[Hit]:
    """A baseline's passage ranking as hits: each turn scored by its best passage."""
    where = memory.store.layout().turns_of(pid for pid, _ in passage_scores)
    turns: dict[tuple[str, int], float] = {}
    for pid, score in passage_scores:
        key = where[pid]
        turns[key] = max(score, turns.get(key, score))
    return search.build_hits(
        memory.store, {key: search.Score(v, v) for key, v in turns.items()}, k, radius=1
    )


METHODS: dict[str, Callable[[Memory, str, int], list[Hit]]] = {
    "ireneo": method_ireneo,
    "bm25": method_bm25,
    "dense": method_dense,
    "funes_rrf": method_funes_rrf,
}


# -- accuracy -------------------------------------------------------------------------------------


def first_rank(hits: list[Hit], question: Question) -> tuple[int | None, int | None]:
    """1-based rank of the first hit whose shown text holds the answer, and of the first hit from
    the right conversation (strict)."""
    answer = strict = None
    for position, hit in enumerate(hits, 1):
        if answer is None and question.answer in render_hit(position, hit):
            answer = position
        if strict is None and hit.session_id == question.session_id:
            strict = position
    return answer, strict


def accuracy(
    memory: Memory,
    questions: list[Question],
    progress: Callable[[], None],
    methods: tuple[str, ...] | None = None,
) -> dict:
    """hit@k (answer shown) and strict@k (right conversation) per method and question form, and
    `fewer@8`: the share of questions given fewer hits than the 8 asked for."""
    ranks: dict[str, dict[str, list[tuple[int | None, int | None]]]] = {}
    counts: dict[str, dict[str, list[int]]] = {}
    chosen = {name: METHODS[name] for name in methods or METHODS}
    for question in questions:
        for form in ("long", "short"):
            query = getattr(question, form)
            for name, method in chosen.items():
                hits = method(memory, query, max(KS))
                ranks.setdefault(name, {}).setdefault(form, []).append(first_rank(hits, question))
                counts.setdefault(name, {}).setdefault(form, []).append(len(hits))
        progress()
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name, forms in ranks.items():
        for form, pairs in forms.items():
            metrics = {}
            for k in KS:
                metrics[f"hit@{k}"] = sum(a is not None and a <= k for a, _ in pairs) / len(pairs)
                metrics[f"strict@{k}"] = sum(s is not None and s <= k for _, s in pairs) / len(
                    pairs
                )
            given = counts[name][form]
            metrics[f"fewer@{max(KS)}"] = sum(n < max(KS) for n in given) / len(given)
            table.setdefault(name, {})[form] = metrics
    return table


def nothing_relevant(memory: Memory, questions: list[Question]) -> dict:
    """ "Nothing relevant" both ways, as `ireneo bench --locomo` measures it (its functions, its
    queries): each question in both forms asked for the tool's k hits (cut short: fewer), and
    the content-free and packaged off-topic queries through the tool itself."""
    from ireneo.benchmark import locomo  # it imports this module: imported when first needed

    hits = [
        len(memory.recall(getattr(question, form), k=locomo.K))
        for question in questions
        for form in ("long", "short")
    ]
    counts = locomo.Nothing()
    locomo.nothing_relevant(memory, [], hits, counts)
    return {**asdict(counts), "k": locomo.K}


def misses(memory: Memory, questions: list[Question], k: int = 3) -> list[dict]:
    """The questions ireneo does not answer in its top k (strict), for reading, not scoring."""
    out = []
    for question in questions:
        for form in ("long", "short"):
            hits = memory.recall(getattr(question, form), k=k)
            if first_rank(hits, question)[1] is None:
                out.append(
                    {
                        "query": getattr(question, form),
                        "want": question.session_id,
                        "answer": question.answer,
                        "got": [h.text[:160] for h in hits],
                    }
                )
    return out


# -- cost -----------------------------------------------------------------------------------------------


class Child(NamedTuple):
    seconds: float  # wall time
    peak_mb: float  # its own peak RSS
    cpu_s: float  # its CPU time, user and system, every thread: what a shared machine's load
    # inflates less than the wall time
    out: str  # its stdout


def child(
    module: str, args: list[str], env: dict[str, str] | None = None
) -> tuple[float, float, str]:
    """Run `python -m module args...` in a child; returns (seconds, its own peak RSS in MB,
    stdout). The peak is the child's VmHWM, which it writes as it exits (`_OWN_PEAK`): wait4's
    ru_maxrss would give it the peak of the bench it was forked from (docs/benchmark.md)."""
    done = child_run(module, args, env)
    return done.seconds, done.peak_mb, done.out


def child_run(module: str, args: list[str], env: dict[str, str] | None = None) -> Child:
    """`child`, with the child's CPU time (from wait4, which counts it right)."""
    with (
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
        tempfile.NamedTemporaryFile("r") as peak,
    ):
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", _OWN_PEAK, peak.name, module, *args],
            stdout=out,
            stderr=err,
            env=env,
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        out.seek(0), err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{module} {' '.join(args)} failed: {err.read().strip()[-2000:]}")
        cpu = usage.ru_utime + usage.ru_stime
        return Child(seconds, int(peak.read()) / 1024, cpu, out.read())


# Runs a module as `python -m` does and writes the process's peak RSS (kB) to a file at exit.
_OWN_PEAK = """
import atexit, runpy, sys
path = sys.argv.pop(1)
def record():
    with open("/proc/self/status") as status, open(path, "w") as out:
        out.write(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
atexit.register(record)
runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
"""


def index_cost(
    home: Path | None, source: Path, model: str | None, env: dict[str, str] | None = None
) -> dict[str, float]:
    """Index in a child; `home` None: the memory IRENEO_DATABASE_URL and IRENEO_USER in `env`
    name."""
    args = ["index", *_home_args(home), "--json", str(source)]
    if model:
        args += ["--model", model]
    done = child_run("ireneo.cli", args, env)
    turns = json.loads(done.out)["turns_added"]
    return {
        "index_s": done.seconds,
        "turns_per_s": turns / done.seconds,
        "index_peak_rss_mb": done.peak_mb,
        "index_cpu_s": done.cpu_s,
        "turns_per_cpu_s": turns / done.cpu_s,
    }


def _home_args(home: Path | None) -> list[str]:
    return ["--home", str(home)] if home is not None else []


def cold_latency(
    home: Path | None, questions: list[Question], samples: int, env: dict[str, str] | None = None
) -> float:
    times = []
    for question in questions[:samples]:
        seconds, _, _ = child(
            "ireneo.cli",
            ["recall", *_home_args(home), "--json", "-k", "8", "--", question.short],
            env,
        )
        times.append(seconds * 1000)
    return statistics.median(times)


# -- the run --------------------------------------------------------------------------------------------


# Starts a stage of the run, `label` with its number of steps (None: not counted); returns what
# advances it by one step. The CLI shows it (cli._bench_stages).
Stage = Callable[[str, int | None], Callable[[], None]]


def _unseen(label: str, steps: int | None) -> Callable[[], None]:
    return lambda: None


def run(config: Config, stage: Stage = _unseen) -> list[Run]:
    # The bench is a door, as the CLI is: its memories take the environment's settings, as the
    # `ireneo index` and `ireneo recall` children it times do.
    settings = Settings.from_env()
    # A model's 8-bit build is made once per machine, by whichever process loads it first: here,
    # not inside the first index timed, whose peak RSS it would be counted in.
    for model in config.chosen_models():
        _build(model, config.langs)
    runs = []
    with tempfile.TemporaryDirectory(prefix="ireneo-bench-") as scratch:
        for lang in config.langs:
            for size in config.sizes:
                scratch_one = Path(scratch) / f"{lang}-{size}"
                runs += run_one(config, settings, lang, size, scratch_one, stage)
    return runs


def _build(model: str | None, langs: tuple[str, ...]) -> None:
    """Load `model`; None (each memory chooses by its language, ireneo.embed.choose): the
    default, and the model for what it cannot read if a history is not English."""
    load_embedder(model)
    if model is None and any(lang != "en" for lang in langs):
        with contextlib.suppress(UnknownModel):  # not installed: the memories keep the default
            load_embedder(MULTILINGUAL_MODEL)


def run_one(
    config: Config,
    settings: Settings,
    lang: str,
    size: int,
    scratch: Path,
    stage: Stage = _unseen,
) -> list[Run]:
    """One history, measured with each model in turn: a Run per model."""
    name = f"{lang} {size:,}"
    stage(f"{name}: writing the history", None)
    history = generate(
        size, lang=lang, family=config.family, seed=config.seed, questions=config.questions
    )
    source = scratch / "src"
    write_funes_jsonl(history, source)
    write_questions(history, scratch / "questions.json")
    models = config.chosen_models()
    return [
        run_model(
            config,
            settings,
            Run(lang, size),
            model,
            history,
            scratch / f"model-{number}",  # a model may be named by a path: not in the name
            f"{name} · {model}" if len(models) > 1 else name,
            stage,
        )
        for number, model in enumerate(models)
    ]


def run_model(
    config: Config,
    settings: Settings,
    result: Run,
    model: str | None,
    history: History,
    scratch: Path,
    name: str,
    stage: Stage,
) -> Run:
    """Every stage for one history (its files beside `scratch`) and one model (None: the one
    its memory chooses by its language). The memory lives where a server home keeps its user's (`mcp.memory_home`), so
    that the MCP stage serves the very memory the others measured."""
    source, questions_file = scratch.parent / "src", scratch.parent / "questions.json"
    questions = history.questions
    home = mcp.memory_home(scratch)
    # every child opens the memory with its own model, whatever IRENEO_MODEL says
    env = {**os.environ, "IRENEO_MODEL": model} if model else None
    stage(f"{name}: indexing its {len(history.turns):,} turns (in a child)", None)
    result.perf.update(index_cost(home, source, model))
    with Memory(home, settings=settings, model=model) as memory:
        result.model = memory.model_name
        advance = stage(f"{name}: questions, every method", len(questions))
        result.accuracy = accuracy(memory, questions, advance)
        result.perf["disk_mb"] = memory.status().disk_bytes / 2**20
        (scratch / "misses.json").write_text(
            json.dumps(misses(memory, questions), ensure_ascii=False, indent=1)
        )
        stage(f"{name}: nothing relevant, both ways", None)
        result.nothing = nothing_relevant(memory, questions)
    stage(f"{name}: latency, memory, time to searchable", None)
    _, _, out = child("ireneo.benchmark.probe", [str(home), str(questions_file)], env)
    result.perf.update(json.loads(out))
    if config.mcp:
        stage(f"{name}: MCP recall through a real server", None)
        try:  # a long run keeps its other figures when the server fails; the report says why
            result.perf.update(mcp.mcp_latency(scratch, questions))
        except mcp.ServerFailed as exc:
            result.failed["mcp"] = str(exc)
            stage(f"{name}: {str(exc)[:300]}", None)
    result.perf["cold_p50_ms"] = cold_latency(home, questions, config.cold_samples, env)
    if config.database_url:
        stage(f"{name}: the same in PostgreSQL", None)
        result.stores = {
            "sqlite": {**result.perf, **_ireneo_accuracy(result.accuracy)},
            "postgresql": postgres_run(
                config,
                settings,
                result.lang,
                result.size,
                model,
                source,
                questions_file,
                questions,
            ),
        }
    return result


def postgres_run(
    config: Config,
    settings: Settings,
    lang: str,
    size: int,
    model: str | None,
    source: Path,
    questions_file: Path,
    questions: list[Question],
) -> dict[str, float]:
    """The same history in PostgreSQL, as a user of its own, measured as the SQLite one is."""
    assert config.database_url is not None
    user = f"bench-{lang}-{size}-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "IRENEO_DATABASE_URL": config.database_url, "IRENEO_USER": user}
    env.pop("IRENEO_HOME", None)
    if model:
        env["IRENEO_MODEL"] = model
    perf = index_cost(None, source, model, env)
    with Memory(database=config.database_url, user=user, settings=settings, model=model) as memory:
        table = accuracy(memory, questions, lambda: None, methods=("ireneo",))
        perf["disk_mb"] = memory.status().disk_bytes / 2**20
    _, _, out = child("ireneo.benchmark.probe", ["-", str(questions_file)], env)
    perf.update(json.loads(out))
    perf["cold_p50_ms"] = cold_latency(None, questions, config.cold_samples, env)
    return {**perf, **_ireneo_accuracy(table)}


def _ireneo_accuracy(table: dict) -> dict[str, float]:
    forms = table["ireneo"]
    return {
        metric: (forms["long"][metric] + forms["short"][metric]) / 2
        for metric in ("hit@3", "strict@3")
    }


def save(runs: list[Run], config: Config, started: str) -> Path:
    from ireneo.benchmark.report import markdown, plots

    config.out.mkdir(parents=True, exist_ok=True)
    document = {
        "started": started,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]},
        "model": runs[0].model if runs else config.model or DEFAULT_MODEL,
        "models": list(dict.fromkeys(run.model for run in runs)),  # the first: the baseline
        # no model named: each history's memory chose its own by its language
        "chosen": not config.models and config.model is None,
        # every Memory the run opens, in process and in its children, reads it
        "rerank": Settings.from_env().rerank or "none",
        "runs": [asdict(r) for r in runs],
    }
    (config.out / "latest.json").write_text(json.dumps(document, indent=1))
    (config.out / "latest.md").write_text(markdown(document))
    plots(document, config.out)
    return config.out / "latest.md"
