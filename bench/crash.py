"""Crash safety: kill -9 a real `ireneo serve` again and again while the gateway posts, restart
it, and check that nothing it acknowledged is lost, nothing is half stored, no memory is corrupt,
and indexing completes.

Writers post growing conversations (the whole conversation each time, as the gateway does) and
re-post after a failure until they get 202, as a gateway retries. A killer sends SIGKILL at a
random moment, with posts in flight and index runs going, then starts the server again on the
same home. At the end, with the server up:
- keyword recall (over MCP) of sampled acknowledged turns finds them;
- every memory has vectors for every passage once the server reports no index work;
then, with the server stopped, every memory is opened and checked: each acknowledged turn is
stored with its text; each conversation holds exactly one of the lengths that were posted (a post
is stored whole or not at all); dense search of sampled turns finds them (recall by meaning);
`PRAGMA integrity_check` and the explicit memories' FTS5 index's own integrity check pass.

    python bench/crash.py --kills 50            # the long mode; writes bench/results/crash/
    python bench/crash.py --kills 5 --users 4   # a quick look

Exit status 1 if anything was lost or corrupt. tests/test_crash_safety.py runs a short mode.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx2

from ireneo.benchmark.server_process import INGEST_KEY, ServerProcess
from ireneo.benchmark.traffic import (
    Conversation,
    marker,
    stored_memories,
    stored_texts,
    turn_text,
    user_name,
)

TURNS_PER_CONVERSATION = 10


@dataclass
class CrashConfig:
    kills: int = 3
    users: int = 6
    writers: int = 6
    min_up: float = 0.5  # seconds the server runs before a kill: uniform in [min_up, max_up]
    max_up: float = 2.5
    recall_sample: int = 30
    meaning_sample: int = 30
    seed: int = 11
    index_debounce: float = 0.05
    database_url: str | None = None


@dataclass
class CrashReport:
    kills: int = 0
    kills_with_posts_in_flight: int = 0
    kills_while_indexing: int = 0
    posts: int = 0
    posts_acked: int = 0
    posts_failed: int = 0  # connection lost or refused (the server was down): re-posted
    turns_acked: int = 0
    conversations: int = 0
    acked_turns_missing: int = 0
    turns_with_wrong_text: int = 0
    conversations_half_stored: int = 0
    memories: int = 0
    integrity_failures: int = 0
    pending_after_restart: int = 0
    keyword_checked: int = 0
    keyword_found: int = 0
    meaning_checked: int = 0
    meaning_found: int = 0
    seconds: float = 0.0
    restart_seconds_median: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and self.acked_turns_missing == 0
            and self.turns_with_wrong_text == 0
            and self.conversations_half_stored == 0
            and self.integrity_failures == 0
            and self.pending_after_restart == 0
            and self.keyword_found == self.keyword_checked
            and self.meaning_found == self.meaning_checked
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


class CrashRun:
    def __init__(self, config: CrashConfig, work: Path, log=print):
        self.config = config
        self.work = work
        self.log = log
        self.rng = random.Random(config.seed)
        self.report = CrashReport()
        self.server = ServerProcess(
            home=work / "home",
            database_url=config.database_url,
            env_extra={"IRENEO_INDEX_DEBOUNCE": str(config.index_debounce)},
            log_path=work / "server.log",
        )
        self.conversations: list[Conversation] = []
        self.up = threading.Event()
        self.done = False
        self.in_flight = 0
        self._restarts: list[float] = []

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> CrashReport:
        started = time.monotonic()
        self.server.start()
        self.up.set()
        try:
            asyncio.run(self._traffic_and_kills())
            self.server.wait_indexed()
            self._check_over_http()
        finally:
            self.server.stop()
        self._check_stores()
        self.report.seconds = round(time.monotonic() - started, 1)
        if self._restarts:
            self._restarts.sort()
            self.report.restart_seconds_median = round(self._restarts[len(self._restarts) // 2], 2)
        self.report.conversations = len(self.conversations)
        self.report.turns_acked = sum(c.acked for c in self.conversations)
        return self.report

    async def _traffic_and_kills(self) -> None:
        async with httpx2.AsyncClient(
            base_url=self.server.url, timeout=30, headers={"x-ingest-key": INGEST_KEY}
        ) as http:
            writers = [
                asyncio.create_task(self._writer(http, n)) for n in range(self.config.writers)
            ]
            await asyncio.to_thread(self._killer)
            self.done = True
            await asyncio.gather(*writers)

    def _killer(self) -> None:
        for n in range(self.config.kills):
            time.sleep(self.rng.uniform(self.config.min_up, self.config.max_up))
            health = self.server.health() or {}
            in_flight = self.in_flight
            self.server.kill()
            self.up.clear()
            self.report.kills += 1
            self.report.kills_with_posts_in_flight += in_flight > 0
            self.report.kills_while_indexing += bool(health.get("indexing"))
            restarted = time.monotonic()
            self.server.start()
            self._restarts.append(time.monotonic() - restarted)
            self.up.set()
            self.log(
                f"kill {n + 1}/{self.config.kills}: {in_flight} posts in flight, "
                f"indexing {health.get('indexing')}, acked turns so far "
                f"{sum(c.acked for c in self.conversations)}"
            )
        time.sleep(self.config.min_up)

    async def _writer(self, http: httpx2.AsyncClient, number: int) -> None:
        conversation: Conversation | None = None
        while not self.done:
            if conversation is None or conversation.turns >= TURNS_PER_CONVERSATION:
                conversation = Conversation(
                    user=self.rng.randrange(self.config.users), number=len(self.conversations)
                )
                self.conversations.append(conversation)
            body = conversation.grow()
            # re-post the same body until it is acknowledged, as a gateway retries
            while True:
                if not self.up.is_set():
                    await asyncio.to_thread(self.up.wait, 60)
                self.report.posts += 1
                self.in_flight += 1
                try:
                    response = await http.post("/turns", json=body)
                except httpx2.TransportError:
                    self.report.posts_failed += 1
                    await asyncio.sleep(0.05)
                    if self.done and self.up.is_set():
                        break  # the last post stays unanswered: allowed to be stored or not
                    continue
                finally:
                    self.in_flight -= 1
                if response.status_code == 202:
                    self.report.posts_acked += 1
                    conversation.acked = max(conversation.acked, conversation.turns)
                    break
                self.report.problems.append(f"post answered {response.status_code}")
                return

    # -- checks ---------------------------------------------------------------------------------
    def _acked_turns(self) -> list[tuple[Conversation, int]]:
        return [(c, k) for c in self.conversations for k in range(c.acked)]

    def _check_over_http(self) -> None:
        from fastmcp import Client

        sample = self.rng.sample(
            self._acked_turns(), min(self.config.recall_sample, len(self._acked_turns()))
        )

        async def recall_all() -> None:
            by_user: dict[int, list[tuple[Conversation, int]]] = {}
            for conversation, k in sample:
                by_user.setdefault(conversation.user, []).append((conversation, k))
            for user, turns in by_user.items():
                token = self.server.token(user_name(user))
                async with Client(f"{self.server.url}/mcp", auth=token, timeout=60) as client:
                    for conversation, k in turns:
                        wanted = marker(conversation.user, conversation.number, k)
                        result = await client.call_tool(
                            "recall_my_conversations", {"query": wanted}
                        )
                        self.report.keyword_checked += 1
                        if wanted in result.content[0].text:
                            self.report.keyword_found += 1
                        else:
                            self.report.problems.append(f"keyword recall missed {wanted}")

        asyncio.run(recall_all())

    def _check_stores(self) -> None:
        """With the server stopped: every memory read directly, from its SQLite file or from
        the PostgreSQL database. PostgreSQL has no `PRAGMA integrity_check`: its own WAL
        recovery stands for it, so only the SQLite files are integrity-checked."""
        on_postgres = bool(self.config.database_url)
        if not on_postgres:
            for db in sorted((self.server.home / "users").glob("*/memory.db")):
                self.report.memories += 1
                self.report.integrity_failures += not _sqlite_intact(db)
        by_user: dict[int, list[Conversation]] = {}
        for conversation in self.conversations:
            by_user.setdefault(conversation.user, []).append(conversation)
        meaning = self.rng.sample(
            self._acked_turns(), min(self.config.meaning_sample, len(self._acked_turns()))
        )
        with stored_memories(self.server.home, self.config.database_url) as memories:
            for user, conversations in by_user.items():
                if not memories.exists(user):
                    self.report.acked_turns_missing += sum(c.acked for c in conversations)
                    continue
                self.report.memories += on_postgres  # the SQLite files are counted above
                with memories.open(user) as memory:
                    mine = [(c, k) for c, k in meaning if c.user == user]
                    self._check_memory(memory, conversations, mine)

    def _check_memory(
        self, memory, conversations: list[Conversation], meaning: list[tuple[Conversation, int]]
    ) -> None:
        """One user's memory: nothing acknowledged missing, nothing half stored, every turn's
        text as sent, and a sample of turns found by meaning."""
        from ireneo.store.base import Filters

        self.report.pending_after_restart += memory.pending()
        for conversation in conversations:
            stored = stored_texts(memory, conversation.conversation_id)
            if len(stored) not in conversation.attempted | {0}:
                self.report.conversations_half_stored += 1
            self.report.acked_turns_missing += max(0, conversation.acked - len(stored))
            for k, text in enumerate(stored):
                if text != turn_text(conversation.user, conversation.number, k):
                    self.report.turns_with_wrong_text += 1
        for conversation, k in meaning:
            self.report.meaning_checked += 1
            query = memory.embedder.embed_query(
                turn_text(conversation.user, conversation.number, k)
            )
            near = memory.store.dense_search(query, 10, Filters())
            found = memory.store.layout().turns_of(pid for pid, _ in near).values()
            if (conversation.conversation_id, k) in found:
                self.report.meaning_found += 1
            else:
                self.report.problems.append(
                    f"dense search missed {marker(conversation.user, conversation.number, k)}"
                )


def _sqlite_intact(db: Path) -> bool:
    connection = sqlite3.connect(db)
    try:
        ok = connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        # FTS5 checks that its index matches the explicit memories it indexes (raises if not)
        connection.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        return ok
    except sqlite3.DatabaseError:
        return False
    finally:
        connection.close()


def save(report: CrashReport, config: CrashConfig, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    document = {"config": asdict(config) | {"database_url": bool(config.database_url)}}
    document["report"] = report.to_dict()
    (out / "latest.json").write_text(json.dumps(document, indent=2) + "\n")
    r = report
    lines = [
        "# Crash safety: kill -9 during ingest and indexing",
        "",
        f"Store: {'PostgreSQL' if config.database_url else 'SQLite (embedded)'}; "
        f"{config.writers} writers over {config.users} users; kills every "
        f"{config.min_up}-{config.max_up} s.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| kills survived | {r.kills} |",
        f"| kills with posts in flight | {r.kills_with_posts_in_flight} |",
        f"| kills while indexing | {r.kills_while_indexing} |",
        f"| posts (acknowledged / failed and re-posted) | {r.posts} ({r.posts_acked} / {r.posts_failed}) |",
        f"| conversations, acknowledged turns | {r.conversations}, {r.turns_acked} |",
        f"| acknowledged turns missing | {r.acked_turns_missing} |",
        f"| turns with wrong text | {r.turns_with_wrong_text} |",
        f"| conversations half stored | {r.conversations_half_stored} |",
        f"| memories, integrity failures | {r.memories}, "
        f"{'n/a on PostgreSQL' if config.database_url else r.integrity_failures} |",
        f"| passages without vectors after restart | {r.pending_after_restart} |",
        f"| keyword recall found / checked | {r.keyword_found} / {r.keyword_checked} |",
        f"| recall by meaning found / checked | {r.meaning_found} / {r.meaning_checked} |",
        f"| median restart to healthy (s) | {r.restart_seconds_median} |",
        f"| whole run (s) | {r.seconds} |",
        f"| verdict | {'ok' if r.ok else 'FAILED: ' + '; '.join(r.problems[:5])} |",
        "",
    ]
    path = out / "latest.md"
    path.write_text("\n".join(lines))
    return path


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="kill -9 the server during ingest and indexing")
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--min-up", type=float, default=0.5)
    parser.add_argument("--max-up", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--database-url", help="run against PostgreSQL (IRENEO_DATABASE_URL)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/crash"))
    parser.add_argument("--work", type=Path, help="where the server's home goes [a temp dir]")
    args = parser.parse_args(argv)
    config = CrashConfig(
        kills=args.kills,
        users=args.users,
        writers=args.writers,
        min_up=args.min_up,
        max_up=args.max_up,
        seed=args.seed,
        recall_sample=100,
        meaning_sample=100,
        database_url=args.database_url,
    )
    work = args.work or Path(tempfile.mkdtemp(prefix="ireneo-crash-"))
    report = CrashRun(config, work, log=lambda line: print(line, file=sys.stderr)).run()
    print(save(report, config, args.out).read_text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
