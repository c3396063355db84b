"""A fresh process that serves one memory: warm recall latency, query embedding, its RSS, and
time-to-searchable.

Each question is also asked through the reference's fusion (`run.method_funes_rrf`) right after
ireneo's recall, and the median of the paired ratios compares the two at the same moment: the
machine's speed here changes by the hour.

    python -m ireneo.benchmark.probe HOME QUESTIONS.json   → one JSON object on stdout

HOME `-`: the memory that IRENEO_DATABASE_URL and IRENEO_USER name (read, with every other
setting, by `Settings.from_env()`, as the CLI reads them).

Run as its own process so that its memory is what a server holding this memory would hold.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ireneo import privacy
from ireneo.benchmark.run import method_funes_rrf
from ireneo.config import Settings
from ireneo.memory import Memory
from ireneo.model import Block, Turn


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]
        if len(values) > 1
        else values[0]
    )


def probe(home: Path | None, questions: list[dict], settings: Settings) -> dict[str, float]:
    with Memory(home, settings=settings) as memory:
        # as a running server would be: its recall path warm, its secret detectors compiled
        memory.recall("warm up", k=8)
        privacy.load_detectors()
        method_funes_rrf(memory, "warm up", 8)
        # the query's embedding alone, as recall makes it (no query vector is cached)
        embedding = [
            _milliseconds(memory.embedder.embed_query, question[form])
            for question in questions
            for form in ("short", "long")
        ]
        times, reference = [], []
        for question in questions:
            for form in ("short", "long"):
                times.append(_milliseconds(memory.recall, question[form], k=8))
                reference.append(_milliseconds(method_funes_rrf, memory, question[form], 8))
        result = {
            "warm_p50_ms": statistics.median(times),
            "warm_p95_ms": percentile(times, 95),
            "reference_p50_ms": statistics.median(reference),
            "warm_vs_reference": statistics.median(
                own / other for own, other in zip(times, reference, strict=True)
            ),
            "query_embed_p50_ms": statistics.median(embedding),
            "serve_rss_mb": rss_mb(),
        }
        result.update(time_to_searchable(memory))
        return result


def _milliseconds(call: Callable[..., object], *args: object, **kwargs: object) -> float:
    started = time.perf_counter()
    call(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


def time_to_searchable(memory: Memory) -> dict[str, float]:
    """Store one new six-turn conversation as the server does; time keyword and meaning search."""
    now = datetime.now(UTC)
    texts = [
        "The walk-in freezer ZQ-9183 at the Eastgate depot is icing up again.",
        "Defrost cycle set to every four hours; ticket MT-88231 opened for the door seal.",
        "Who is on it?",
        "Marguerite from facilities will replace the gasket on Thursday.",
        "Thanks.",
        "You're welcome.",
    ]
    turns = [
        Turn(
            "probe-new",
            f"probe-{i}",
            i,
            now,
            "user" if i % 2 == 0 else "assistant",
            "bench",
            (Block("text", t),),
        )
        for i, t in enumerate(texts)
    ]
    started = time.perf_counter()
    memory.store_turns(turns)
    found = memory.recall("ZQ-9183", k=1)[0].session_id == "probe-new"
    keyword_ms = (time.perf_counter() - started) * 1000
    memory.embed_pending()
    meaning_ms = (time.perf_counter() - started) * 1000
    by_meaning = any(
        h.session_id == "probe-new"
        for h in memory.recall("cold storage unit covered in frost", k=8)
    )
    return {
        "new_keyword_ms": keyword_ms if found else float("nan"),
        "new_meaning_ms": meaning_ms,
        "new_found_by_meaning": float(by_meaning),
    }


if __name__ == "__main__":
    home = None if sys.argv[1] == "-" else Path(sys.argv[1])
    questions = json.loads(Path(sys.argv[2]).read_text())
    print(json.dumps(probe(home, questions, Settings.from_env())))
