"""Many users, cold memories, replicas: the workload of a chat product against real servers.

    nice python bench/many_users.py --users 200 --store sqlite --seconds 60
    nice python bench/many_users.py --users 200 --store postgres --replicas 2 --kill-at 30

N users get a history each from the generator (ireneo.benchmark.generate), sized by a long tail:
most users 5-50 conversations (log-uniform), `--big-users` of `--big-size`. Every conversation
is posted whole through `POST /turns` (the gateway's door) to a real `ireneo serve` on
127.0.0.1, in a shuffled order, by `--posters` concurrent posters; then, once indexed,
`--clients` concurrent MCP clients (fastmcp over streamable HTTP, a real token per call: each
client keeps one session and sends the token of the user it speaks for; `--client raw`: raw
JSON-RPC posts instead, ireneo.benchmark.clients) ask
`recall_my_conversations` for users drawn by a Zipf law (`--zipf`; the users' ranks are a
shuffle), with one of the user's own questions, for `--seconds`: back to back, or (`--pace S`)
each pausing a random time of mean S seconds before each of its recalls, as an agent waits for
its user's next turn (so the clients' first calls do not all land in the same instant either). Back to back, a recall's latency is mostly queueing (clients ÷ throughput);
paced, it is what one recall costs when the servers are not saturated. Meanwhile a gateway keeps
posting (`--ingest-rate` posts a second, growing conversations for Zipf-drawn users); each of
those posts is a probe of freshness: the time from its 202 to a recall that finds its marker
(keyword search) and to its vectors being stored (search by meaning).

On PostgreSQL (`--store postgres`) the database is a cluster of its own (tests/pg_cluster.py,
durable: fsync on) and `--replicas` servers share it; client i speaks to replica i mod R, and
moves to the next replica when its own refuses connections. `--kill-at S` sends SIGKILL to the
last replica S seconds into the recall phase: the run then checks that every acknowledged post
is stored, that the dead replica's users are indexed by another one, and counts the calls that
failed against the requests in flight at the kill.

`--workers N` starts each server as N processes on one port (`ireneo serve --workers N`); its
RSS is then its largest process's, its CPU and open files all of theirs.

`--late-big N` posts N more users of `--late-size` conversations during the recall phase (new
names each run, outside the Zipf draw), so the server has a long backfill to index while the
probes measure how long everyone else's posts wait for their vectors.

At start (a server on a home that already holds the memories: `--reuse`), the run waits for the
indexer's start-up catch-up and records how long it took, how many memories it opened, and the
server's RSS and open files then.

A recall is cold when the server opened the user's memory for it (the registry logs each open,
`memory_open`; a recall is matched to an open of its user inside its own span).

The servers' heap trims (`memory_trim`: how many, their CPU, what they gave back) are summed,
and once the servers have stopped, one pass of the hourly memory expiry over every user is timed
with the memories it opened.

Writes `<store>-<users>.json` (the figures; each call and sample is drawn in the plot), `.md` and
`.png` under `--out`, and a summary table of every run
there (`README.md`). Clients and servers share the machine: compare runs of one session.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import numpy as np

from ireneo.benchmark.clients import CLIENTS, client_class, described
from ireneo.benchmark.generate import generate
from ireneo.benchmark.server_process import INGEST_KEY, ServerProcess, process_tree
from ireneo.benchmark.traffic import Conversation, marker, turn_text, user_name
from ireneo.server.memories import user_key

REPO = Path(__file__).resolve().parents[1]

TOOL = "recall_my_conversations"
OUT = REPO / "bench" / "results" / "many-users"


@dataclass
class Config:
    users: int = 100
    store: str = "sqlite"  # or "postgres"
    replicas: int = 1
    workers: int = 1  # processes of each server (`ireneo serve --workers`)
    clients: int = 20
    seconds: float = 60.0
    small_min: int = 5
    small_max: int = 50
    big_users: int = 2
    big_size: int = 2000
    zipf: float = 1.0
    ingest_rate: float = 2.0  # probe posts a second during the recall phase
    posters: int = 8
    pace: float = 0.0  # each client's mean pause between its recalls, seconds (0: none)
    seed: int = 29
    model: str | None = None
    kill_at: float | None = None  # seconds into the recall phase; PostgreSQL with 2+ replicas
    late_big: int = 0  # users posted during the recall phase
    late_size: int = 300  # their conversations
    label: str = ""
    server_env: dict[str, str] = field(default_factory=dict)
    client: str = "fastmcp"  # the MCP client, by name (ireneo.benchmark.clients)


# -- the users ------------------------------------------------------------------------------


@dataclass
class User:
    number: int
    name: str
    key: str
    conversations: int
    bodies: list[bytes]  # each conversation's POST /turns body, JSON
    questions: list[tuple[str, str]]  # (short query, answer)
    token: str = ""


def history_sizes(config: Config) -> list[int]:
    """Most users log-uniform in [small_min, small_max], `big_users` of `big_size`."""
    rng = random.Random(f"many-users/sizes/{config.seed}")
    lo, hi = config.small_min, config.small_max
    sizes = [round(lo * (hi / lo) ** rng.random()) for _ in range(config.users)]
    for i in rng.sample(range(config.users), min(config.big_users, config.users)):
        sizes[i] = config.big_size
    return sizes


def make_user(number: int, size: int) -> User:
    name = user_name(number)
    history = generate(size, seed=number, questions=8)
    by_session: dict[str, list] = defaultdict(list)
    for turn in history.turns:
        by_session[turn.session_id].append(turn)
    bodies = []
    for sid, turns in by_session.items():
        body = {
            "user": name,
            "conversation_id": sid,
            "turns": [
                {
                    "id": t.turn_uuid,
                    "ts": t.ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "role": t.role,
                    "text": t.text,
                }
                for t in turns
            ],
        }
        bodies.append(json.dumps(body).encode())
    questions = [(q.short, q.answer) for q in history.questions]
    return User(number, name, user_key(name), size, bodies, questions)


class Zipf:
    """Draws user numbers: the user of rank r with weight 1 / r**s (ranks are a shuffle)."""

    def __init__(self, users: int, s: float, seed: int):
        order = list(range(users))
        random.Random(f"many-users/zipf/{seed}").shuffle(order)
        self.order = order
        weights = 1.0 / np.arange(1, users + 1) ** s
        self.cumulative = list(np.cumsum(weights / weights.sum()))

    def draw(self, rng: random.Random) -> int:
        rank = min(bisect.bisect_left(self.cumulative, rng.random()), len(self.order) - 1)
        return self.order[rank]


class Bearer(httpx2.Auth):
    """A bearer token that can change between calls: one MCP session speaks for many users,
    each call with that user's own token (the server is stateless between requests)."""

    def __init__(self) -> None:
        self.token = ""

    def auth_flow(self, request):
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def refused(exc: BaseException) -> bool:
    """Whether a failure was a refused connection (nothing sent): a client may try elsewhere."""
    todo: list[BaseException] = [exc]
    seen: set[int] = set()
    while todo:
        e = todo.pop()
        if id(e) in seen:  # a chain of causes may loop
            continue
        seen.add(id(e))
        if isinstance(e, httpx2.ConnectError | ConnectionRefusedError):
            return True
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return False


