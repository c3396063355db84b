"""Where a new memory's model choice draws its line (ireneo.embed.choose), measured.

    PYTHONPATH=src python bench/model_choice.py shares [--locomo path/to/locomo10.json]
    PYTHONPATH=src python bench/model_choice.py mixed --lang ru --conversations 300 \
        --fractions 0.1,0.25,0.5

`shares`: the share of letters MiniLM cannot read (`unread_share`, over the chooser's bounded
sample) in whole memories (the generated histories of every language and family, 8 seeds of
40 conversations; LoCoMo's samples when a path is given; the repository's code and docs, 2,000
characters a text) and in single turns. `mixed`: English and another language's generated
conversations interleaved in one memory (family A, seed 7), the other language's share of the
conversations given by each fraction; for each, the chooser's share over that memory's sample,
and ireneo's strict hit@3 (both question forms) on each language's questions, once indexed with
MiniLM and once with e5-small-q8. Prints one line of JSON per row.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from ireneo import Memory
from ireneo.benchmark.generate import generate
from ireneo.benchmark.run import accuracy
from ireneo.embed.choose import unread_share
from ireneo.model import Turn

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("minilm-l6-v2-q8", "e5-small-q8")


def spread(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {
        "n": len(values),
        "min": round(values[0], 3),
        "p50": round(values[len(values) // 2], 3),
        "max": round(values[-1], 3),
    }


def shares(locomo: Path | None) -> None:
    for lang in ("en", "ru", "ko"):
        for family in ("A", "B", "C"):
            memories, turns = [], []
            for seed in range(8):
                history = generate(40, lang=lang, family=family, seed=seed, questions=0)
                texts = [turn.text for turn in history.turns]
                memories.append(unread_share(texts))
                turns += [unread_share([text]) for text in texts]
            row = {"set": f"{lang} {family}", "memory": spread(memories), "turn": spread(turns)}
            print(json.dumps(row))
    if locomo is not None:
        memories, turns = [], []
        for sample in json.loads(locomo.read_text(encoding="utf-8")):
            talk = sample["conversation"]
            sessions = sorted(
                (k for k in talk if k.startswith("session_") and not k.endswith("date_time")),
                key=lambda k: int(k.split("_")[1]),
            )
            texts = [turn["text"] for session in sessions for turn in talk[session]]
            memories.append(unread_share(texts))
            turns += [unread_share([text]) for text in texts]
        print(json.dumps({"set": "LoCoMo", "memory": spread(memories), "turn": spread(turns)}))
    files = sorted((ROOT / "src" / "ireneo").rglob("*.py")) + sorted((ROOT / "docs").glob("*.md"))
    code = [unread_share([path.read_text(encoding="utf-8")[:2000]]) for path in files]
    print(json.dumps({"set": "ireneo's code and docs, 2,000 characters", "text": spread(code)}))
    samples = [
        json.loads(line)["blocks"][0]["text"]
        for path in sorted((ROOT / "samples").glob("*.funes.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    print(json.dumps({"set": "samples/", "memory": round(unread_share(samples), 3)}))


def conversations(turns: list[Turn]) -> list[list[Turn]]:
    by_id: dict[str, list[Turn]] = {}
    for turn in turns:
        by_id.setdefault(turn.session_id, []).append(turn)
    return list(by_id.values())


def interleaved(english: list[list[Turn]], other: list[list[Turn]]) -> list[list[Turn]]:
    """The two lists merged so that each keeps its share all along."""
    order, e, o = [], 0, 0
    while e < len(english) or o < len(other):
        if o < len(other) and (e >= len(english) or o / len(other) <= e / len(english)):
            order.append(other[o])
            o += 1
        else:
            order.append(english[e])
            e += 1
    return order


def mixed(lang: str, total: int, fractions: list[float]) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="ireneo-choice-"))
    try:
        for fraction in fractions:
            count = max(1, round(total * fraction))
            english = generate(total - count, lang="en", seed=7, questions=100)
            other = generate(count, lang=lang, seed=7, questions=100)
            order = interleaved(conversations(english.turns), conversations(other.turns))
            row: dict = {"lang": lang, "fraction": fraction}
            row["share"] = round(unread_share(turn.text for c in order for turn in c), 3)
            for model in MODELS:
                home = scratch / f"{fraction}-{model}"
                with Memory(home, model=model) as memory:
                    for conversation in order:
                        memory.store_turns(conversation)
                    memory.embed_pending()
                    for name, history in (("en", english), (lang, other)):
                        table = accuracy(memory, history.questions, lambda: None, ("ireneo",))
                        forms = table["ireneo"]
                        both = (forms["long"]["strict@3"] + forms["short"]["strict@3"]) / 2
                        row[f"{model} {name}"] = round(both, 3)
                shutil.rmtree(home)
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("shares", "mixed"))
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--lang", default="ru", choices=("ru", "ko"))
    parser.add_argument("--conversations", type=int, default=300)
    parser.add_argument("--fractions", default="0.1,0.25,0.5")
    args = parser.parse_args()
    if args.what == "shares":
        shares(args.locomo)
    else:
        mixed(args.lang, args.conversations, [float(f) for f in args.fractions.split(",")])


if __name__ == "__main__":
    main()
