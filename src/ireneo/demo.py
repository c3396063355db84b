"""`ireneo demo`: two weeks in the life of an operations lead, end to end, offline.

It starts the real server (`create_app` under uvicorn, on 127.0.0.1 and a free port) on a
temporary home with a fresh ingest key and token secret, and plays the chat gateway: it posts
alice's six conversations and bob's one (examples/two_weeks/) after every turn, the whole
conversation so far each time. When indexing is done it asks the questions the example was written
for through `recall_my_conversations` over MCP, with alice's and bob's bearer tokens, and prints
what an agent would receive, with the facts each answer should hold.

    from ireneo.demo import run_demo
    result = run_demo()          # DemoResult: every recall's text, and the checks
"""

from __future__ import annotations

import asyncio
import json
import secrets
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ireneo.config import Settings

DATA_DIR_NAME = "two_weeks"


@dataclass(frozen=True)
class Question:
    """A question a user asks their agent; the agent recalls with `queries`."""

    user: str
    label: str  # a few words for the summary table
    text: str
    queries: tuple[str, ...]
    expect: tuple[str, ...] = ()  # facts the recalled passages should hold
    absent: tuple[str, ...] = ()  # what must not be there (another user's words)


QUESTIONS: tuple[Question, ...] = (
    Question(
        "alice",
        "the N-11 decision and its blocker",
        "What did we decide about the N-11 upgrade, and what has to happen before it can be "
        "scheduled? Is that blocker still open according to my notes?",
        ("N-11 upgrade decision", "MT-4471 K-2 closed"),
        expect=("go ahead", "acceptable but tight", "2,185 of 2,400", "91%", "MT-4471", "K-2"),
    ),
    Question(
        "alice",
        "the F-204 cause and the escalation",
        "Why were the reconciliation columns empty at the end of September, and who did I "
        "escalate it to?",
        ("reconciliation columns empty", "F-204 escalate"),
        expect=("09-23 to 09-25", "F-204", "Priya", "integrations", "Tomas"),
    ),
    Question(
        "alice",
        "open follow-ups, across chats",
        "Give me one consolidated list of my open follow-ups across all earlier chats.",
        ("follow-up owner due", "follow-up escalate today"),
        expect=("Tomas", "Jana", "Priya", "Marek", "ops meeting"),
    ),
    Question(
        "alice",
        "the forecast's base case, exact numbers",
        "Which forecast case did we pick as base case, with which parameters, and what did it "
        "give at 18 months?",
        ("forecast base case 18 months",),
        expect=(
            "hyperbolic",
            "1,500 units/d",
            "0.25/yr",
            "b 0.6",
            "1,069.5",
            "693.3 k",
            "exponential",
        ),
    ),
    Question(
        "alice",
        "P-7 / MT-5120: bob's words, not hers",
        "Did I ever discuss motor P-7 or ticket MT-5120?",
        ("motor P-7 MT-5120",),
        absent=("P-7", "MT-5120", "South hub"),
    ),
    Question(
        "bob",
        "P-7 / MT-5120: his South hub chat",
        "Did I ever discuss motor P-7 or ticket MT-5120?",
        ("motor P-7 MT-5120",),
        expect=("P-7", "MT-5120", "South hub", "bearing"),
    ),
)


@dataclass
class Answer:
    question: Question
    recalls: list[tuple[str, str]]  # (query, what the tool returned)

    @property
    def text(self) -> str:
        return "\n".join(answer for _, answer in self.recalls)

    @property
    def found(self) -> list[str]:
        return [fact for fact in self.question.expect if fact in self.text]

    @property
    def missing(self) -> list[str]:
        return [fact for fact in self.question.expect if fact not in self.text]

    @property
    def leaked(self) -> list[str]:
        return [word for word in self.question.absent if word in self.text]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.leaked

    def to_dict(self) -> dict:
        return {
            "user": self.question.user,
            "about": self.question.label,
            "question": self.question.text,
            "recalls": [{"query": q, "answer": a} for q, a in self.recalls],
            "expected": list(self.question.expect),
            "missing": self.missing,
            "must_not_appear": list(self.question.absent),
            "appeared": self.leaked,
            "ok": self.ok,
        }


@dataclass
class DemoResult:
    url: str = ""
    conversations: int = 0
    posts: int = 0
    turns_stored: int = 0
    index_seconds: float = 0.0
    answers: list[Answer] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(answer.ok for answer in self.answers)

    def to_dict(self) -> dict:
        return {
            "server": self.url,
            "conversations": self.conversations,
            "posts": self.posts,
            "turns_stored": self.turns_stored,
            "index_seconds": round(self.index_seconds, 2),
            "questions": [answer.to_dict() for answer in self.answers],
            "ok": self.ok,
            "seconds": round(self.seconds, 2),
        }


