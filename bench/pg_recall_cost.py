"""What a recall costs on PostgreSQL: this tree's store against an older one's, in one process.

    python bench/pg_recall_cost.py --database-url postgresql://… [--against REV]

Stores `--users` users of `--conversations` conversations each (the generator's histories,
random unit vectors put as the indexer puts them, search's copies saved as indexing saves
them), then alternates the two versions of `store/postgres.py` (this tree's, and REV's read
with `git show`), each on a pool of its own, for `--rounds` rounds:

- warm: `--recalls` recalls as `recall_my_conversations` makes them (recall_answer: the hits,
  widened to the tool's characters, each named by its conversation's ref, which the memory
  is made to forget it read, unless `--refs-kept`), users in turn, each memory open and read;
- cold: each user's memory opened anew and recalled once (its copies read).

`--answers`: first, every query of every user is answered by both versions, and the run
stops at the first answer that differs by a character.

`--busy`: a thread spins Python beside the recalls, as a server's event loop and other
requests would (bench/recall_beside_busy.py): every wait on PostgreSQL gives up the interpreter
lock, which it then keeps for up to the switch interval. The CPU figures then count it too;
compare the warm recalls' wall times (p50 and p95 over every recall, printed in every run).

`--echo`: each recall also records what it showed (`Memory.note_returned`), as the server
does after answering. `--older-ahead N` has the older version widen with `search.AHEAD = N` (1: each further hit's
sides read alone, as before AHEAD), to measure that change of search.py on this tree's store.

It prints, per version, the median over rounds of the CPU per recall of this process (all its
threads) and of the PostgreSQL backends serving its pool (from /proc: PostgreSQL on this
machine), the wall time per recall, and the round trips of one warm and one cold recall counted
from libpq's trace (ReadyForQuery messages), and their mean over `--counted` warm recalls (the
queries differ: some read more, some show nothing). Wall time moves with the machine's load;
CPU and round trips much less.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from itertools import groupby
from pathlib import Path

import numpy as np
from psycopg.pq import Trace

import ireneo.memory as memory_module
from ireneo import Memory, search
from ireneo.benchmark.generate import generate
from ireneo.config import Settings
from ireneo.server.limits import Limits
from ireneo.server.tools import recall_answer, returned_turns
from ireneo.store import open_store
from ireneo.store import postgres as this_store

REPO = Path(__file__).resolve().parents[1]


def older_store(rev: str):
    """`store/postgres.py` as it was at `rev`, imported beside this tree's."""
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:src/ireneo/store/postgres.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="ireneo-store-")) / "postgres_older.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ireneo.store.postgres_older", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Traced:
    """libpq's trace of every connection a pool opens, counted on demand."""

    def __init__(self, module) -> None:
        self.conns: list = []
        configure = module._configure

        def traced(conn) -> None:
            configure(conn)
            self.conns.append(conn)

        module._configure = traced

    def count(self, work) -> int:
        """Round trips (ReadyForQuery messages) of `work` on the pool's connections."""
        traces = []
        for conn in self.conns:
            if not conn.closed:
                handle = tempfile.NamedTemporaryFile("w", prefix="ireneo-pgtrace-")  # noqa: SIM115
                conn.pgconn.trace(handle.fileno())
                conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
                traces.append((conn, handle))
        try:
            work()
        finally:
            for conn, _ in traces:
                if not conn.closed:
                    conn.pgconn.untrace()
        count = 0
        for _, handle in traces:
            text = Path(handle.name).read_text()
            count += sum("\tReadyForQuery" in line for line in text.splitlines())
            handle.close()
        return count


