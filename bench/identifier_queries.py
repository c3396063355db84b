"""Queries made only of identifiers ("MT-4471"), answered with and without the meaning side.

    PYTHONPATH=src python bench/identifier_queries.py --work DIR [--conversations 300]
        [--locomo ../data/locomo10.json]

A query made of identifiers the memory holds is answered by keywords alone
(`ireneo.analyze.identifiers_only`, in `search.window_scores`). This asks, for each language
and template family, a generated history's identifiers (its tickets, decisions and equipment:
each as written and typed as "mt4471") as the MCP tool answers them (k 3 within 4,000
characters), once with that rule and once with the query's vector computed as before, and
prints per identifier kind:

- shown: the share of the conversations holding the identifier that the answer shows;
- first: the share of answers that show every such conversation before any other;
- others: the mean number of conversations shown that do not hold it (what fills the rest of
  the 4,000 characters);
- chars: the answer's median length; cpu: the median CPU of one answer (all threads).

It also counts the natural questions the rule would take: the history's own (long and short, as
written and in lowercase) and, with `--locomo`, LoCoMo's; each such question is answered the
same way with the rule and without it when the count is 0.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
from pathlib import Path

from ireneo import Memory, search
from ireneo.analyze import identifiers_only
from ireneo.benchmark import locomo
from ireneo.benchmark.generate import generate, write_funes_jsonl
from ireneo.benchmark.templates import FAMILIES, LANGS
from ireneo.server.tools import recall_answer

IDENTIFIER = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{1,10}[-_./]?\d{1,12}(?![A-Za-z0-9])")
PER_KIND = 60  # identifiers asked per kind and history


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--conversations", type=int, default=300)
    parser.add_argument("--langs", default=",".join(LANGS))
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--locomo", type=Path)
    args = parser.parse_args()
    report: dict[str, object] = {}
    if args.locomo:
        asked = [q.text for s in locomo.load(args.locomo) for q in s.questions]
        report["locomo"] = {"questions": len(asked), "taken": taken(asked)}
    for lang in args.langs.split(","):
        for family in args.families.split(","):
            label = f"{lang}-{family}"
            report[label] = measure(args.work / label, lang, family, args.conversations)
            print(json.dumps({label: report[label]}, ensure_ascii=False), flush=True)
    print(json.dumps(report, ensure_ascii=False, indent=1))


def taken(questions: list[str]) -> int:
    """How many of `questions` (as written or in lowercase) the rule would answer by keywords."""
    return sum(bool(identifiers_only(q)) or bool(identifiers_only(q.lower())) for q in questions)


def measure(work: Path, lang: str, family: str, conversations: int) -> dict[str, object]:
    history = generate(conversations, lang=lang, family=family, seed=11, questions=100)
    home = work / "home"
    memory = Memory(home)
    if memory.is_empty():
        write_funes_jsonl(history, work / "in")
        memory.index([work / "in"])
    holding: dict[str, tuple[str, set[str]]] = {}
    for turn in history.turns:
        for written in IDENTIFIER.findall(turn.text):
            joined = identifiers_only(written)[0]
            holding.setdefault(joined, (written, set()))[1].add(turn.session_id)
    rng = random.Random(f"{lang}/{family}")
    kinds = {
        "unique": [j for j, (_, s) in holding.items() if len(s) == 1],
        "shared": [j for j, (_, s) in holding.items() if len(s) > 1],
    }
    questions = [q.long for q in history.questions] + [q.short for q in history.questions]
    out: dict[str, object] = {
        "model": memory.embedder.name,
        "natural_questions": 2 * len(questions),
        "natural_taken": taken(questions),
    }
    for kind, joined in kinds.items():
        picked = rng.sample(sorted(joined), min(PER_KIND, len(joined)))
        asks = [(q, holding[j][1]) for j in picked for q in (holding[j][0], j)]
        out[kind] = {"identifiers": len(picked)}
        for rule in ("keywords", "meaning too"):
            out[kind][rule] = ask(memory, asks, rule == "keywords")  # type: ignore[index]
    memory.close()
    return out


def ask(memory: Memory, asks: list[tuple[str, set[str]]], rule: bool) -> dict[str, float]:
    """The answers' figures, the rule on or off (off: no query counts as identifiers only)."""
    search.identifiers_only = identifiers_only if rule else (lambda _query: [])  # type: ignore[attr-defined]
    shown, first, others, chars, cpu = [], [], [], [], []
    for query, sessions in asks:
        started = time.process_time()
        hits, text = recall_answer(memory, query, 3, 4000)
        cpu.append(time.process_time() - started)
        seen = [session in sessions for session in dict.fromkeys(hit.session_id for hit in hits)]
        shown.append(sum(seen) / len(sessions))
        first.append(seen == sorted(seen, reverse=True))
        others.append(seen.count(False))
        chars.append(len(text))
    search.identifiers_only = identifiers_only  # type: ignore[attr-defined]
    return {
        "shown": round(statistics.mean(shown), 3),
        "first": round(statistics.mean(first), 3),
        "others": round(statistics.mean(others), 2),
        "chars": statistics.median(chars),
        "cpu_ms": round(1000 * statistics.median(cpu), 2),
    }


if __name__ == "__main__":
    main()
