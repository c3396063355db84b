"""Latency of `recall_my_conversations` over HTTP, and the server's memory, at a history size.

    python bench/server_latency.py --conversations 1000 --calls 200
    python bench/server_latency.py --conversations 10000 --calls 200

Builds one user's memory of N synthetic conversations of six turns (stored and embedded with
the Python API, as a backfill would), starts `ireneo serve` as its own process on 127.0.0.1,
warms it up, then times `--calls` tool calls made one after another by the official MCP client
(fastmcp.Client over streamable HTTP, one client kept open) with short identifier queries. Prints
one JSON document: p50/p95/max milliseconds per call as the client sees it, the median time
inside the tool (from the server's own log), the median tools/list after each call (a round
trip without a tool run; it goes through the MCP SDK, which recall's own calls skip on the
direct path, ireneo.server.direct, so it costs more than a call's protocol share), and the
server's RSS (idle, after, peak).
The work directory defaults to a fresh temporary one; `--work DIR` reuses a memory built before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ireneo import Memory
from ireneo.benchmark.server_process import ServerProcess
from ireneo.formats.gateway import parse_gateway_body
from ireneo.server.memories import user_key

USER = "bench-user"
SITES = ["North", "South", "East", "West", "Harbour", "Ridge", "Valley", "Delta", "Mesa", "Cove"]
KINDS = ["pump", "compressor", "conveyor", "boiler", "mixer", "press", "turbine", "chiller"]
PEOPLE = ["Priya", "Tomas", "Aiko", "Marta", "Sven", "Lena", "Omar", "Ravi", "Chen", "Nadia"]
SYMPTOMS = [
    "vibration alarm keeps coming back",
    "seal leak under the housing",
    "bearing noise at high load",
    "pressure drops overnight",
    "temperature creeps above the limit",
    "motor trips on start",
]
TASKS = ["inspection", "calibration", "oil change", "filter swap", "firmware update", "audit"]
SMALL_TALK = [
    "Thanks, that helps.",
    "Let me check the shift notes and come back to you.",
    "Good morning, quick question before the meeting.",
    "Makes sense, I will tell the team.",
    "Can you keep that short, I am on my phone.",
]


def equipment(rng: random.Random) -> str:
    return f"{rng.choice('KPCBMT')}-{rng.randint(1, 99):03d}"


def make_conversation(n: int, rng: random.Random) -> tuple[dict, str]:
    site, kind, eq, person = (
        rng.choice(SITES),
        rng.choice(KINDS),
        equipment(rng),
        rng.choice(PEOPLE),
    )
    ticket = f"MT-{1000 + n}"
    symptom, task = rng.choice(SYMPTOMS), rng.choice(TASKS)
    rate = f"{rng.uniform(0.5, 9.5):.1f}%"
    texts = [
        rng.choice(SMALL_TALK) + f" The {kind} {eq} at {site} site: {symptom}.",
        f"Understood. For the {kind} {eq} I suggest a {task}; who owns it?",
        f"{person} owns the {task}. Ticket {ticket} is open for {eq}.",
        f"Noted: {ticket}, owner {person}, {site} site. The reject rate last week was {rate}.",
        rng.choice(SMALL_TALK),
        f"Summary: {kind} {eq} at {site}, {symptom}, ticket {ticket}, {task} by {person}.",
    ]
    day = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=7 * n)
    body = {
        "user": USER,
        "conversation_id": f"conv-{n:06d}",
        "turns": [
            {
                "ts": (day + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "role": "user" if i % 2 == 0 else "assistant",
                "text": t,
            }
            for i, t in enumerate(texts)
        ],
    }
    return body, f"{kind} {eq} ticket"


def build(home: Path, conversations: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    queries = []
    memory_dir = home / "users" / user_key(USER)
    ready = memory_dir.exists()
    with Memory(memory_dir) as memory:
        batch = []
        for n in range(conversations):
            body, query = make_conversation(n, rng)
            queries.append(query)
            if not ready:
                batch.extend(parse_gateway_body(body)[2])
                if len(batch) >= 6000:
                    memory.store_turns(batch)
                    batch = []
        if batch:
            memory.store_turns(batch)
        started = time.monotonic()
        embedded = memory.embed_pending()
        if embedded:
            print(
                f"embedded {embedded} passages in {time.monotonic() - started:.1f}s",
                file=sys.stderr,
            )
    return queries


def rss_kb(pid: int) -> tuple[int, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


async def measure(
    url: str, token: str, queries: list[str], calls: int, warmup: int
) -> tuple[list[float], list[float]]:
    """Milliseconds per recall call, and per tools/list after it (the same round trip with no
    tool run: what HTTP, authentication and the protocol cost; this server answers no ping)."""
    from fastmcp import Client

    times, listings = [], []
    async with Client(url, auth=token, timeout=60) as client:
        for i in range(warmup + calls):
            query = queries[i % len(queries)]
            started = time.perf_counter()
            result = await client.call_tool("recall_my_conversations", {"query": query})
            elapsed = (time.perf_counter() - started) * 1000
            assert not result.is_error
            started = time.perf_counter()
            await client.list_tools()
            listing = (time.perf_counter() - started) * 1000
            if i >= warmup:
                times.append(elapsed)
                listings.append(listing)
    return times, listings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="ireneo-bench-"))
    home = work / f"home-{args.conversations}"
    started = time.monotonic()
    queries = build(home, args.conversations, args.seed)
    build_s = time.monotonic() - started
    random.Random(args.seed + 1).shuffle(queries)

    log_path = work / f"server-{args.conversations}.log"
    log_path.unlink(missing_ok=True)  # the tool times below are read back from this run's log
    server = ServerProcess(home, log_path=log_path)
    try:
        server.start()
        idle_rss, _ = rss_kb(server.process.pid)
        times, listings = asyncio.run(
            measure(f"{server.url}/mcp", server.token(USER), queries, args.calls, args.warmup)
        )
        rss, peak = rss_kb(server.process.pid)
    finally:
        server.stop()
    events = [
        json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")
    ]
    inside = [e["ms"] for e in events if e.get("event") == "recall"][args.warmup :]

    times.sort()
    print(
        json.dumps(
            {
                "conversations": args.conversations,
                "turns": args.conversations * 6,
                "calls": len(times),
                "p50_ms": round(statistics.median(times), 2),
                "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
                "max_ms": round(times[-1], 2),
                "p50_in_tool_ms": round(statistics.median(inside), 2) if inside else None,
                "p50_list_tools_ms": round(statistics.median(listings), 2),
                "server_rss_idle_mb": round(idle_rss / 1024, 1),
                "server_rss_mb": round(rss / 1024, 1),
                "server_rss_peak_mb": round(peak / 1024, 1),
                "build_s": round(build_s, 1),
                "cpus": os.cpu_count(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