def backend_cpu(conns: list) -> float:
    """Seconds of CPU (user + system, from /proc) of the PostgreSQL backends serving `conns`:
    PostgreSQL on the same machine as this process."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for conn in conns:
        try:
            stat = Path(f"/proc/{conn.info.backend_pid}/stat").read_text()
        except OSError:  # closed, or PostgreSQL elsewhere
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / tick


def stock(url: str, users: list[str], conversations: int, settings: Settings) -> list[str]:
    history = generate(conversations, lang="en", family="A", seed=0, questions=20)
    rng = np.random.default_rng(0)
    for name in users:
        with Memory(database=url, user=name, settings=settings) as memory:
            for _, turns in groupby(history.turns, key=lambda t: t.session_id):
                memory.store_turns(list(turns))
            memory.store.set_meta("model", memory.embedder.name)
            dim = len(memory.embedder.embed_query("dimension"))
            while batch := memory.store.pending_passages(1024):
                vectors = rng.standard_normal((len(batch), dim)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                memory.store.put_vectors([pid for pid, _ in batch], vectors)
            memory.store.save_copies()  # as indexing does
    return [q for question in history.questions for q in (question.short, question.long)]


def spin(spinning: threading.Event) -> None:
    """Run Python while `spinning` is set: a stand-in for a server's event loop and its other
    requests, which take the interpreter's lock whenever a recall gives it up."""
    x = 0
    while spinning.is_set():
        for i in range(1000):
            x += i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--against", default="HEAD", help="the older revision (default HEAD)")
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--recalls", type=int, default=60, help="warm recalls a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--refs-kept", action="store_true", help="a warm memory keeps its conversations' refs"
    )
    parser.add_argument(
        "--echo", action="store_true", help="each recall records what it showed, as served"
    )
    parser.add_argument(
        "--older-ahead", type=int, help="search.AHEAD for the older version (this: the tree's)"
    )
    parser.add_argument(
        "--answers",
        action="store_true",
        help="first check that both versions answer every query of every user alike",
    )
    parser.add_argument(
        "--busy",
        action="store_true",
        help="a thread spinning Python beside the recalls (a server's event loop): compare the "
        "wall times then, not the CPU, which counts the spinning",
    )
    parser.add_argument(
        "--counted", type=int, default=40, help="warm recalls whose round trips are averaged"
    )
    args = parser.parse_args()

    settings = Settings.from_env()
    run = f"cost-{os.getpid()}"
    users = [f"{run}-{i}" for i in range(args.users)]
    queries = stock(args.database_url, users, args.conversations, settings)
    limits = Limits()
    versions = {"older": older_store(args.against), "this": this_store}
    ahead = {"older": args.older_ahead or search.AHEAD, "this": search.AHEAD}
    traces = {name: Traced(module) for name, module in versions.items()}
    pools = {
        name: module.open_pool(args.database_url, max_size=4) for name, module in versions.items()
    }
    embedder = Memory(database=pools["this"], user=users[0], settings=settings).embedder
    embedder.embed_query("warm")

    def opened(name: str, user: str) -> Memory:
        """A memory on the version's store, as the server opens one (the model shared)."""
        store = versions[name].PostgresStore
        memory_module.open_store = lambda database, user: store(database, user)
        try:
            memory = Memory(database=pools[name], user=user, settings=settings)
        finally:
            memory_module.open_store = open_store
        memory._embedder = embedder
        memory.version = name  # type: ignore[attr-defined]
        return memory

    def recall(memory: Memory, n: int) -> None:
        search.AHEAD = ahead[memory.version]
        hits, _ = recall_answer(
            memory, queries[n % len(queries)], limits.recall_k, limits.max_result_chars
        )
        if args.echo:
            memory.note_returned(returned_turns(hits))
        if not args.refs_kept:
            memory._refs.clear()  # as a memory that has not named these conversations yet

    open_memories = {name: [opened(name, u) for u in users] for name in versions}
    checked = 0
    if args.answers:  # the answer text, to the character, of every query for every user
        for n in range(len(users)):
            for query in queries:
                texts = set()
                for name in versions:
                    search.AHEAD = ahead[name]
                    memory = open_memories[name][n]
                    texts.add(
                        recall_answer(memory, query, limits.recall_k, limits.max_result_chars)[1]
                    )
                if len(texts) != 1:
                    raise SystemExit(f"the versions answer {query!r} differently for {users[n]}")
                checked += 1
    for memories in open_memories.values():
        for n, memory in enumerate(memories):
            recall(memory, n)
    samples: dict[str, dict[str, list[float]]] = {
        name: {
            k: [] for k in ("warm_cpu", "warm_pg", "warm_wall", "cold_cpu", "cold_pg", "cold_wall")
        }
        for name in versions
    }
    walls: dict[str, list[float]] = {name: [] for name in versions}  # each warm recall's
    spinning = threading.Event()

    if args.busy:
        spinning.set()
        threading.Thread(target=spin, args=(spinning,), daemon=True).start()
    for _ in range(args.rounds):
        for name in versions:
            memories = open_memories[name]
            cpu, pg, wall = (
                time.process_time(),
                backend_cpu(traces[name].conns),
                time.perf_counter(),
            )
            for n in range(args.recalls):
                started = time.perf_counter()
                recall(memories[n % len(memories)], n)
                walls[name].append((time.perf_counter() - started) * 1000)
            done = samples[name]
            done["warm_cpu"].append((time.process_time() - cpu) / args.recalls * 1000)
            done["warm_pg"].append((backend_cpu(traces[name].conns) - pg) / args.recalls * 1000)
            done["warm_wall"].append((time.perf_counter() - wall) / args.recalls * 1000)
            cpu, pg, wall = (
                time.process_time(),
                backend_cpu(traces[name].conns),
                time.perf_counter(),
            )
            for n, user in enumerate(users):
                recall(opened(name, user), n)
            done["cold_cpu"].append((time.process_time() - cpu) / len(users) * 1000)
            done["cold_pg"].append((backend_cpu(traces[name].conns) - pg) / len(users) * 1000)
            done["cold_wall"].append((time.perf_counter() - wall) / len(users) * 1000)
    spinning.clear()
    out: dict = {
        "load": os.getloadavg()[0],
        "against": args.against,
        "users": args.users,
        "conversations": args.conversations,
        "older_ahead": ahead["older"],
        "answers_alike": checked,
    }
    for name in versions:
        memory = open_memories[name][0]
        out[name] = {key: round(statistics.median(v), 2) for key, v in samples[name].items()}
        ranked = sorted(walls[name])
        out[name]["warm_wall_p50"] = round(ranked[len(ranked) // 2], 2)
        out[name]["warm_wall_p95"] = round(ranked[int(len(ranked) * 0.95)], 2)
        out[name]["warm_round_trips"] = traces[name].count(lambda m=memory: recall(m, 1))
        out[name]["warm_round_trips_mean"] = round(
            traces[name].count(
                lambda name=name: [
                    recall(open_memories[name][n % len(users)], n) for n in range(args.counted)
                ]
            )
            / args.counted,
            2,
        )
        out[name]["cold_round_trips"] = traces[name].count(
            lambda name=name: recall(opened(name, users[1]), 1)
        )
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
