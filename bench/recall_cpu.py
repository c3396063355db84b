"""The CPU of the tool's answer (`recall_answer`, k 3 within 4,000 characters) on small memories
as the many-users bench makes them, or on the one of docs/reliability.md's figure.

    PYTHONPATH=TREE/src nice python bench/recall_cpu.py --work DIR [--sizes 1,2,5,10,20]
    PYTHONPATH=TREE/src nice python bench/recall_cpu.py --work DIR --sizes 1000 --rounds 2
    PYTHONPATH=TREE/src nice python bench/recall_cpu.py --work DIR --sizes 20 --gap 20
    PYTHONPATH=TREE/src nice python bench/recall_cpu.py --home HOME --history 10000,en,A,7 \
        --model e5-small-q8 --rounds 1

Builds (once, in DIR) two generated histories of each size, indexed with `--model`, and asks
each its own questions, long and short, as written and in lowercase (as agents often type), a
few rounds after a warm-up; or asks the memory at `--home`, which holds the generated history
`--history` names (conversations, language, family, seed), its questions. `--gap` sleeps that
many milliseconds before each answer, as a paced agent's recalls come: on these machines a
recall after an idle gap costs more CPU than one run back to back (docs/scaling.md). Prints
the median CPU per answer, of the process and of the calling thread (which holds the
interpreter's lock; the query's embedding runs on another). Run two trees one after the other,
a few times each, and compare medians: a busy machine moves every figure.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from ireneo import Memory
from ireneo.benchmark.generate import generate, write_funes_jsonl
from ireneo.server.tools import recall_answer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, help="where the memories are kept (built once)")
    p.add_argument("--sizes", default="1,2,5,10,20", help="conversations a memory, comma-separated")
    p.add_argument("--model", default="minilm-l6-v2-q8")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--gap", type=float, default=0.0, help="milliseconds idle before each answer")
    p.add_argument("--home", type=Path, help="an indexed memory holding the --history")
    p.add_argument("--history", help="conversations,language,family,seed of --home's history")
    args = p.parse_args()
    if (args.work is None) == (args.home is None):
        p.error("give --work (memories built there) or --home with --history")
    memories = []
    if args.home is not None:
        size, lang, family, seed = (args.history or "").split(",")
        history = generate(int(size), lang=lang, family=family, seed=int(seed))
        asked = [q.long for q in history.questions] + [q.short for q in history.questions]
        memories.append((Memory(args.home, model=args.model), asked + lowercase(asked)))
    for size in (int(s) for s in args.sizes.split(",") if args.home is None):
        for seed in (11, 12) if size < 1000 else (3,):
            history = generate(size, seed=seed, questions=200 if size >= 1000 else 40)
            where = args.work / f"{args.model}-{size}-{seed}"
            if not (where / "done").exists():
                write_funes_jsonl(history, where / "in")
                with Memory(where / "home", model=args.model) as memory:
                    memory.index([where / "in"])
                (where / "done").touch()
            asked = [q.long for q in history.questions] + [q.short for q in history.questions]
            memories.append((Memory(where / "home", model=args.model), asked + lowercase(asked)))
    for memory, questions in memories:  # warm: copies read, model loaded
        for question in questions[:4]:
            recall_answer(memory, question, 3, 4000)
    process, thread = [], []
    for _ in range(args.rounds):
        for memory, questions in memories:
            for question in questions:
                if args.gap:
                    time.sleep(args.gap / 1000)
                cpu, own = time.process_time(), time.thread_time()
                recall_answer(memory, question, 3, 4000)
                process.append(time.process_time() - cpu)
                thread.append(time.thread_time() - own)
    print(
        f"{len(process)} answers: median CPU {1000 * statistics.median(process):.2f} ms, "
        f"calling thread {1000 * statistics.median(thread):.2f} ms"
    )


def lowercase(questions: list[str]) -> list[str]:
    return [q.lower() for q in questions]


if __name__ == "__main__":
    main()
