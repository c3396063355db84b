"""Server CPU per MCP call for uvicorn's HTTP protocols and event loops, alternated in one run.

    nice python bench/mcp_path_cpu.py --work DIR --rounds 6 --calls 40
    nice python bench/mcp_path_cpu.py --work DIR --variants httptools+uvloop,baseline \
        --baseline OLD/src --kinds path-2025,recall-2025 [--gap 20]

Starts one server per variant (h11 or httptools, asyncio's loop or uvloop), each the app and
options `ireneo serve` runs (`create_app`, `uvicorn_options`, the read deadlines) but for the
variant's protocol class and loop, all on one home; `baseline` is httptools+uvloop running the
code of `--baseline` (another tree's src: PYTHONPATH), to measure a change against the code
before it. Each round, every variant in turn (the order rotated each round) takes `--clients`
clients making `--calls` calls of `recall_my_conversations` each, of every kind: "path", users
without a memory (all of the MCP path, no search); "recall", users with one of 20 generated
conversations (the whole recall); both through fastmcp.Client (one session each, the 2026
protocol), and again as raw JSON-RPC posts naming protocol 2025-06-18 (RawClient; "path-2025",
"recall-2025": what most agents' clients send); and "health", plain GET /health (HTTP and the
middleware, no MCP). The server's CPU (user and system, from /proc) over those calls, per call,
and its event loop's thread's alone ("loop"); prints each variant's median over the rounds and
its ratio to the first variant's. With
`--gap MS` each client waits that long between its calls (one client: a paced agent; this VM
runs slower after an idle gap) and the median time a call took as the client saw it is
printed too. The machine's other load moves every figure: compare within one run.
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
from collections.abc import Callable
from pathlib import Path

import httpx2

from ireneo import Memory
from ireneo.benchmark.clients import RawClient
from ireneo.benchmark.generate import generate, write_funes_jsonl
from ireneo.benchmark.server_process import ServerProcess
from ireneo.server.memories import user_key

VARIANTS = {"h11": ("h11", "asyncio"), "httptools": ("httptools", "asyncio")}
VARIANTS |= {"httptools+uvloop": ("httptools", "uvloop"), "h11+uvloop": ("h11", "uvloop")}
VARIANTS |= {"baseline": ("httptools", "uvloop")}  # another tree's code (--baseline)
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


def start(
    variant: str, home: Path, baseline: str | None = None
) -> tuple[subprocess.Popen, ServerProcess]:
    spec = ServerProcess(home)  # its environment, port and tokens
    env = spec.env()
    if variant.partition("#")[0] == "baseline":
        assert baseline, "the baseline variant needs --baseline SRC"
        env["PYTHONPATH"] = baseline + os.pathsep + env["PYTHONPATH"]
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", variant, "--port", str(spec.port)],
        env=env,
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


async def raw_calls(
    spec: ServerProcess, users: dict[str, list[str]], clients: int, n: int, gap: float = 0.0
) -> tuple[float, float, list[float]]:
    """Server CPU seconds per call, its event loop's, and each call's seconds as the client
    saw it, over `clients` clients posting `n` raw JSON-RPC calls each (no session: the server is
    stateless), `gap` seconds apart."""
    names = list(users)
    took: list[float] = []

    async def client(i: int, opened: asyncio.Barrier, done: asyncio.Barrier) -> None:
        user = names[i % len(names)]
        questions = itertools.cycle(users[user] or [f"what did we say about item {i}"])
        async with RawClient(f"{spec.url}/mcp", spec.token(user)) as session:
            await opened.wait()
            for _ in range(n):
                query = {"query": next(questions)}
                began = time.perf_counter()
                answer = await session.call_tool("recall_my_conversations", query)
                took.append(time.perf_counter() - began)
                assert not answer.is_error, answer.content
                await asyncio.sleep(gap)
            await done.wait()

    return *await _counted(spec, client, clients, n), took


def loop_seconds(spec: ServerProcess) -> float:
    """CPU time the server's main thread (its event loop) has used so far (Linux)."""
    assert spec.process is not None
    pid = spec.process.pid
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _counted(spec: ServerProcess, run: Callable, clients: int, n: int) -> tuple[float, float]:
    """Server CPU seconds per call, and its event loop's, while `clients` runs of `run` make
    `n` calls each (a run that fails breaks the barriers, and its error is raised)."""
    opened, done = asyncio.Barrier(clients + 1), asyncio.Barrier(clients + 1)

    async def guarded(i: int) -> None:
        try:
            await run(i, opened, done)
        except BaseException:
            await opened.abort()
            await done.abort()
            raise

    tasks = [asyncio.create_task(guarded(i)) for i in range(clients)]
    try:
        await opened.wait()  # sessions open: only the calls are counted
        cpu, loop = spec.cpu_seconds(), loop_seconds(spec)
        await done.wait()
        cpu, loop = spec.cpu_seconds() - cpu, loop_seconds(spec) - loop
    except asyncio.BrokenBarrierError:
        await asyncio.gather(*tasks)  # raises the run's error
        raise
    await asyncio.gather(*tasks)
    return cpu / (clients * n), loop / (clients * n)


