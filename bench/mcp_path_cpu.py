"""Server CPU per MCP call for uvicorn's HTTP protocols and event loops, alternated in one run.

    nice python bench/mcp_path_cpu.py --work DIR --rounds 6 --calls 40

Starts one server per variant (h11 or httptools, asyncio's loop or uvloop), each the app and
options `ireneo serve` runs (`create_app`, `uvicorn_options`, the read deadlines) but for the
variant's protocol class and loop, all on one home. Each round, every variant in turn (the order
rotated each round) takes `--clients` MCP clients (fastmcp.Client over streamable HTTP, one
session each) making `--calls` calls of `recall_my_conversations` each: for users without a
memory ("path": all of the MCP path, no search), then for users with one of 20 generated
conversations ("recall": the whole recall); and as many plain GET /health ("health": HTTP and
the middleware, no MCP). The server's CPU (user and system, from /proc) over
those calls, per call; prints each variant's median over the rounds and its ratio to the first
variant's. The machine's other load moves every figure: compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from ireneo import Memory
from ireneo.benchmark.generate import generate, write_funes_jsonl
from ireneo.benchmark.server_process import ServerProcess
from ireneo.server.memories import user_key

VARIANTS = {"h11": ("h11", "asyncio"), "httptools": ("httptools", "asyncio")}
VARIANTS |= {"httptools+uvloop": ("httptools", "uvloop"), "h11+uvloop": ("h11", "uvloop")}
MEMORIES = 10  # users with a memory, each of 20 generated conversations


def serve(variant: str, port: int) -> None:
    """What `ireneo serve` does, with the variant's protocol and loop (the child process)."""
    import uvicorn

    from ireneo.config import Settings
    from ireneo.server import deadlines
    from ireneo.server.app import create_app, uvicorn_options
    from ireneo.server.logs import configure_logging

    http, loop = VARIANTS[variant.partition("#")[0]]  # "h11#2": a second server of h11
    base = deadlines.HttpToolsDeadlines if http == "httptools" else deadlines.H11Deadlines
    configure_logging()
    settings = Settings.from_env()
    options = uvicorn_options(settings)
    options |= {"http": deadlines.read_deadline_protocol(settings.read_timeout, base), "loop": loop}
    uvicorn.run(create_app(settings), host="127.0.0.1", port=port, **options)


def build(home: Path) -> dict[str, list[str]]:
    """Users with a memory (built once in `home`), and each one's questions."""
    asked = {}
    for n in range(MEMORIES):
        history = generate(20, seed=100 + n, questions=40)
        user = f"reader-{n}"
        where = home / "users" / user_key(user)
        if not (where / "done").exists():
            write_funes_jsonl(history, home / f"in-{n}")
            with Memory(where) as memory:
                memory.index([home / f"in-{n}"])
            (where / "done").touch()
        asked[user] = [q.long for q in history.questions] + [q.short for q in history.questions]
    return asked


def start(variant: str, home: Path) -> tuple[subprocess.Popen, ServerProcess]:
    spec = ServerProcess(home)  # its environment, port and tokens
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", variant, "--port", str(spec.port)],
        env=spec.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    spec.process = process
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, f"{variant}: the server exited"
        try:
            if httpx2.get(f"{spec.url}/health", timeout=2).status_code == 200:
                return process, spec
        except httpx2.TransportError:
            pass
        assert time.monotonic() < deadline, f"{variant}: the server did not start"
        time.sleep(0.1)


async def calls(spec: ServerProcess, users: dict[str, list[str]], clients: int, n: int) -> float:
    """Server CPU seconds per call over `clients` sessions making `n` calls each (of GET
    /health when `users` is empty)."""
    from fastmcp import Client

    names = list(users)

    async def health(i: int, opened: asyncio.Barrier, done: asyncio.Barrier) -> None:
        async with httpx2.AsyncClient() as session:
            assert (await session.get(f"{spec.url}/health")).status_code == 200
            await opened.wait()
            for _ in range(n):
                assert (await session.get(f"{spec.url}/health")).status_code == 200
            await done.wait()

    async def client(i: int, opened: asyncio.Barrier, done: asyncio.Barrier) -> None:
        user = names[i % len(names)]
        questions = itertools.cycle(users[user] or [f"what did we say about item {i}"])
        async with Client(f"{spec.url}/mcp", auth=spec.token(user), timeout=60) as session:
            await opened.wait()
            for _ in range(n):
                result = await session.call_tool(
                    "recall_my_conversations", {"query": next(questions)}
                )
                assert not result.is_error
            await done.wait()

    opened, done = asyncio.Barrier(clients + 1), asyncio.Barrier(clients + 1)
    run = health if not users else client
    tasks = [asyncio.create_task(run(i, opened, done)) for i in range(clients)]
    await opened.wait()  # sessions open: only the calls are counted
    cpu = spec.cpu_seconds()
    await done.wait()
    cpu = spec.cpu_seconds() - cpu
    await asyncio.gather(*tasks)
    return cpu / (clients * n)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, help="the home (memories kept for reuse)")
    p.add_argument("--variants", default="h11,httptools,httptools+uvloop")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--calls", type=int, default=40, help="calls per client per round and kind")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    if args.work is None:
        p.error("--work is required")
    kinds = {
        "health": {},  # GET /health: HTTP and the middleware, no MCP
        "path": {f"stranger-{n}": [] for n in range(args.clients)},
        "recall": build(args.work),
    }
    variants = args.variants.split(",")
    servers = {variant: start(variant, args.work) for variant in variants}
    figures: dict[tuple[str, str], list[float]] = {}
    try:
        for _, spec in servers.values():  # warm: model loaded, copies read, tokens kept
            for users in kinds.values():
                asyncio.run(calls(spec, users, args.clients, 5))
        for r in range(args.rounds):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for variant in order:
                for kind, users in kinds.items():
                    per_call = asyncio.run(
                        calls(servers[variant][1], users, args.clients, args.calls)
                    )
                    figures.setdefault((variant, kind), []).append(1000 * per_call)
            print(
                f"round {r + 1}: "
                + ", ".join(f"{v} {k} {f[-1]:.2f}" for (v, k), f in figures.items()),
                file=sys.stderr,
            )
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(30)
    print(f"server CPU per call, ms: median of {args.rounds} rounds (ratio to {variants[0]})")
    print(f"load average {os.getloadavg()[0]:.1f}")
    for kind in kinds:
        base = statistics.median(figures[(variants[0], kind)])
        for variant in variants:
            values = figures[(variant, kind)]
            median = statistics.median(values)
            spread = ", ".join(f"{v:.2f}" for v in values)
            print(f"{kind:7} {variant:17} {median:6.2f}  x{median / base:.3f}  [{spread}]")


if __name__ == "__main__":
    main()