# -- the store behind the servers -----------------------------------------------------------


class Backend:
    """Where the memories live, and what the run reads of them directly."""

    def __init__(self, config: Config, work: Path):
        self.config = config
        self.work = work
        self.cluster = None
        self.database = None
        self.baseline_bytes = 0
        if config.store == "postgres":
            sys.path.insert(
                0, str(REPO)
            )  # the tests' PostgreSQL cluster, for a script run as a file
            from tests import pg_cluster

            missing = pg_cluster.available()
            if missing:
                raise SystemExit(missing)
            self.cluster = pg_cluster.Cluster(durable=True)
            self.database = pg_cluster.prepare(self.cluster.url)
            self.baseline_bytes = self._database_bytes()

    @property
    def app_url(self) -> str | None:
        return self.database.app_url if self.database else None

    def _sql(self, query: str, args: tuple = ()) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.database.superuser_url, autocommit=True) as conn:
            return conn.execute(query, args).fetchall()

    def _database_bytes(self) -> int:
        return int(self._sql("SELECT pg_database_size(current_database())")[0][0])

    def pending(self, key: str) -> int:
        """The user's passages with no vector yet."""
        if self.database is not None:
            return int(
                self._sql(
                    "SELECT count(*) FROM ireneo.passages WHERE user_id = %s AND embedding IS NULL",
                    (key,),
                )[0][0]
            )
        path = self.work / "home" / "users" / key / "memory.db"
        if not path.exists():
            return -1
        with contextlib.closing(
            sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        ) as db:
            return db.execute(
                "SELECT count(*) FROM passages p LEFT JOIN vectors v ON v.passage_id = p.id "
                "WHERE v.passage_id IS NULL"
            ).fetchone()[0]

    def jobs(self) -> int:
        """Users with index work queued in the database (PostgreSQL)."""
        return int(self._sql("SELECT count(*) FROM ireneo.index_jobs")[0][0])

    def connections(self) -> int:
        return int(
            self._sql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'ireneo_app'")[0][0]
        )

    def stored_texts(self, key: str, conversation_id: str) -> list[str]:
        if self.database is not None:
            rows = self._sql(
                "SELECT blocks FROM ireneo.turns WHERE user_id = %s AND session_id = %s "
                "ORDER BY seq",
                (key, conversation_id),
            )
            return [_text_of(row[0]) for row in rows]
        path = self.work / "home" / "users" / key / "memory.db"
        with contextlib.closing(
            sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        ) as db:
            rows = db.execute(
                "SELECT blocks FROM turns WHERE session_id = ? ORDER BY seq", (conversation_id,)
            ).fetchall()
        return [_text_of(row[0]) for row in rows]

    def disk(self, users: list[User]) -> dict:
        """Bytes per user: each SQLite file (with its WAL), or the database's growth."""
        conversations = sum(u.conversations for u in users)
        if self.database is not None:
            total = self._database_bytes() - self.baseline_bytes
            tables = {
                name: int(size)
                for name, size in self._sql(
                    "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'ireneo' AND c.relkind = 'r' ORDER BY 2 DESC"
                )
            }
            return {
                "total_bytes": total,
                "per_user_bytes": round(total / len(users)),
                "per_conversation_bytes": round(total / conversations),
                "tables_bytes": tables,
            }
        sizes, left = {}, 0
        for user in users:
            directory = self.work / "home" / "users" / user.key
            left += sum(f.stat().st_size for f in directory.glob("*") if f.is_file())
            # as it stands once checkpointed: a stopped server may leave a write-ahead log
            with contextlib.closing(sqlite3.connect(directory / "memory.db")) as db:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            sizes[user.number] = sum(f.stat().st_size for f in directory.glob("*") if f.is_file())
        total = sum(sizes.values())
        small = [sizes[u.number] for u in users if u.conversations <= self.config.small_max]
        return {
            "total_bytes": total,
            "per_user_bytes": round(total / len(users)),
            "per_conversation_bytes": round(total / conversations),
            "small_user_median_bytes": int(np.median(small)) if small else None,
            "largest_user_bytes": max(sizes.values()),
            "left_by_the_server_bytes": left,
        }

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


def _text_of(blocks: object) -> str:
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return "\n".join(text for _kind, text, _tool in blocks)  # type: ignore[union-attr]


# -- the run --------------------------------------------------------------------------------


@dataclass
class Call:
    at: float  # seconds since the recall phase began
    ms: float
    replica: int
    user: int
    ok: bool
    found: bool


@dataclass
class Probe:
    user: int
    conversation: str
    turns: int
    replica: int
    acked_at: float
    keyword_s: float | None = None
    keyword_first: bool = False
    meaning_s: float | None = None


def proc_figures(pid: int) -> tuple[float, int, float]:
    """RSS (MB) of the largest process, open files and CPU seconds (user + system) of all, of a
    server and its workers (`--workers`: each worker is a process of its own)."""
    rss, fds, cpu = 0.0, 0, 0.0
    for each in process_tree(pid):
        try:
            status = Path(f"/proc/{each}/status").read_text()
            fds += len(os.listdir(f"/proc/{each}/fd"))
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # a worker that has just ended
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss = max(rss, int(line.split()[1]) / 1024)
        cpu += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss, fds, cpu