async def calls(
    spec: ServerProcess, users: dict[str, list[str]], clients: int, n: int, gap: float = 0.0
) -> tuple[float, float, list[float]]:
    """Server CPU seconds per call, its event loop's, and each call's seconds as the client
    saw it, over `clients` sessions making `n` calls each, `gap` seconds apart (of GET /health when `users`
    is empty)."""
    from fastmcp import Client

    names = list(users)
    took: list[float] = []

    async def health(i: int, opened: asyncio.Barrier, done: asyncio.Barrier) -> None:
        async with httpx2.AsyncClient() as session:
            assert (await session.get(f"{spec.url}/health")).status_code == 200
            await opened.wait()
            for _ in range(n):
                began = time.perf_counter()
                assert (await session.get(f"{spec.url}/health")).status_code == 200
                took.append(time.perf_counter() - began)
                await asyncio.sleep(gap)
            await done.wait()

    async def client(i: int, opened: asyncio.Barrier, done: asyncio.Barrier) -> None:
        user = names[i % len(names)]
        questions = itertools.cycle(users[user] or [f"what did we say about item {i}"])
        async with Client(f"{spec.url}/mcp", auth=spec.token(user), timeout=60) as session:
            await opened.wait()
            for _ in range(n):
                began = time.perf_counter()
                result = await session.call_tool(
                    "recall_my_conversations", {"query": next(questions)}
                )
                took.append(time.perf_counter() - began)
                assert not result.is_error
                await asyncio.sleep(gap)
            await done.wait()

    return *await _counted(spec, health if not users else client, clients, n), took


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, help="the home (memories kept for reuse)")
    p.add_argument("--variants", default="h11,httptools,httptools+uvloop")
    p.add_argument("--baseline", help="the src folder of the code the baseline variant runs")
    p.add_argument("--kinds", default="health,path,recall", help=f"of {','.join(KINDS)}")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--calls", type=int, default=40, help="calls per client per round and kind")
    p.add_argument("--gap", type=float, default=0.0, help="ms each client waits between calls")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    if args.work is None:
        p.error("--work is required")
    strangers = {f"stranger-{n}": [] for n in range(args.clients)}
    readers = build(args.work) if {"recall", "recall-2025"} & set(args.kinds.split(",")) else {}
    users = {"health": {}, "path": strangers, "recall": readers}
    users |= {"path-2025": strangers, "recall-2025": readers}
    kinds = args.kinds.split(",")
    variants = args.variants.split(",")
    gap = args.gap / 1000
    servers = {variant: start(variant, args.work, args.baseline) for variant in variants}
    figures: dict[tuple[str, str], list[float]] = {}
    took: dict[tuple[str, str], list[float]] = {}
    loops: dict[tuple[str, str], list[float]] = {}
    try:
        for _, spec in servers.values():  # warm: model loaded, copies read, tokens kept
            for kind in kinds:
                asyncio.run(KINDS[kind](spec, users[kind], args.clients, 5))
        for r in range(args.rounds):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for variant in order:
                for kind in kinds:
                    run = KINDS[kind](
                        servers[variant][1], users[kind], args.clients, args.calls, gap
                    )
                    per_call, loop, times = asyncio.run(run)
                    figures.setdefault((variant, kind), []).append(1000 * per_call)
                    loops.setdefault((variant, kind), []).append(1000 * loop)
                    took.setdefault((variant, kind), []).append(1000 * statistics.median(times))
            print(
                f"round {r + 1}: "
                + ", ".join(f"{v} {k} {f[-1]:.2f}" for (v, k), f in figures.items()),
                file=sys.stderr,
            )
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(30)
    paced = f", {args.gap:g} ms between calls" if args.gap else ""
    print(
        f"server CPU per call, ms: median of {args.rounds} rounds (ratio to {variants[0]}); "
        f"{args.clients} clients{paced}; the event loop's thread's; client's median ms"
    )
    print(f"load average {os.getloadavg()[0]:.1f}")
    for kind in kinds:
        base = statistics.median(figures[(variants[0], kind)])
        for variant in variants:
            values = figures[(variant, kind)]
            median = statistics.median(values)
            spread = ", ".join(f"{v:.2f}" for v in values)
            client = statistics.median(took[(variant, kind)])
            loop = statistics.median(loops[(variant, kind)])
            print(
                f"{kind:11} {variant:17} {median:6.2f}  x{median / base:.3f}  "
                f"loop {loop:5.2f}  client {client:6.2f}  [{spread}]"
            )


KINDS = {
    "health": calls,  # GET /health: HTTP and the middleware, no MCP
    "path": calls,
    "recall": calls,
    "path-2025": raw_calls,
    "recall-2025": raw_calls,
}


if __name__ == "__main__":
    main()
