"""Load: many concurrent clients against a real `ireneo serve` on 127.0.0.1, for a set time.

Each client speaks for one of `users` users (client i for user i mod users) and, back to back,
either posts one of its user's conversations grown by a turn (`POST /turns`, as the gateway) or
asks `recall_my_conversations` over MCP (its own session, as an agent; `client` "raw": raw
JSON-RPC posts, ireneo.benchmark.clients) for the marker of a turn it was already answered 202
for, which must come back: a turn is keyword-searchable once stored.
`posters` more clients only post, for users taken at random (recall while ingest runs). With
`conversations`, every user starts with that many conversations of six turns, stored and embedded
before the server starts (kept in the work directory and reused by the next run there; each run
there posts conversations numbered after the last run's, so that its posts store new turns).
With `workers`, the server is `ireneo serve --workers N` (its RSS and CPU are its processes').
With `rate`, the clients start that many operations a second in all, at random times (a Poisson
arrival process, as independent agents call), instead of each calling back to back: back to
back, 20 clients wait on average 20 / throughput for each answer whatever a call costs (Little's
law), so only a set rate tells what latency callers see below the server's capacity. A call's
latency then runs from when it was due, so time spent waiting behind the client's own previous
call counts; each client's schedule starts after one untimed call, which opens its user's memory
(back to back, only a client's first call waits for that; at a set rate, every call due
meanwhile would).
The server's RSS is sampled all along. At the end the server is stopped and every acknowledged
turn is looked up in the store.

Errors are anything but a 202, a transport failure, a tool error, a fail-soft sentence, a recall
that misses its marker, or one that shows another user's marker (cross-user text): the run wants
0. The report gives throughput and p50/p95/p99 per operation, and RSS over time as the slope of
each half of the run (it must level off).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx2
import numpy as np

from ireneo.benchmark.clients import CLIENTS, client_class, described
from ireneo.benchmark.server_process import INGEST_KEY, ServerProcess
from ireneo.benchmark.traffic import (
    KINDS,
    PEOPLE,
    SITES,
    SYMPTOMS,
    TASKS,
    Conversation,
    marker,
    stored_memories,
    stored_texts,
    turn_text,
    user_name,
)

TURNS_PER_CONVERSATION = 12
HISTORY_TURNS = 6  # turns of each conversation a user starts with
OPERATIONS = ("ingest", "recall")
# Every user's text carries their number: a run's markers (CK-<user>…) and the starting
# history's (BG-<user>-…), so another user's text in an answer is seen.
USER_MARKS = re.compile(r"\b(?:CK-(\d{3})\d{9}|BG-(\d{3})-\d+)\b")
# The next run's first conversation number, kept in the work directory: a run on a reused
# home posts conversations no earlier run posted (the same ones would store nothing new).
NEXT_CONVERSATION = "next-conversation"


@dataclass
class LoadConfig:
    clients: int = 50
    users: int = 20
    seconds: float = 60.0
    ingest_share: float = 0.5
    posters: int = 0  # clients that only post, besides `clients`
    conversations: int = 0  # each user's starting history, built before the server starts
    seed: int = 5
    rss_every: float = 0.5
    database_url: str | None = None
    workers: int = 1  # server processes (`ireneo serve --workers`)
    env: dict[str, str] = field(default_factory=dict)
    client: str = "fastmcp"  # the agents' MCP client (ireneo.benchmark.clients)
    rate: float = 0.0  # the clients' operations a second in all, at random times; 0: back to back


@dataclass
class Sample:
    at: float  # seconds since the start of the timed run
    op: str
    ms: float
    ok: bool


@dataclass
class LoadReport:
    config: dict
    seconds: float
    operations: dict[str, dict]
    errors: dict[str, int]
    error_examples: list[str]
    rss: dict[str, float]
    turns_acked: int
    acked_turns_missing: int
    index_catch_up_s: float
    load_average: list[float] = field(default_factory=list)  # the machine's, 1 min, start and end
    # CPU seconds the server and the clients (this process) used in the timed run: a figure a
    # shared machine disturbs less than latency
    cpu_s: dict[str, float] = field(default_factory=dict)
    # the share of the machine's CPU time its host gave other guests in the timed run (Linux's
    # "steal"): a virtual machine whose neighbours are busy is not idle, whatever its load says
    stolen: float | None = None
    samples: list[Sample] = field(repr=False, default_factory=list)
    rss_series: list[tuple[float, float]] = field(repr=False, default_factory=list)

    @property
    def total_errors(self) -> int:
        return sum(self.errors.values())

    def to_dict(self) -> dict:
        out = asdict(self)
        del out["samples"], out["rss_series"]
        out["total_errors"] = self.total_errors
        return out


class LoadRun:
    def __init__(self, config: LoadConfig, work: Path, progress: Callable | None = None):
        self.config = config
        self.work = work
        self.progress = progress
        self.rng = random.Random(config.seed)
        self.server = ServerProcess(
            home=work / "home",
            database_url=config.database_url,
            env_extra=config.env,
            log_path=work / "server.log",
            args=("--workers", str(config.workers)) if config.workers > 1 else (),
        )
        self.samples: list[Sample] = []
        self.rss: list[tuple[float, float]] = []
        self.errors: dict[str, int] = dict.fromkeys(OPERATIONS, 0)
        self.error_examples: list[str] = []
        self.conversations: dict[int, list[Conversation]] = {}
        self.next_conversation = first_conversation(work)  # the number a new one takes
        self.started = 0.0
        self.stopping = False

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> LoadReport:
        if self.config.conversations:
            if self.config.database_url:
                raise ValueError("a starting history is built for the embedded store only")
            build_history(self.work / "home", self.config.users, self.config.conversations)
        self.load_average = [round(os.getloadavg()[0], 1)]
        self.server.start()
        try:
            asyncio.run(self._run())
            (self.work / NEXT_CONVERSATION).write_text(f"{self.next_conversation}\n")
            caught_up = time.monotonic()
            self.server.wait_indexed(timeout=600)
            catch_up = time.monotonic() - caught_up
        finally:
            self.server.stop()
        missing = self._missing_turns()
        return self._report(missing, catch_up)

    async def _run(self) -> None:
        async with httpx2.AsyncClient(
            base_url=self.server.url,
            timeout=60,
            headers={"x-ingest-key": INGEST_KEY},
            limits=httpx2.Limits(max_connections=self.config.clients + self.config.posters + 10),
        ) as http:
            # every user starts with one stored conversation, so recall has something to find
            await asyncio.gather(*(self._ingest(http, user) for user in range(self.config.users)))
            self.samples.clear()
            self.started = time.monotonic()
            cpu = (self.server.cpu_seconds(), time.process_time())
            machine = machine_times()
            sampler = asyncio.create_task(self._sample_rss())
            reporter = asyncio.create_task(self._report_progress())
            await asyncio.gather(
                *(self._client(http, n) for n in range(self.config.clients)),
                *(self._poster(http, n) for n in range(self.config.posters)),
            )
            self.load_average.append(round(os.getloadavg()[0], 1))
            self.cpu_s = {
                "server": round(self.server.cpu_seconds() - cpu[0], 2),
                "clients": round(time.process_time() - cpu[1], 2),
            }
            self.stolen = stolen_share(machine, machine_times())
            sampler.cancel()
            reporter.cancel()

    async def _client(self, http: httpx2.AsyncClient, number: int) -> None:
        Client = client_class(self.config.client)
        user = number % self.config.users
        rng = random.Random(f"{self.config.seed}/{number}")
        token = self.server.token(user_name(user))
        deadline = self.started + self.config.seconds
        each = self.config.rate / self.config.clients  # this client's share of the rate
        async with Client(f"{self.server.url}/mcp", auth=token, timeout=60) as mcp:
            due = 0.0
            if each:  # an untimed first call opens the user's memory, then the schedule starts
                await mcp.call_tool(
                    "recall_my_conversations", {"query": "warm"}, raise_on_error=False
                )
                due = time.monotonic() + rng.expovariate(each)
            while (now := time.monotonic()) < deadline and due < deadline:
                if each:
                    await asyncio.sleep(max(0.0, due - now))
                started = due if each else None
                if rng.random() < self.config.ingest_share or not self._has_acked(user):
                    await self._ingest(http, user, started)
                else:
                    await self._recall(mcp, user, rng, started)
                if each:
                    due += rng.expovariate(each)

    async def _poster(self, http: httpx2.AsyncClient, number: int) -> None:
        rng = random.Random(f"{self.config.seed}/poster/{number}")
        deadline = self.started + self.config.seconds
        while time.monotonic() < deadline:
            await self._ingest(http, rng.randrange(self.config.users))

    def _has_acked(self, user: int) -> bool:
        return any(c.acked for c in self.conversations.get(user, []))

    async def _ingest(
        self, http: httpx2.AsyncClient, user: int, started: float | None = None
    ) -> None:
        """Post a conversation grown by a turn; its latency runs from `started` (now if None)."""
        conversations = self.conversations.setdefault(user, [])
        open_ones = [c for c in conversations if c.turns < TURNS_PER_CONVERSATION]
        if not open_ones or self.rng.random() < 0.1:
            conversations.append(Conversation(user=user, number=self.next_conversation))
            self.next_conversation += 1
            open_ones = [conversations[-1]]
        conversation = self.rng.choice(open_ones)
        body = conversation.grow()
        started = time.monotonic() if started is None else started
        problem = None
        try:
            response = await http.post("/turns", json=body)
            if response.status_code == 202:
                conversation.acked = max(conversation.acked, len(body["turns"]))
            else:
                problem = f"ingest answered {response.status_code}: {response.text[:120]}"
        except httpx2.HTTPError as exc:
            problem = f"ingest failed: {type(exc).__name__}"
        self._record("ingest", started, problem)

    async def _recall(
        self, mcp, user: int, rng: random.Random, started: float | None = None
    ) -> None:
        acked = [(c, k) for c in self.conversations.get(user, []) for k in range(c.acked)]
        conversation, k = rng.choice(acked)
        wanted = marker(user, conversation.number, k)
        started = time.monotonic() if started is None else started
        problem = None
        try:
            result = await mcp.call_tool(
                "recall_my_conversations", {"query": wanted}, raise_on_error=False
            )
            text = result.content[0].text if result.content else ""
            if result.is_error:
                problem = f"recall error: {text[:120]}"
            elif wanted not in text:
                problem = f"recall missed {wanted}: {text[:120]}"
            elif others := foreign_marks(text, user):
                problem = f"recall for user {user} showed another user's text: {others[:3]}"
        except Exception as exc:  # the client's view: any failure is an error of the run
            problem = f"recall failed: {type(exc).__name__}: {exc}"[:200]
        self._record("recall", started, problem)

    def _record(self, op: str, started: float, problem: str | None) -> None:
        now = time.monotonic()
        if self.started:
            self.samples.append(
                Sample(started - self.started, op, (now - started) * 1000, problem is None)
            )
        if problem is not None:
            self.errors[op] += 1
            if len(self.error_examples) < 20:
                self.error_examples.append(problem)

    async def _sample_rss(self) -> None:
        while True:
            self.rss.append((time.monotonic() - self.started, self.server.rss_mb()))
            await asyncio.sleep(self.config.rss_every)

    async def _report_progress(self) -> None:
        while self.progress is not None:
            elapsed = time.monotonic() - self.started
            recent = [s.ms for s in self.samples[-500:]]
            self.progress(
                elapsed=min(elapsed, self.config.seconds),
                total=self.config.seconds,
                ops=len(self.samples),
                errors=sum(self.errors.values()),
                rss=self.rss[-1][1] if self.rss else 0.0,
                p50=float(np.median(recent)) if recent else 0.0,
            )
            await asyncio.sleep(0.5)

    # -- checks and figures ---------------------------------------------------------------------
    def _missing_turns(self) -> int:
        """Acknowledged turns not in the store, read directly once the server has stopped: each
        user's SQLite file, or each user's memory in the PostgreSQL database."""
        missing = 0
        with stored_memories(self.server.home, self.config.database_url) as memories:
            for user, conversations in self.conversations.items():
                with memories.open(user) as memory:
                    for conversation in conversations:
                        texts = stored_texts(memory, conversation.conversation_id)
                        for k in range(conversation.acked):
                            expected = turn_text(user, conversation.number, k)
                            missing += k >= len(texts) or texts[k] != expected
        return missing

    def _report(self, missing: int, catch_up: float) -> LoadReport:
        seconds = self.config.seconds
        operations = {}
        for op in OPERATIONS:
            ms = np.array([s.ms for s in self.samples if s.op == op])
            if len(ms) == 0:
                continue
            operations[op] = {
                "count": int(len(ms)),
                "per_second": round(len(ms) / seconds, 1),
                "p50_ms": round(float(np.percentile(ms, 50)), 1),
                "p95_ms": round(float(np.percentile(ms, 95)), 1),
                "p99_ms": round(float(np.percentile(ms, 99)), 1),
                "max_ms": round(float(ms.max()), 1),
            }
        return LoadReport(
            config=asdict(self.config) | {"database_url": bool(self.config.database_url)},
            seconds=seconds,
            operations=operations,
            errors=self.errors,
            error_examples=self.error_examples,
            rss=rss_figures(self.rss),
            turns_acked=sum(c.acked for v in self.conversations.values() for c in v),
            acked_turns_missing=missing,
            index_catch_up_s=round(catch_up, 1),
            load_average=self.load_average,
            cpu_s=getattr(self, "cpu_s", {}),
            stolen=getattr(self, "stolen", None),
            samples=self.samples,
            rss_series=self.rss,
        )


def first_conversation(work: Path) -> int:
    """The number of this run's first conversation: where the last run in `work` stopped."""
    try:
        return int((work / NEXT_CONVERSATION).read_text())
    except (OSError, ValueError):
        return 0