# -- the data ---------------------------------------------------------------------------------
def find_data(explicit: Path | None = None) -> Path:
    """The conversations: `explicit`; else those packaged with ireneo (resources/two_weeks, if
    a build put them there), the checkout's examples/two_weeks, or ./examples/two_weeks."""
    here = Path(__file__).resolve().parent
    candidates = (
        [explicit]
        if explicit
        else [
            here / "resources" / DATA_DIR_NAME,
            here.parents[1] / "examples" / DATA_DIR_NAME,
            Path.cwd() / "examples" / DATA_DIR_NAME,
        ]
    )
    for candidate in candidates:
        if any(candidate.glob("*.json")):
            return candidate
    where = f"in {explicit}" if explicit else f"in examples/{DATA_DIR_NAME} here or beside ireneo"
    raise FileNotFoundError(
        f"no conversations (*.json) {where}: run from a checkout of ireneo, or pass --data DIR "
        "(a directory of gateway bodies, one .json file per conversation)"
    )


def load_conversations(data_dir: Path) -> list[dict]:
    """Gateway bodies `{"user", "conversation_id", "turns"}`, in the order they happened."""
    from ireneo.errors import FormatError
    from ireneo.formats.gateway import parse_gateway_body

    bodies = []
    for path in sorted(data_dir.glob("*.json")):
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
            _user, _cid, turns = parse_gateway_body(body)
        except (UnicodeDecodeError, json.JSONDecodeError, FormatError) as exc:
            raise ValueError(f"{path} is not a POST /turns body: {exc}") from exc
        bodies.append((turns[0].ts, body))
    return [body for _, body in sorted(bodies, key=lambda pair: pair[0])]


# -- the server -------------------------------------------------------------------------------
class DemoServer:
    """The real app on 127.0.0.1 and a free port, in a thread; `url`, `token(user)`, `close()`."""

    def __init__(self, home: Path, settings: Settings | None = None):
        """`settings` lend the memories' own (model, reranker, redaction, echoes, embedding);
        everything the server itself reads is the demo's: its home, keys and limits."""
        import uvicorn

        from ireneo.server.app import create_app

        given = settings or Settings()
        self.settings = Settings(
            home=home,
            ingest_key=secrets.token_urlsafe(24),
            jwt_secret=secrets.token_urlsafe(48),
            jwt_issuer="https://ireneo-demo.invalid",
            jwt_audience="ireneo-demo",
            index_debounce=0.2,
            model=given.model,
            rerank=given.rerank,
            redact=given.redact,
            echo_policy=given.echo_policy,
            embed_threads=given.embed_threads,
            model_cache=given.model_cache,
        )
        app = create_app(self.settings)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="ireneo-demo", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the demo server did not start")
            time.sleep(0.02)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def _serve(self) -> None:
        asyncio.run(self._server.serve())

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)

    def token(self, user: str) -> str:
        from ireneo.server.auth import mint_token

        return mint_token(self.settings, user, ttl=600)

    def post(self, body: dict) -> dict:
        """What the chat gateway does after every turn: POST /turns, the conversation so far."""
        request = urllib.request.Request(
            f"{self.url}/turns",
            data=json.dumps(body).encode("utf-8"),
            headers={"content-type": "application/json", "x-ingest-key": self.settings.ingest_key},
            method="POST",
        )
        try:
            with _no_proxy().open(request, timeout=30) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:  # 4xx and 5xx
            raise RuntimeError(f"POST /turns answered {exc.code}: {exc.read()!r}") from exc

    def wait_indexed(self, timeout: float = 60) -> None:
        """Until GET /health says no user has indexing waiting or running."""
        deadline = time.monotonic() + timeout
        while True:
            with _no_proxy().open(f"{self.url}/health", timeout=10) as response:
                if json.loads(response.read())["indexing"] == 0:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError("indexing did not finish")
            time.sleep(0.1)

    async def recall(self, user: str, query: str) -> str:
        """One `recall_my_conversations` call over MCP, as the user's agent makes it."""
        from fastmcp import Client

        async with Client(f"{self.url}/mcp", auth=self.token(user), timeout=30) as client:
            result = await client.call_tool("recall_my_conversations", {"query": query})
            return result.content[0].text