class Run:
    def __init__(self, config: Config, work: Path, progress, *, reuse: bool = False):
        self.config = config
        self.reuse = reuse  # keep the posted histories in `work` and start from them next time
        self.first_conversation = 0
        self.work = work
        self.progress = progress
        self.backend = Backend(config, work)
        replicas = config.replicas if config.store == "postgres" else 1
        env = {"IRENEO_RECALL_TIMEOUT": "30", **config.server_env}
        if config.model:
            env["IRENEO_MODEL"] = config.model
        self.servers = [
            ServerProcess(
                home=work / "home",
                database_url=self.backend.app_url,
                env_extra=env,
                log_path=work / f"server-{config.label or config.store}-{i}.log",
                args=("--workers", str(config.workers)) if config.workers > 1 else (),
            )
            for i in range(replicas)
        ]
        self.dead: set[int] = set()
        self.users: list[User] = []
        self.calls: list[Call] = []
        self.probes: list[Probe] = []
        self.series: list[dict] = []  # sampled figures of each server over time
        self.inflight = defaultdict(int)  # per replica, requests sent and not answered
        self.errors: dict[str, int] = defaultdict(int)
        self.error_examples: list[str] = []
        self.failovers = 0
        self.kill: dict | None = None
        self.phase_start = 0.0
        self.figures: dict = {}
        self.run_number = 0  # runs on the same posted histories before this one (--reuse)
        self.late: list[User] = []
        self.late_posted = 0

    def backfill_key(self) -> dict:
        c = self.config
        return {
            "store": c.store,
            "users": c.users,
            "seed": c.seed,
            "sizes": [c.small_min, c.small_max, c.big_users, c.big_size],
            "model": c.model,
        }

    # -- helpers ------------------------------------------------------------------------------
    def live(self, preferred: int) -> int:
        for step in range(len(self.servers)):
            i = (preferred + step) % len(self.servers)
            if i not in self.dead:
                return i
        raise RuntimeError("every replica is down")

    def note_error(self, kind: str, text: str) -> None:
        self.errors[kind] += 1
        if len(self.error_examples) < 20:
            self.error_examples.append(f"{kind}: {text[:160]}")

    def cpu(self) -> list[float]:
        """CPU seconds of each server so far (a killed one: its last sample)."""
        out = []
        for i, s in enumerate(self.servers):
            if s.alive():
                out.append(proc_figures(s.process.pid)[2])
            else:
                out.append(max((row.get(f"cpu{i}", 0.0) for row in self.series), default=0.0))
        return out

    # -- phases -------------------------------------------------------------------------------
    def run(self) -> dict:
        cfg = self.config
        t0 = time.monotonic()
        sizes = history_sizes(cfg)
        task = self.progress.add_task("generating histories", total=cfg.users)
        for n, size in enumerate(sizes):
            self.users.append(make_user(n, size))
            self.progress.advance(task)
        generated_s = time.monotonic() - t0
        for server in self.servers:
            if server.log_path is not None:
                server.log_path.unlink(missing_ok=True)  # this run's events only
            server.start(timeout=120)
        for user in self.users:
            user.token = self.servers[0].token(user.name)
        saved = self.work / "backfill.json"
        reused = json.loads(saved.read_text()) if self.reuse and saved.exists() else None
        if reused is not None and reused["key"] != self.backfill_key():
            raise SystemExit(f"{saved} was posted with other settings: {reused['key']}")
        try:
            idle = [proc_figures(s.process.pid) for s in self.servers]
            cpu0 = self.cpu()
            t1 = time.monotonic()
            if reused is None:
                asyncio.run(self.backfill())
                posted_s = time.monotonic() - t1
                self.wait_indexed(timeout=6 * 3600)
                indexed_s = time.monotonic() - t1
                cpu1 = self.cpu()
                backfill_cpu_s = sum(cpu1) - sum(cpu0)
                if self.reuse:
                    saved.write_text(
                        json.dumps(
                            {
                                "key": self.backfill_key(),
                                "posted_s": posted_s,
                                "indexed_s": indexed_s,
                                "backfill_cpu_s": backfill_cpu_s,
                                "post_ms": self.post_ms,
                                "runs": 1,
                            }
                        )
                    )
            else:  # the same histories, posted and indexed by an earlier run
                posted_s, indexed_s = reused["posted_s"], reused["indexed_s"]
                backfill_cpu_s, self.post_ms = reused["backfill_cpu_s"], reused["post_ms"]
                self.first_conversation = 1000 * reused["runs"]  # a post's day: its number
                self.run_number = reused["runs"]
                reused["runs"] += 1
                saved.write_text(json.dumps(reused))
                cpu1 = self.cpu()
            # a server started on memories posted before (on a fresh home: nothing to catch up)
            startup = self.startup() if reused is not None else []
            self.wait_indexed(timeout=3600)  # the start-up catch-up's work, if any
            after_backfill = [proc_figures(s.process.pid) for s in self.servers]
            self.make_late_users()
            asyncio.run(self.recall_phase())
            cpu2 = self.cpu()
            end = [proc_figures(s.process.pid) if s.alive() else None for s in self.servers]
            t3 = time.monotonic()
            self.wait_indexed(timeout=1800)
            catch_up_s = time.monotonic() - t3
            asyncio.run(self.meaning_probes_settle())
        finally:
            for i, server in enumerate(self.servers):
                if i not in self.dead:
                    server.stop()
        turns = sum(len(json.loads(b)["turns"]) for u in self.users for b in u.bodies)
        self.figures["expiry_pass"] = self.expiry_pass()
        self.figures.update(
            generated_s=round(generated_s, 1),
            posted_s=round(posted_s, 1),
            indexed_s=round(indexed_s, 1),
            catch_up_s=round(catch_up_s, 1),
            turns=turns,
            conversations=sum(u.conversations for u in self.users),
            backfill_cpu_s=round(backfill_cpu_s, 1),
            reused_backfill=reused is not None,
            recall_cpu_s=round(sum(cpu2) - sum(cpu1), 1),
            idle=[{"rss_mb": round(r, 1), "fds": f} for r, f, _ in idle],
            after_backfill=[{"rss_mb": round(r, 1), "fds": f} for r, f, _ in after_backfill],
            startup=startup,
            late_big={
                "users": len(self.late),
                "conversations": sum(u.conversations for u in self.late),
                "posted": self.late_posted,
                "left_unindexed": sum(self.backend.pending(u.key) > 0 for u in self.late),
            },
            at_end=[{"rss_mb": round(e[0], 1), "fds": e[1]} if e else None for e in end],
        )
        try:
            return self.report()
        finally:
            self.backend.close()

    def startup(self, timeout: float = 900.0) -> list[dict]:
        """Each server's start: until its indexer's catch-up has looked at every memory (its
        `index_catch_up` event, or no memory opened for 3 s), then how long that took from
        `server_start`, the memories opened, RSS and open files."""
        out = []
        for server in self.servers:
            began = time.monotonic()
            deadline = began + timeout
            last, quiet_since = -1, began
            while time.monotonic() < deadline:
                events = self._events_of(server)
                if any(e.get("event") == "index_catch_up" for e in events):
                    break
                opens = sum(e.get("event") == "memory_open" for e in events)
                if opens != last:
                    last, quiet_since = opens, time.monotonic()
                elif time.monotonic() - quiet_since >= 3 and (opens or quiet_since - began > 30):
                    break
                time.sleep(0.2)
            events = self._events_of(server)
            begun = [_ts(e["ts"]) for e in events if e.get("event") == "server_start"]
            caught = [e for e in events if e.get("event") == "index_catch_up"]
            opened = [_ts(e["ts"]) for e in events if e.get("event") == "memory_open"]
            ends = [_ts(e["ts"]) for e in caught] or opened[-1:]
            rss, fds, _ = proc_figures(server.process.pid)
            out.append(
                {
                    "catch_up_s": round(ends[0] - begun[0], 3) if begun and ends else None,
                    "users_scheduled": caught[0].get("users") if caught else 0,
                    "memories_checked": caught[0].get("checked") if caught else None,
                    "opened": len(opened),
                    "rss_mb": round(rss, 1),
                    "fds": fds,
                }
            )
        return out

    def _events_of(self, server: ServerProcess) -> list[dict]:
        if server.log_path is None or not server.log_path.exists():
            return []
        events = []
        for line in server.log_path.read_text().splitlines():
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):
                    events.append(json.loads(line))
        return events

    def make_late_users(self) -> None:
        """`late_big` users, named anew for each run on the same histories."""
        first = self.config.users + 1000 * (self.run_number + 1)
        self.late = [
            make_user(first + i, self.config.late_size) for i in range(self.config.late_big)
        ]
        for user in self.late:
            user.token = self.servers[0].token(user.name)

    async def late_backfill(self, deadline: float) -> None:
        """Post the late users' histories, 4 at a time, until done or the phase ends."""
        queue = [(u, body) for u in self.late for body in u.bodies]
        async with httpx2.AsyncClient(
            timeout=120, headers={"x-ingest-key": INGEST_KEY, "content-type": "application/json"}
        ) as http:

            async def poster(n: int) -> None:
                while queue and time.monotonic() < deadline:
                    _user, body = queue.pop(0)
                    try:
                        r = await http.post(f"{self.servers[self.live(n)].url}/turns", content=body)
                    except httpx2.HTTPError as exc:
                        self.note_error("late", repr(exc))
                        continue
                    if r.status_code == 202:
                        self.late_posted += 1
                    else:
                        self.note_error("late", f"{r.status_code} {r.text[:100]}")

            await asyncio.gather(*(poster(n) for n in range(4)))

    async def backfill(self) -> None:
        order = [(u.number, c) for u in self.users for c in range(len(u.bodies))]
        random.Random(f"many-users/order/{self.config.seed}").shuffle(order)
        queue: asyncio.Queue = asyncio.Queue()
        for item in order:
            queue.put_nowait(item)
        task = self.progress.add_task("posting histories", total=len(order))
        self.post_ms: list[float] = []
        limits = httpx2.Limits(max_connections=self.config.posters * 2 + 4)
        async with httpx2.AsyncClient(
            timeout=120,
            headers={"x-ingest-key": INGEST_KEY, "content-type": "application/json"},
            limits=limits,
        ) as http:

            async def poster(n: int) -> None:
                while not queue.empty():
                    u, c = queue.get_nowait()
                    body = self.users[u].bodies[c]
                    for _attempt in range(20):
                        replica = self.live(n)
                        started = time.perf_counter()
                        try:
                            r = await http.post(f"{self.servers[replica].url}/turns", content=body)
                        except httpx2.HTTPError as exc:
                            self.note_error("backfill", repr(exc))
                            await asyncio.sleep(0.5)
                            continue
                        if r.status_code == 202:
                            self.post_ms.append((time.perf_counter() - started) * 1000)
                            break
                        if r.status_code != 429:
                            self.note_error("backfill", f"{r.status_code} {r.text}")
                        await asyncio.sleep(0.2)
                    self.progress.advance(task)

            await asyncio.gather(*(poster(n) for n in range(self.config.posters)))

    def wait_indexed(self, timeout: float) -> None:
        """Until no replica indexes and (PostgreSQL) no job is queued, for 2 s in a row."""
        task = self.progress.add_task("indexing", total=None)
        deadline = time.monotonic() + timeout
        quiet_since = None
        while time.monotonic() < deadline:
            busy = 0
            for i, server in enumerate(self.servers):
                if i in self.dead:
                    continue
                health = server.health()
                busy += 1 if health is None else int(health.get("indexing", 0))
            if self.backend.database is not None:
                busy += self.backend.jobs()
            self.progress.update(task, description=f"indexing ({busy} busy)")
            if busy == 0:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= 2:
                    self.progress.update(task, total=1, completed=1)
                    return
            else:
                quiet_since = None
            time.sleep(0.25)
        raise TimeoutError("the servers kept indexing")

    async def recall_phase(self) -> None:
        Client = client_class(self.config.client)
        cfg = self.config
        zipf = Zipf(cfg.users, cfg.zipf, cfg.seed)
        self.phase_start = time.monotonic()
        deadline = self.phase_start + cfg.seconds
        task = self.progress.add_task("recall under ingest", total=cfg.seconds)

        async def client(n: int) -> None:
            rng = random.Random(f"many-users/client/{cfg.seed}/{n}")
            bearer = Bearer()
            sessions: dict[int, Client] = {}
            home = n % len(self.servers)
            try:
                while time.monotonic() < deadline:
                    u = zipf.draw(rng)
                    user = self.users[u]
                    if not user.questions:
                        continue
                    query, answer = rng.choice(user.questions)
                    if cfg.pace:  # an agent waits for its user's turn (the first one too)
                        await asyncio.sleep(rng.expovariate(1 / cfg.pace))
                    await self._recall_call(
                        Client, sessions, bearer, home, user, query, answer, record=True
                    )
            finally:
                for session in sessions.values():
                    with contextlib.suppress(Exception):  # a dead replica's session
                        await session.__aexit__(None, None, None)

        async def ticker() -> None:
            while time.monotonic() < deadline:
                self.progress.update(task, completed=time.monotonic() - self.phase_start)
                await asyncio.sleep(0.5)
            self.progress.update(task, completed=cfg.seconds)

        jobs = [client(n) for n in range(cfg.clients)]
        jobs += [ticker(), self.sampler(deadline), self.gateway(zipf, deadline)]
        if self.late:
            jobs.append(self.late_backfill(deadline))
        if cfg.kill_at is not None and len(self.servers) > 1:
            jobs.append(self.killer())
        await asyncio.gather(*jobs)

    async def _recall_call(
        self, Client, sessions, bearer, home, user, query, answer, *, record: bool
    ) -> tuple[bool, str]:
        """One recall for `user`, moving to the next replica when this one refuses connections;
        returns (answered, text)."""
        for _attempt in range(len(self.servers) + 1):
            replica = self.live(home)
            session = sessions.get(replica)
            bearer.token = user.token
            if session is None:
                session = Client(f"{self.servers[replica].url}/mcp", auth=bearer, timeout=30)
                try:
                    await session.__aenter__()
                except Exception as exc:  # noqa: BLE001
                    if refused(exc):
                        self.dead.add(replica)
                        self.failovers += 1
                        continue
                    self.note_error("connect", f"{type(exc).__name__}: {exc}")
                    return False, ""
                sessions[replica] = session
            bearer.token = user.token
            started = time.perf_counter()
            self.inflight[replica] += 1
            try:
                result = await session.call_tool(TOOL, {"query": query}, raise_on_error=False)
            except Exception as exc:  # noqa: BLE001 - the client's view: any failure counts
                sessions.pop(replica, None)
                if not self.servers[replica].alive():
                    self.dead.add(replica)
                if refused(exc):  # never sent: try the next replica
                    self.dead.add(replica)
                    self.failovers += 1
                    continue
                self.note_error("recall", f"{type(exc).__name__}: {exc}")
                if record:
                    self.calls.append(self._call(started, replica, user, False, False))
                return False, ""
            finally:
                self.inflight[replica] -= 1
            text = result.content[0].text if result.content else ""
            ok = not result.is_error
            if not ok:
                self.note_error("recall", text)
            if record:
                self.calls.append(self._call(started, replica, user, ok, answer in text))
            return ok, text
        self.note_error("recall", "no replica answered")
        return False, ""

    def _call(self, started: float, replica: int, user: User, ok: bool, found: bool) -> Call:
        ms = (time.perf_counter() - started) * 1000
        at = time.monotonic() - self.phase_start
        return Call(round(at, 3), round(ms, 2), replica, user.number, ok, found)

    async def gateway(self, zipf: Zipf, deadline: float) -> None:
        """Posts growing conversations at `ingest_rate` a second; each post is a probe."""
        Client = client_class(self.config.client)

        rng = random.Random(f"many-users/gateway/{self.config.seed}")
        conversations: dict[int, Conversation] = {}
        probes: list[asyncio.Task] = []
        idle: list[tuple[dict, Bearer]] = []  # probes' MCP sessions, each used by one at a time
        number = self.first_conversation
        async with httpx2.AsyncClient(timeout=60, headers={"x-ingest-key": INGEST_KEY}) as http:
            k = 0
            while time.monotonic() < deadline:
                u = zipf.draw(rng)
                conversation = conversations.get(u)
                if conversation is None or conversation.turns >= 12:
                    conversation = conversations[u] = Conversation(user=u, number=number)
                    number += 1
                body = conversation.grow()
                k += 1
                replica_home = k % len(self.servers)
                probe = await self._post(http, body, replica_home, conversation)
                if probe is not None:
                    probes.append(asyncio.create_task(self.probe(probe, Client, idle)))
                await asyncio.sleep(rng.expovariate(self.config.ingest_rate))
            self.conversations = list(conversations.values())
            self.all_conversations = conversations
            await asyncio.gather(*probes, return_exceptions=True)
        for sessions, _ in idle:
            for session in sessions.values():
                with contextlib.suppress(Exception):
                    await session.__aexit__(None, None, None)

    async def _post(self, http, body: dict, home: int, conversation) -> Probe | None:
        for _attempt in range(len(self.servers) + 3):
            replica = self.live(home)
            self.inflight[replica] += 1
            try:
                r = await http.post(f"{self.servers[replica].url}/turns", json=body)
            except httpx2.ConnectError:
                self.dead.add(replica)
                self.failovers += 1
                continue
            except httpx2.HTTPError as exc:  # sent, then lost: an error; the gateway resends
                self.note_error("ingest", f"{type(exc).__name__}: {exc}")
                if not self.servers[replica].alive():
                    self.dead.add(replica)
                continue
            finally:
                self.inflight[replica] -= 1
            if r.status_code == 202:
                conversation.acked = max(conversation.acked, len(body["turns"]))
                return Probe(
                    conversation.user,
                    conversation.conversation_id,
                    len(body["turns"]),
                    replica,
                    time.monotonic(),
                )
            self.note_error("ingest", f"{r.status_code} {r.text}")
            await asyncio.sleep(0.2)
        return None

    async def probe(self, probe: Probe, Client, idle: list) -> None:
        """Time to a recall that finds the new turn's marker, then to its vectors."""
        self.probes.append(probe)
        user = self.users[probe.user]
        wanted = marker(probe.user, int(probe.conversation.rsplit("-", 1)[1]), probe.turns - 1)
        sessions, bearer = idle.pop() if idle else ({}, Bearer())
        for attempt in range(100):
            ok, text = await self._recall_call(
                Client, sessions, bearer, probe.replica, user, wanted, wanted, record=False
            )
            if ok and wanted in text:
                probe.keyword_s = round(time.monotonic() - probe.acked_at, 3)
                probe.keyword_first = attempt == 0
                break
            await asyncio.sleep(0.05)
        idle.append((sessions, bearer))
        await self._until_embedded(probe)

    async def _until_embedded(self, probe: Probe, timeout: float = 120.0) -> None:
        key = self.users[probe.user].key
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pending = await asyncio.to_thread(self.backend.pending, key)
            if pending == 0:
                probe.meaning_s = round(time.monotonic() - probe.acked_at, 3)
                return
            await asyncio.sleep(0.1)

    async def meaning_probes_settle(self) -> None:
        """Probes still waiting for vectors when the phase ended (after the catch-up)."""
        waiting = [p for p in self.probes if p.meaning_s is None]
        await asyncio.gather(*(self._until_embedded(p, 30) for p in waiting))

    async def sampler(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            row: dict = {"at": round(time.monotonic() - self.phase_start, 2)}
            for i, server in enumerate(self.servers):
                if server.alive():
                    rss, fds, cpu = proc_figures(server.process.pid)
                    row[f"rss{i}"], row[f"fds{i}"], row[f"cpu{i}"] = round(rss, 1), fds, cpu
            if self.backend.database is not None:
                row["connections"] = await asyncio.to_thread(self.backend.connections)
            self.series.append(row)
            await asyncio.sleep(0.5)

    async def killer(self) -> None:
        await asyncio.sleep(self.config.kill_at)
        victim = len(self.servers) - 1
        inflight = self.inflight[victim]
        errors_before = sum(self.errors.values())
        at = time.monotonic() - self.phase_start
        await asyncio.to_thread(self.servers[victim].kill)  # its clients learn by failing
        self.kill = {
            "replica": victim,
            "at_s": round(at, 2),
            "in_flight": inflight,
            "errors_before": errors_before,
        }

    def expiry_pass(self) -> dict:
        """One pass of the server's hourly memory expiry over every user, run here once the
        servers have stopped (MemoryExpiry, the default policy; no user has an explicit memory
        to expire): its time, this process's CPU, and the memories it opened."""
        from ireneo.config import MemoryPolicy
        from ireneo.server.expiry import MemoryExpiry
        from ireneo.server.memories import OpenMemories

        pool = None
        if self.backend.database is not None:
            from ireneo.store.postgres import open_pool

            pool = open_pool(self.backend.app_url, max_size=2)
        registry = OpenMemories(
            self.work / "home" / "users", capacity=2048, budget_bytes=256 << 20, database=pool
        )
        job = MemoryExpiry(registry, MemoryPolicy(), lambda: datetime.now(UTC), 3600)
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            job.run_once()
        finally:
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            registry.close_all()
            if pool is not None:
                pool.close()
        return {"s": round(wall, 2), "cpu_s": round(cpu, 2), "opened": registry.opened}

    # -- figures ------------------------------------------------------------------------------
    def server_events(self) -> list[dict]:
        events = []
        for i, server in enumerate(self.servers):
            if server.log_path is None or not server.log_path.exists():
                continue
            for line in server.log_path.read_text().splitlines():
                if line.startswith("{"):
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    event["replica"] = i
                    events.append(event)
        return events

    def cold_share(self) -> dict:
        """Recalls on the servers that opened their user's memory (a `memory_open` of the same
        user, on the same replica, inside the recall's span)."""
        events = self.server_events()
        opens = defaultdict(list)
        for e in events:
            if e.get("event") == "memory_open":
                opens[(e["replica"], e["user_key"])].append(_ts(e["ts"]))
        cold_ms, warm_ms, colds = [], [], []
        for e in events:
            if e.get("event") != "recall" or e.get("outcome") is None:
                continue
            end = _ts(e["ts"])
            start = end - e["ms"] / 1000 - 0.002
            times = opens.get((e["replica"], e.get("user_key")), [])
            cold = any(start <= t <= end + 0.002 for t in times)
            (cold_ms if cold else warm_ms).append(e["ms"])
            colds.append((end, cold))
        open_ms = [e["ms"] for e in events if e.get("event") == "memory_open"]
        total = len(cold_ms) + len(warm_ms)
        colds.sort()
        later = [cold for _, cold in colds[len(colds) // 2 :]]  # the run's second half
        return {
            "server_recalls": total,
            "cold_share": round(len(cold_ms) / total, 3) if total else None,
            "cold_share_second_half": round(sum(later) / len(later), 3) if later else None,
            "cold_in_tool_ms": _percentiles(cold_ms),
            "warm_in_tool_ms": _percentiles(warm_ms),
            "opens": len(open_ms),
            "open_ms": _percentiles(open_ms),
        }

    def trims(self) -> dict:
        """The servers' trims of freed heap memory (`memory_trim`): how many, their CPU, what
        they gave back."""
        events = [e for e in self.server_events() if e.get("event") == "memory_trim"]
        return {
            "count": len(events),
            "cpu_ms": round(sum(e["cpu_ms"] for e in events), 1),
            "cpu_ms_each": _percentiles([e["cpu_ms"] for e in events]),
            "freed_mb": round(sum(e["freed_mb"] for e in events), 1),
        }

    def lost_posts(self) -> int:
        """Acknowledged probe turns missing from the store (read directly)."""
        missing = 0
        for conversation in getattr(self, "conversations", []):
            if not conversation.acked:
                continue
            key = self.users[conversation.user].key
            texts = self.backend.stored_texts(key, conversation.conversation_id)
            for k in range(conversation.acked):
                expected = turn_text(conversation.user, conversation.number, k)
                missing += k >= len(texts) or texts[k] != expected
        return missing

    def report(self) -> dict:
        cfg = self.config
        calls = self.calls
        ms = [c.ms for c in calls if c.ok]
        by_replica = {
            i: _percentiles([c.ms for c in calls if c.ok and c.replica == i])
            for i in range(len(self.servers))
        }
        rss_peak = [
            max((row.get(f"rss{i}", 0) for row in self.series), default=0)
            for i in range(len(self.servers))
        ]
        fds_peak = [
            max((row.get(f"fds{i}", 0) for row in self.series), default=0)
            for i in range(len(self.servers))
        ]
        probes = self.probes
        keyword = [p.keyword_s for p in probes if p.keyword_s is not None]
        meaning = [p.meaning_s for p in probes if p.meaning_s is not None]
        lost = self.lost_posts()
        unindexed = sum(self.backend.pending(u.key) > 0 for u in self.users)
        turns = self.figures["turns"]
        recalls = len(calls) + sum(1 for _ in probes)
        report = {
            "config": asdict(cfg),
            "label": cfg.label or f"{cfg.store}-{cfg.users}",
            "when": datetime.now().astimezone().isoformat(timespec="seconds"),
            "cpus": os.cpu_count(),
            "load_average": round(os.getloadavg()[0], 1),
            **self.figures,
            "big_users": sum(u.conversations == cfg.big_size for u in self.users),
            "post_ms": _percentiles(getattr(self, "post_ms", [])),
            "recall": {
                "calls": len(calls),
                "per_second": round(len(calls) / cfg.seconds, 1),
                "ms": _percentiles(ms),
                # past the first half: the memories a Zipf draw asks for often are open by then
                "ms_second_half": _percentiles(
                    [c.ms for c in calls if c.ok and c.at >= cfg.seconds / 2]
                ),
                "by_replica": by_replica,
                "found_share": round(sum(c.found for c in calls if c.ok) / len(ms), 3)
                if ms
                else None,
            },
            "server": self.cold_share(),
            "trims": self.trims(),
            "rss_peak_mb": rss_peak,
            "fds_peak": fds_peak,
            "connections_peak": max((r.get("connections", 0) for r in self.series), default=0),
            "disk": self.backend.disk(self.users),
            "freshness": {
                "probes": len(probes),
                "keyword_first_call_share": round(
                    sum(p.keyword_first for p in probes) / len(probes), 3
                )
                if probes
                else None,
                "keyword_s": _percentiles([k * 1000 for k in keyword], scale=0.001),
                "meaning_s": _percentiles([m * 1000 for m in meaning], scale=0.001),
                "never_embedded": sum(p.meaning_s is None for p in probes),
            },
            "cpu_ms_per_turn_indexed": round(self.figures["backfill_cpu_s"] * 1000 / turns, 2),
            "cpu_ms_per_recall": round(self.figures["recall_cpu_s"] * 1000 / max(1, recalls), 2),
            "errors": dict(self.errors),
            "error_examples": self.error_examples,
            "failovers": self.failovers,
            "kill": self.kill,
            "acked_posts_lost": lost,
            "users_left_unindexed": unindexed,
            "series": self.series,
            "calls": [asdict(c) for c in calls],
        }
        return report


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _percentiles(values: list[float], scale: float = 1.0) -> dict:
    if not values:
        return {}
    a = np.asarray(values, dtype=float) * scale
    nd = 3 if scale != 1.0 else 1
    return {
        "n": int(len(a)),
        "p50": round(float(np.percentile(a, 50)), nd),
        "p95": round(float(np.percentile(a, 95)), nd),
        "p99": round(float(np.percentile(a, 99)), nd),
        "max": round(float(a.max()), nd),
    }


# -- output ---------------------------------------------------------------------------------


def save(report: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    name = report["label"]
    figures = {k: v for k, v in report.items() if k not in ("calls", "series")}  # the plot's
    (out / f"{name}.json").write_text(json.dumps(figures, indent=1) + "\n")
    plot(report, out / f"{name}.png")
    md = out / f"{name}.md"
    md.write_text(markdown(report))
    summary(out)
    return md


def _mbs(figures: list[dict | None] | None) -> str:
    return " / ".join(f"{f['rss_mb']:.0f}" if f else "-" for f in figures or [])


def _ms(figures: dict | None) -> str:
    figures = figures or {}
    return f"{figures.get('p50')} / {figures.get('p95')} / {figures.get('p99')} ms"


def _workers(config: dict) -> str:
    workers = config.get("workers", 1)
    return f" × {workers} workers" if workers > 1 else ""


def markdown(r: dict) -> str:
    c = r["config"]
    rec, srv, fr, d = r["recall"], r["server"], r["freshness"], r["disk"]
    store = "PostgreSQL" if c["store"] == "postgres" else "SQLite"
    servers = len(r["rss_peak_mb"])
    client = described(c.get("client", "fastmcp"))
    lines = [
        f"# {r['label']}: {c['users']} users on {store} ({servers} server"
        f"{'s' if servers > 1 else ''}{_workers(c)})",
        "",
        f"{r['conversations']} conversations ({r['turns']} turns): users of {c['small_min']}-"
        f"{c['small_max']} conversations (log-uniform) and {r['big_users']} of {c['big_size']}; "
        f"posted by {c['posters']} posters in {r['posted_s']} s, indexed {r['indexed_s']} s after "
        f"the first post. Then {c['clients']} MCP clients ({client}) for {c['seconds']:.0f} s"
        f"{_paced(c)}, users by Zipf "
        f"(s = {c['zipf']}), while a gateway posts {c['ingest_rate']}/s. Model: "
        f"{c['model'] or 'the default'}. {r['cpus']} cores shared with the clients (load "
        f"{r['load_average']}); {r['when']}.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| recall p50 / p95 / p99 (client) | {rec['ms'].get('p50')} / {rec['ms'].get('p95')} / "
        f"{rec['ms'].get('p99')} ms ({rec['calls']} calls, {rec['per_second']}/s) |",
        f"| recall p50 / p95 / p99, the run's second half | {_ms(rec.get('ms_second_half'))} |",
        f"| answer in the text | {rec['found_share']} |",
        f"| cold share (recalls that opened a memory); in the second half | {srv['cold_share']}; "
        f"{srv.get('cold_share_second_half')} |",
        f"| in the tool, cold p50 / p95 | {srv['cold_in_tool_ms'].get('p50')} / "
        f"{srv['cold_in_tool_ms'].get('p95')} ms |",
        f"| in the tool, warm p50 / p95 | {srv['warm_in_tool_ms'].get('p50')} / "
        f"{srv['warm_in_tool_ms'].get('p95')} ms |",
        f"| memory opens (p50 / p95 ms each) | {srv['opens']} ({srv['open_ms'].get('p50')} / "
        f"{srv['open_ms'].get('p95')}) |",
        f"| server RSS peak (its largest process) | {' / '.join(f'{x:.0f}' for x in r['rss_peak_mb'])} MB |",
        f"| server RSS after the backfill; at the end | {_mbs(r.get('after_backfill'))} MB; "
        f"{_mbs(r.get('at_end'))} MB |",
        f"| open files peak | {' / '.join(str(x) for x in r['fds_peak'])} |",
        f"| disk per user / per conversation | {d['per_user_bytes'] / 1024:.0f} KiB / "
        f"{d['per_conversation_bytes'] / 1024:.1f} KiB |",
        f"| post p50 / p95 (backfill) | {r['post_ms'].get('p50')} / {r['post_ms'].get('p95')} ms |",
        f"| post to keyword-searchable p50 / p95 | {fr['keyword_s'].get('p50')} / "
        f"{fr['keyword_s'].get('p95')} s (first call finds it: {fr['keyword_first_call_share']}) |",
        f"| post to embedded p50 / p95 | {fr['meaning_s'].get('p50')} / "
        f"{fr['meaning_s'].get('p95')} s ({fr['never_embedded']} of {fr['probes']} not seen) |",
        f"| server CPU per indexed turn (store + embed) | {r['cpu_ms_per_turn_indexed']} ms |",
        *[
            f"| start-up, server {i}: catch-up / memories opened / RSS / open files | "
            f"{s['catch_up_s']} s / {s['opened']} / {s['rss_mb']:.0f} MB / {s['fds']} |"
            for i, s in enumerate(r.get("startup", []))
        ],
        f"| server CPU per recall (with the live ingest) | {r['cpu_ms_per_recall']} ms |",
    ]
    expiry = r.get("expiry_pass")
    if expiry:
        lines.append(
            f"| an expiry pass over every user (after the run): time / CPU / memories opened | "
            f"{expiry['s']} s / {expiry['cpu_s']} s / {expiry['opened']} |"
        )
    trims = r.get("trims") or {}
    if trims.get("count"):
        lines.append(
            f"| heap trims: count / CPU (total, p50 / p95 each) / given back | {trims['count']} / "
            f"{trims['cpu_ms']} ms ({trims['cpu_ms_each'].get('p50')} / "
            f"{trims['cpu_ms_each'].get('p95')} ms) / {trims['freed_mb']} MB |"
        )
    if c["store"] == "postgres":
        lines.append(f"| app connections peak (all replicas) | {r['connections_peak']} |")
    lines += [
        f"| errors | {sum(r['errors'].values())} {dict(r['errors']) or ''} |",
        f"| acknowledged posts lost / users left unindexed | {r['acked_posts_lost']} / "
        f"{r['users_left_unindexed']} |",
    ]
    late = r.get("late_big") or {}
    if late.get("users"):
        lines.append(
            f"| posted during the phase: {late['users']} users of {c['late_size']} | "
            f"{late['posted']} of {late['conversations']} conversations; "
            f"{late['left_unindexed']} left unindexed after the catch-up |"
        )
    if r["kill"]:
        k = r["kill"]
        lines.append(
            f"| replica {k['replica']} killed at {k['at_s']} s | {k['in_flight']} requests in "
            f"flight; {sum(r['errors'].values()) - k['errors_before']} errors after; "
            f"{r['failovers']} refused calls moved |"
        )
    lines += ["", f"![latency, RSS]({r['label']}.png)", ""]
    if r["error_examples"]:
        lines += ["Errors (first few):", "", *[f"- `{e}`" for e in r["error_examples"][:5]], ""]
    return "\n".join(lines)


def _paced(c: dict) -> str:
    pace = c.get("pace") or 0
    return f" (each pausing {pace:g} s on average between recalls)" if pace else " (back to back)"


def summary(out: Path) -> None:
    rows = []
    for path in sorted(out.glob("*.json")):
        try:
            r = json.loads(path.read_text())
        except (json.JSONDecodeError, OSError):
            continue
        if "recall" not in r:
            continue
        m = r["recall"]["ms"]
        rows.append(
            f"| [{r['label']}]({r['label']}.md) | {r['config']['store']} | "
            f"{len(r['rss_peak_mb'])}{_workers(r['config'])} | {r['config']['users']} | {r['conversations']} | "
            f"{r['config'].get('client', 'fastmcp')} | "
            f"{m.get('p50')} | {m.get('p95')} | {m.get('p99')} | {r['server']['cold_share']} | "
            f"{' / '.join(f'{x:.0f}' for x in r['rss_peak_mb'])} | "
            f"{r['disk']['per_user_bytes'] / 1024:.0f} | {r['freshness']['meaning_s'].get('p50')} |"
            f" {sum(r['errors'].values())} | {r['acked_posts_lost']} |"
        )
    text = [
        "# Many users: every run kept here",
        "",
        "Written by `bench/many_users.py` (its docstring says what is measured). Latencies are "
        "the MCP client's, in ms; RSS in MB of each server's largest process; disk in KiB per user; embedded: seconds "
        "from a post's 202 to its vectors (p50).",
        "",
        "| run | store | servers | users | conversations | client | p50 | p95 | p99 | cold share |"
        " RSS | disk/user | embedded s | errors | lost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    (out / "README.md").write_text("\n".join(text))


def plot(r: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    calls = r["calls"]
    replicas = len(r["rss_peak_mb"])
    for i in range(replicas):
        at = [c["at"] for c in calls if c["replica"] == i and c["ok"]]
        ms = [c["ms"] for c in calls if c["replica"] == i and c["ok"]]
        left.scatter(at, ms, s=3, alpha=0.35, label=f"replica {i}" if replicas > 1 else "calls")
    bad = [c for c in calls if not c["ok"]]
    if bad:
        left.scatter(
            [c["at"] for c in bad], [1] * len(bad), marker="x", color="red", label="errors"
        )
    if r["kill"]:
        left.axvline(r["kill"]["at_s"], color="red", linestyle="--", label="kill -9")
    left.axhline(15, color="green", linestyle=":", label="p50 target")
    left.axhline(150, color="orange", linestyle=":", label="p99 target")
    left.set_yscale("log")
    left.set_xlabel("seconds into the recall phase")
    left.set_ylabel("recall over MCP (ms)")
    left.grid(alpha=0.3, which="both")
    left.legend(fontsize=7, loc="upper right")
    for i in range(replicas):
        t = [row["at"] for row in r["series"] if f"rss{i}" in row]
        mb = [row[f"rss{i}"] for row in r["series"] if f"rss{i}" in row]
        right.plot(t, mb, label=f"server {i} RSS")
    right.axhline(600, color="orange", linestyle=":", label="600 MB target")
    right.set_ylim(bottom=0)
    right.set_xlabel("seconds into the recall phase")
    right.set_ylabel("MB")
    right.grid(alpha=0.3)
    right.legend(fontsize=7)
    c = r["config"]
    fig.suptitle(
        f"{r['label']}: {c['users']} users, {c['clients']} clients (Zipf s={c['zipf']}), "
        f"cold share {r['server']['cold_share']}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--replicas", type=int, default=2, help="PostgreSQL servers (default 2)")
    p.add_argument(
        "--workers", type=int, default=1, help="processes of each server (ireneo serve --workers)"
    )
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--big-users", type=int, default=2)
    p.add_argument("--big-size", type=int, default=2000)
    p.add_argument("--small-min", type=int, default=5)
    p.add_argument("--small-max", type=int, default=50)
    p.add_argument("--zipf", type=float, default=1.0)
    p.add_argument("--ingest-rate", type=float, default=2.0)
    p.add_argument("--posters", type=int, default=8)
    p.add_argument(
        "--pace",
        type=float,
        default=0.0,
        help="each client pauses a random time of this mean (s) between recalls, as an agent "
        "does between its user's turns [0: back to back, the most the servers can take]",
    )
    p.add_argument(
        "--client",
        choices=CLIENTS,
        default="fastmcp",
        help="the MCP client: fastmcp.Client, or raw JSON-RPC posts (ireneo.benchmark.clients) "
        "[fastmcp]",
    )
    p.add_argument("--seed", type=int, default=29)
    p.add_argument("--model", help="IRENEO_MODEL for the servers [the default model]")
    p.add_argument("--kill-at", type=float, help="SIGKILL the last replica at S s")
    p.add_argument(
        "--late-big", type=int, default=0, help="users of --late-size posted during the phase"
    )
    p.add_argument("--late-size", type=int, default=300, help="conversations of each late user")
    p.add_argument("--label", default="", help="the results' file name [<store>-<users>]")
    p.add_argument(
        "--env", action="append", default=[], help="IRENEO_... or MALLOC_...=VALUE for the servers"
    )
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--work", type=Path, help="the servers' home [a fresh temporary directory]")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="SQLite: keep the posted histories in --work, and start from them when there",
    )
    args = p.parse_args(argv)
    if args.workers < 1:
        p.error("--workers must be at least 1")
    if args.users < 1 or args.clients < 1 or args.seconds <= 0 or args.pace < 0:
        p.error("--users, --clients and --seconds must be positive, --pace not negative")
    if not 1 <= args.small_min <= args.small_max:
        p.error("--small-min must be at least 1 and at most --small-max")
    server_env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith(("IRENEO_", "MALLOC_")):
            p.error(f"--env {item!r}: give IRENEO_NAME=VALUE (or MALLOC_NAME=VALUE)")
        server_env[name] = value
    config = Config(
        users=args.users,
        store=args.store,
        replicas=args.replicas if args.store == "postgres" else 1,
        workers=args.workers,
        clients=args.clients,
        seconds=args.seconds,
        small_min=args.small_min,
        small_max=args.small_max,
        big_users=args.big_users,
        big_size=args.big_size,
        zipf=args.zipf,
        ingest_rate=args.ingest_rate,
        posters=args.posters,
        pace=args.pace,
        seed=args.seed,
        model=args.model,
        kill_at=args.kill_at,
        late_big=max(0, args.late_big),
        late_size=max(1, args.late_size),
        label=args.label,
        server_env=server_env,
        client=args.client,
    )
    if args.reuse and (args.work is None or args.store != "sqlite"):
        p.error("--reuse needs --work and --store sqlite")
    work = args.work or Path(tempfile.mkdtemp(prefix="ireneo-many-users-"))
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
    ) as progress:
        report = Run(config, work, progress, reuse=args.reuse).run()
    md = save(report, args.out)
    print(md.read_text())
    print(f"work directory: {work}", file=sys.stderr)
    failed = report["acked_posts_lost"] or report["users_left_unindexed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