def machine_times() -> tuple[int, int] | None:
    """(all, stolen) CPU time of the machine so far, in clock ticks (/proc/stat); None
    elsewhere than Linux."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(x) for x in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return sum(ticks), ticks[7] if len(ticks) > 7 else 0


def stolen_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[0] <= before[0]:
        return None
    return round((after[1] - before[1]) / (after[0] - before[0]), 3)


def foreign_marks(text: str, user: int) -> list[str]:
    """The markers in `text` that belong to a user other than `user`."""
    return [m.group(0) for m in USER_MARKS.finditer(text) if int(m.group(1) or m.group(2)) != user]


def history_text(user: int, conversation: int, turn: int) -> str:
    """A turn of a user's starting history: like the run's turns, with a BG- marker."""
    rng = random.Random(f"history/{user}/{conversation}/{turn}")
    return (
        f"Log BG-{user:03d}-{conversation * HISTORY_TURNS + turn}: the {rng.choice(KINDS)} at "
        f"{rng.choice(SITES)}, {rng.choice(SYMPTOMS)}; {rng.choice(PEOPLE)} plans "
        f"{rng.choice(TASKS)} in {rng.randint(2, 40)} hours."
    )


def build_history(home: Path, users: int, conversations: int) -> None:
    """Store and embed `conversations` conversations for each of `users` users under `home`,
    with the Python API as a backfill would; a user already built (a marker file) is skipped."""
    from datetime import UTC, datetime, timedelta

    from ireneo import Memory
    from ireneo.formats.gateway import parse_gateway_body
    from ireneo.server.memories import user_key

    for user in range(users):
        directory = home / "users" / user_key(user_name(user))
        done = directory / f".history-{conversations}"
        if done.exists():
            continue
        started = time.monotonic()
        with Memory(directory) as memory:
            batch = []
            for n in range(conversations):
                day = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=7 * n)
                body = {
                    "user": user_name(user),
                    "conversation_id": f"history-{user:03d}-{n:05d}",
                    "turns": [
                        {
                            "ts": (day + timedelta(minutes=k)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "role": "user" if k % 2 == 0 else "assistant",
                            "text": history_text(user, n, k),
                        }
                        for k in range(HISTORY_TURNS)
                    ],
                }
                batch.extend(parse_gateway_body(body)[2])
                if len(batch) >= 6000:
                    memory.store_turns(batch)
                    batch = []
            if batch:
                memory.store_turns(batch)
            memory.embed_pending()
        done.touch()
        sys.stderr.write(
            f"history: user {user + 1}/{users}, {conversations} conversations, "
            f"{time.monotonic() - started:.0f} s\n"
        )


def rss_figures(series: list[tuple[float, float]]) -> dict[str, float]:
    """Start, peak and end RSS, and the slope (MB per minute) of each half of the run."""
    if len(series) < 4:
        return {}
    t = np.array([s[0] for s in series])
    mb = np.array([s[1] for s in series])
    half = len(series) // 2

    def slope(a: np.ndarray, b: np.ndarray) -> float:
        return round(float(np.polyfit(a, b, 1)[0]) * 60, 2)

    return {
        "start_mb": round(float(mb[0]), 1),
        "peak_mb": round(float(mb.max()), 1),
        "end_mb": round(float(mb[-1]), 1),
        "first_half_slope_mb_per_min": slope(t[:half], mb[:half]),
        "second_half_slope_mb_per_min": slope(t[half:], mb[half:]),
        "second_half_growth_mb": round(float(mb[half:].max() - mb[half]), 1),
    }


def save(report: LoadReport, out: Path) -> Path:
    """latest.json, latest.md and load.png in `out`; returns the markdown's path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    plot(report, out / "load.png")
    c = report.config
    client = described(c.get("client", "fastmcp"))
    lines = [
        "# Load: concurrent ingest and recall against one server",
        "",
        f"{c['clients']} clients over {c['users']} users for {report.seconds:.0f} s on "
        f"127.0.0.1, {c['ingest_share']:.0%} ingest posts, the rest `recall_my_conversations` "
        f"over MCP ({client}), and {c.get('posters', 0)} clients only posting; each user "
        f"started with {c.get('conversations', 0)} conversations; "
        f"store: {'PostgreSQL' if c['database_url'] else 'SQLite (embedded)'}; "
        f"server processes: {c.get('workers', 1)}; "
        + (
            f"the clients' operations started at {c['rate']:g} a second in all, at random times. "
            if c.get("rate")
            else "each client calling back to back. "
        )
        + f"Clients and server share the machine ({os.cpu_count()} cores, 1-minute load average "
        f"{' then '.join(str(x) for x in report.load_average)} at the start and the end"
        + (
            f"; {report.stolen:.0%} of its CPU time given to the host's other guests in the run)."
            if report.stolen is not None
            else ")."
        ),
        "",
        "| operation | count | per second | p50 ms | p95 ms | p99 ms | max ms | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for op, f in report.operations.items():
        lines.append(
            f"| {op} | {f['count']} | {f['per_second']} | {f['p50_ms']} | {f['p95_ms']} | "
            f"{f['p99_ms']} | {f['max_ms']} | {report.errors.get(op, 0)} |"
        )
    r = report.rss
    ops = sum(f["count"] for f in report.operations.values()) or 1
    cpu = report.cpu_s
    lines += [
        "",
        f"CPU in the timed run: server {cpu.get('server')} s, clients {cpu.get('clients')} s "
        f"({1000 * cpu.get('server', 0) / ops:.1f} and {1000 * cpu.get('clients', 0) / ops:.1f} "
        "ms per operation).",
        "",
        f"Acknowledged turns: {report.turns_acked}, missing from the store afterwards: "
        f"{report.acked_turns_missing}. Index catch-up after the run: {report.index_catch_up_s} s.",
        "",
        f"Server RSS: {r.get('start_mb')} MB at the start, peak {r.get('peak_mb')} MB, "
        f"{r.get('end_mb')} MB at the end; slope {r.get('first_half_slope_mb_per_min')} MB/min "
        f"in the first half, {r.get('second_half_slope_mb_per_min')} MB/min in the second "
        f"(growth within the second half: {r.get('second_half_growth_mb')} MB).",
        "",
        "![RSS and latency over time](load.png)",
        "",
    ]
    if report.error_examples:
        lines += ["Errors (first few):", "", *[f"- {e}" for e in report.error_examples[:5]], ""]
    path = out / "latest.md"
    path.write_text("\n".join(lines))
    return path


def plot(report: LoadReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    if report.rss_series:
        t, mb = zip(*report.rss_series, strict=True)
        top.plot(t, mb, color="tab:purple")
    top.set_ylabel("server RSS (MB)")
    top.set_ylim(bottom=0)
    top.grid(alpha=0.3)
    bucket = max(1.0, report.seconds / 60)
    for op, color in zip(OPERATIONS, ("tab:blue", "tab:orange"), strict=True):
        samples = [s for s in report.samples if s.op == op]
        if not samples:
            continue
        edges = np.arange(0, report.seconds + bucket, bucket)
        at = np.array([s.at for s in samples])
        ms = np.array([s.ms for s in samples])
        mids, p50, p95 = [], [], []
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            inside = ms[(at >= lo) & (at < hi)]
            if len(inside):
                mids.append((lo + hi) / 2)
                p50.append(np.percentile(inside, 50))
                p95.append(np.percentile(inside, 95))
        bottom.plot(mids, p50, color=color, label=f"{op} p50")
        bottom.plot(mids, p95, color=color, linestyle="--", label=f"{op} p95")
    bottom.set_yscale("log")
    bottom.set_ylabel("latency (ms)")
    bottom.set_xlabel("seconds")
    bottom.grid(alpha=0.3, which="both")
    bottom.legend(loc="upper left", fontsize=8)
    c = report.config
    fig.suptitle(f"{c['clients']} clients, {c['users']} users: server RSS and latency")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def progress_printer(stream=sys.stderr) -> Callable[..., None]:
    """A one-line progress display: rewritten in place on a terminal, every 5 s otherwise."""
    last = [0.0]

    def show(*, elapsed, total, ops, errors, rss, p50):
        line = (
            f"load {elapsed:5.1f}/{total:.0f} s  ops {ops}  errors {errors}  "
            f"p50 {p50:.0f} ms  server RSS {rss:.0f} MB"
        )
        if stream.isatty():
            stream.write("\r" + line)
            stream.flush()
        elif time.monotonic() - last[0] >= 5:
            stream.write(line + "\n")
            last[0] = time.monotonic()

    return show


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="concurrent ingest and recall against a server")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--ingest-share", type=float, default=0.5)
    parser.add_argument("--posters", type=int, default=0, help="more clients that only post")
    parser.add_argument(
        "--conversations", type=int, default=0, help="each user's history before the run"
    )
    parser.add_argument("--database-url", help="run against PostgreSQL (IRENEO_DATABASE_URL)")
    parser.add_argument(
        "--workers", type=int, default=1, help="server processes (ireneo serve --workers)"
    )
    parser.add_argument(
        "--client", choices=CLIENTS, default="fastmcp", help="the agents' MCP client [fastmcp]"
    )
    parser.add_argument(
        "--env", action="append", default=[], help="IRENEO_NAME=VALUE for the server (repeat)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="the clients' operations a second in all, at random times [0: back to back]",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/load"))
    parser.add_argument("--work", type=Path, help="where the server's home goes [a temp dir]")
    args = parser.parse_args(argv)
    env = dict(item.partition("=")[::2] for item in args.env)
    if any(not name.startswith("IRENEO_") or not value for name, value in env.items()):
        parser.error(f"--env {' '.join(args.env)}: give IRENEO_NAME=VALUE")
    if not 0 <= args.rate < float("inf"):
        parser.error(f"--rate {args.rate:g}: give operations a second, 0 or more")
    report = run_load(
        LoadConfig(
            clients=args.clients,
            users=args.users,
            seconds=args.seconds,
            ingest_share=args.ingest_share,
            posters=args.posters,
            conversations=args.conversations,
            database_url=args.database_url,
            workers=args.workers,
            client=args.client,
            env=env,
            rate=args.rate,
        ),
        args.out,
        args.work,
    )
    return 0 if report.total_errors == 0 and report.acked_turns_missing == 0 else 1


def run_load(config: LoadConfig, out: Path, work: Path | None = None) -> LoadReport:
    """Run, save the report under `out`, print the markdown; the CLI's and the script's door."""
    import tempfile

    work = work or Path(tempfile.mkdtemp(prefix="ireneo-load-"))
    report = LoadRun(config, work, progress=progress_printer()).run()
    sys.stderr.write("\n")
    print(save(report, out).read_text())
    return report


if __name__ == "__main__":
    raise SystemExit(main())