def _no_proxy() -> urllib.request.OpenerDirector:
    """Loopback requests never go through a proxy from the environment."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


@contextmanager
def _home(home: Path | None) -> Iterator[Path]:
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
        yield home
        return
    with tempfile.TemporaryDirectory(prefix="ireneo-demo-") as tmp:
        yield Path(tmp)


# -- the run ------------------------------------------------------------------------------------
def run_demo(
    data_dir: Path | None = None,
    home: Path | None = None,
    console: Any | None = None,
    settings: Settings | None = None,
) -> DemoResult:
    """Serve, post every conversation turn by turn, wait for indexing, ask every question.
    `settings` lend the memories' own (see `DemoServer`)."""
    started = time.monotonic()
    say = _Printer(console)
    conversations = load_conversations(find_data(data_dir))
    result = DemoResult(conversations=len(conversations))
    with _home(home) as where:
        server = DemoServer(where, settings)
        try:
            result.url = server.url
            say.step(f"server on {server.url}, with a new ingest key and token secret")
            say.step(f"memories in {where}")
            for body in conversations:
                for n in range(1, len(body["turns"]) + 1):
                    stored = server.post({**body, "turns": body["turns"][:n]})
                    result.posts += 1
                    result.turns_stored += stored.get("added", 0)
                say.post(body)
            say.step(
                f"gateway: {result.posts} posts (each the whole conversation so far), "
                f"{result.turns_stored} turns stored"
            )
            index_start = time.monotonic()
            server.wait_indexed()
            result.index_seconds = time.monotonic() - index_start
            say.step(f"indexing done ({result.index_seconds:.1f} s after the last post)")
            for question in QUESTIONS:
                recalls = [
                    (q, asyncio.run(server.recall(question.user, q))) for q in question.queries
                ]
                answer = Answer(question, recalls)
                result.answers.append(answer)
                say.answer(answer)
        finally:
            server.close()
    result.seconds = time.monotonic() - started
    say.summary(result)
    return result


class _Printer:
    """The demo's narration with rich; silent when there is no console (--json, tests)."""

    def __init__(self, console: Any | None):
        self.console = console

    def step(self, text: str) -> None:
        if self.console:
            self.console.print(f"[bold cyan]›[/] {_escape(text)}")

    def post(self, body: dict) -> None:
        if self.console:
            first = body["turns"][0]["text"]
            self.console.print(
                f"  [dim]{body['turns'][0]['ts'][:10]}[/]  [bold]{body['user']:<5}[/] "
                f"{len(body['turns']):>2} turns  [dim]{_escape(first[:44])}…[/]"
            )

    def answer(self, answer: Answer) -> None:
        if not self.console:
            return
        from rich.panel import Panel
        from rich.rule import Rule
        from rich.text import Text

        q = answer.question
        self.console.print()
        self.console.print(Rule(Text(f"{q.user} asks", style="bold")))
        self.console.print(Text(f"“{q.text}”", style="italic"))
        for query, text in answer.recalls:
            title = Text(f"recall_my_conversations({query!r}) as {q.user}")
            self.console.print(Panel(Text(text), title=title, title_align="left", expand=True))
        checks = Text()
        for fact in answer.found:
            checks.append(f"✓ {fact}  ", style="green")
        for fact in answer.missing:
            checks.append(f"✗ {fact} missing  ", style="bold red")
        if q.absent:
            if answer.leaked:
                checks.append(f"✗ leaked: {', '.join(answer.leaked)}", style="bold red")
            else:
                checks.append(
                    f"✓ nothing of another user's ({', '.join(q.absent)} absent)", style="green"
                )
        self.console.print(checks)

    def summary(self, result: DemoResult) -> None:
        if not self.console:
            return
        from rich.table import Table

        table = Table(title="what the agent can answer from recall alone", title_justify="left")
        table.add_column("user")
        table.add_column("asked about")
        table.add_column("facts in the passages")
        for answer in result.answers:
            q = answer.question
            if q.absent:
                facts = "none of " + ", ".join(q.absent)
            else:
                facts = f"{len(answer.found)}/{len(q.expect)}"
            mark = "[green]✓[/]" if answer.ok else "[bold red]✗[/]"
            table.add_row(q.user, _escape(q.label), f"{mark} {facts}")
        self.console.print()
        self.console.print(table)
        verdict = "[green]all checks passed[/]" if result.ok else "[bold red]some checks failed[/]"
        self.console.print(f"{verdict} in {result.seconds:.1f} s, offline")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# -- the command --------------------------------------------------------------------------------
@click.command("demo")
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the demo server's memories here [default: a temporary directory, removed after].",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--data",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Conversations to post, one gateway body per .json file [default examples/two_weeks].",
)
def demo(home: Path | None, as_json: bool, data: Path | None) -> None:
    """Two weeks in the life of an operations lead: a real server, a gateway, an agent's recalls."""
    from rich.console import Console

    try:
        settings = Settings.from_env()
        result = run_demo(data, home, None if as_json else Console(highlight=False), settings)
    except (FileNotFoundError, ValueError, RuntimeError, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    if not result.ok:
        raise SystemExit(1)
