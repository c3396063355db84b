"""What onnxruntime's CPU arena holds after embedding batches like the indexer's, and its cost.

    nice python bench/ort_arena.py on; nice python bench/ort_arena.py off   # alternate a few

Embeds the turns of a generated history (1,440 of them, twice) 256 at a time with the default
model, its session's CPU arena on (onnxruntime's default) or off, then prints the CPU per turn
and the process's RSS before, after, and after glibc's malloc_trim(0).
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path

import ireneo.embed.onnx as onnx
from ireneo.benchmark.generate import generate
from ireneo.embed.registry import load_embedder
from ireneo.server.trim import Trim


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1] not in ("on", "off"):
        raise SystemExit("usage: ort_arena.py on|off")
    arena = sys.argv[1] == "on"
    onnx.transformer_session = functools.partial(onnx.transformer_session, arena=arena)
    texts = [t.text for t in generate(120, seed=3).turns]
    model = load_embedder(None)
    loaded = rss_mb()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(2):
        for i in range(0, len(texts), 256):
            model.embed_passages(texts[i : i + 256])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    after = rss_mb()
    Trim()(force=True)
    n = 2 * len(texts)
    print(
        f"arena {'on' if arena else 'off'}: {n} turns, CPU {cpu / n * 1000:.2f} ms a turn "
        f"(wall {wall / n * 1000:.2f}); RSS loaded {loaded:.0f}, after {after:.0f}, trimmed "
        f"{rss_mb():.0f} MB; load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
