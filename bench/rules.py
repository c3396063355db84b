"""What each ranking rule buys: recall with the rule and without it, on real and generated chats.

    python bench/rules.py --locomo PATH [--model M] [--size 1000] [--seed 7] [--out DIR]
                          [--shown] [--only WORDS]

A rule stays only where it holds or gains everywhere: LoCoMo (evidence in the tool's answer,
3 hits with their context), and strict hit@3 (long and short questions together) on template
families A, B and C in English, and on family A in Russian and Korean. Each variant turns one
of `search.Fusion`'s rules off (or moves its weight), or changes what the tool's answer shows
past ranking (`search.GROWTH_COST`, which strict hit@3 does not read: `--shown` adds, for each
generated history, how often the tool's answer holds the question's answer). The memories are
indexed once and every variant asks the same questions of them. Results: OUT/rules.md and
rules.json; docs/ranking.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from ireneo import Memory, relevance, search
from ireneo.benchmark.generate import generate, write_funes_jsonl
from ireneo.benchmark.locomo import MAX_CHARS, K, evidence_share, load, shown_turns
from ireneo.server.tools import recall_answer

# name: the Fusion fields that differ from the default (None: the default itself)
VARIANTS: dict[str, dict | None] = {
    "ireneo (every rule)": None,
    "no name share (name_weight 0)": {"name_weight": 0.0},
    "no speaker's name (speakers off)": {"speakers": False},
    "no time share (time_weight 0)": {"time_weight": 0.0},
    "meaning reads the speakers' names (unnamed_meaning off)": {"unnamed_meaning": False},
    "no adjacent pairs (pair_weight 0)": {"pair_weight": 0.0},
    "Okapi's length norm (0.75)": {"length_norm": 0.75},
    "more meaning (lexical_weight 0.5)": {"lexical_weight": 0.5},
    "more words (lexical_weight 0.85)": {"lexical_weight": 0.85},
    "lexical_weight 0.65 (e5's)": {"lexical_weight": 0.65},
    "lexical_weight 0.7 (MiniLM's)": {"lexical_weight": 0.7},
    "no relevance gate": {"lift": relevance.Lift(alone=-1.0, with_words=-1.0)},
    "further hits before any growth (growth cost ∞)": {"growth_cost": math.inf},
    "growth cost 0.05": {"growth_cost": 0.05},
    "growth cost 0.2": {"growth_cost": 0.2},
}
HISTORIES = (("en", "A"), ("en", "B"), ("en", "C"), ("ru", "A"), ("ko", "A"))


def locomo_scores(memories: list[tuple[Memory, list]], changes: dict | None) -> float:
    fusion_changes = {k: v for k, v in (changes or {}).items() if k != "growth_cost"}
    growth_cost = search.GROWTH_COST
    search.GROWTH_COST = (changes or {}).get("growth_cost", growth_cost)
    shares = []
    for memory, questions in memories:
        default = memory.fusion
        if fusion_changes:
            memory.fusion = replace(default, **fusion_changes)
        for question in questions:
            hits, text = recall_answer(memory, question.text, K, MAX_CHARS)
            refs = {hit.session_id: memory.conversation_ref(hit.session_id) for hit in hits}
            shares.append(evidence_share(question, shown_turns(hits, text, refs)))
        memory.fusion = default
    search.GROWTH_COST = growth_cost
    return statistics.mean(shares)


def answer_shown(memory: Memory, questions: list, changes: dict | None) -> float:
    """The share of questions (long and short forms) whose tool answer holds their answer."""
    fusion_changes = {k: v for k, v in (changes or {}).items() if k != "growth_cost"}
    default, growth_cost = memory.fusion, search.GROWTH_COST
    if fusion_changes:
        memory.fusion = replace(default, **fusion_changes)
    search.GROWTH_COST = (changes or {}).get("growth_cost", growth_cost)
    found = asked = 0
    for question in questions:
        for text in (question.long, question.short):
            asked += 1
            found += question.answer in recall_answer(memory, text, K, MAX_CHARS)[1]
    memory.fusion, search.GROWTH_COST = default, growth_cost
    return found / asked


def strict_at_3(memory: Memory, questions: list, changes: dict | None) -> float:
    fusion_changes = {k: v for k, v in (changes or {}).items() if k != "growth_cost"}
    default = memory.fusion
    if fusion_changes:
        memory.fusion = replace(default, **fusion_changes)
    found = asked = 0
    for question in questions:
        for text in (question.long, question.short):
            asked += 1
            found += question.session_id in {h.session_id for h in memory.recall(text, k=3)}
    memory.fusion = default
    return found / asked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, required=True, help="LoCoMo's locomo10.json")
    parser.add_argument("--model", default=None)
    parser.add_argument("--size", type=int, default=1000, help="conversations per history")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shown", action="store_true", help="also: the answer holds it")
    parser.add_argument("--only", default="", help="only the variants whose name holds this")
    parser.add_argument("--out", type=Path, default=Path("bench/results/rules"))
    args = parser.parse_args(argv)
    started = time.perf_counter()

    def say(line: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f} s] {line}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="ireneo-rules-") as scratch:
        root = Path(scratch)
        locomo = []
        for sample in load(args.locomo):
            say(f"LoCoMo {sample.sample_id}: indexing {len(sample.turns):,} turns")
            memory = Memory(root / sample.sample_id, model=args.model)
            memory.store_turns(sample.turns)
            memory.embed_pending()
            locomo.append((memory, sample.questions))
        generated = []
        for lang, family in HISTORIES:
            say(f"{lang} {family}: generating and indexing {args.size:,} conversations")
            history = generate(args.size, lang=lang, family=family, seed=args.seed)
            write_funes_jsonl(history, root / f"{lang}{family}-src")
            memory = Memory(root / f"{lang}{family}", model=args.model)
            memory.index([root / f"{lang}{family}-src"])
            generated.append((f"{lang} {family}", memory, history.questions))
        model = locomo[0][0].model_name
        rows = {}
        for name, changes in VARIANTS.items():
            if changes is not None and args.only not in name:
                continue
            say(f"variant: {name}")
            row = {"LoCoMo": locomo_scores(locomo, changes)}
            for label, memory, questions in generated:
                row[label] = strict_at_3(memory, questions, changes)
            for label, memory, questions in generated if args.shown else ():
                row[f"{label} shown"] = answer_shown(memory, questions, changes)
            rows[name] = row
        for memory, _ in locomo:
            memory.close()
        for _, memory, _ in generated:
            memory.close()

    args.out.mkdir(parents=True, exist_ok=True)
    doc = {"model": model, "size": args.size, "seed": args.seed, "rows": rows}
    (args.out / "rules.json").write_text(json.dumps(doc, indent=2) + "\n")
    columns = list(next(iter(rows.values())))
    lines = [
        f"Model {model}; LoCoMo: evidence in the tool's answer; generated histories of "
        f"{args.size:,} conversations (seed {args.seed}): strict hit@3, long and short forms"
        + ("; shown: the tool's answer holds the answer." if args.shown else "."),
        "",
        "| variant | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[c]:.3f}" for c in columns) + " |")
    (args.out / "rules.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
