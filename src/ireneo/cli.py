"""The command line: each verb parses its arguments, calls the Python API, and prints.

Every verb takes --home and --json; with --json, stdout holds one JSON document and nothing else.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import click

from ireneo.config import Settings
from ireneo.errors import IreneoError, NotFound
from ireneo.formats import funes_jsonl
from ireneo.memory import Memory
from ireneo.model import Turn
from ireneo.render import inline, render_conversations, render_hits, render_status, render_turns


def memory_options(command):
    """--home and --json for a verb; the verb receives an open `memory` and `as_json`."""

    @click.option(
        "--home",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Memory directory [env IRENEO_HOME, default ~/.local/share/ireneo]. Without it, "
        "IRENEO_DATABASE_URL and IRENEO_USER, when set, name a PostgreSQL memory.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
    @click.option(
        "--model", default=None, help="Embedding model: a packaged name or a local model directory."
    )
    @functools.wraps(command)
    def wrapper(home: Path | None, as_json: bool, model: str | None, **kwargs):
        try:
            with Memory(home, settings=Settings.from_env(), model=model) as memory:
                return command(memory=memory, as_json=as_json, **kwargs)
        except (IreneoError, FileNotFoundError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper


def emit(as_json: bool, document: dict, text: str) -> None:
    if as_json:
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
    elif text:
        click.echo(text)


@contextmanager
def progress_bar(label: str, enabled: bool):
    """A rich progress bar on a terminal; nothing when output is piped or --json is asked."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress(
        f"[bold]{label}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True
    ) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


class _Verbs(click.Group):
    """The verbs. Those that live with their layer (the server's, the importers', the demo's)
    are imported when named: `ireneo recall` need not import the server and the demo (asyncio,
    urllib, ssl: ~35 ms of every call)."""

    elsewhere = {
        "demo": "ireneo.demo:demo",
        "import": "ireneo.importing:import_",
        "mcp": "ireneo.server.commands:mcp",
        "serve": "ireneo.server.commands:serve",
        "token": "ireneo.server.commands:token",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.elsewhere])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.elsewhere:
            return super().get_command(ctx, name)
        module, attribute = self.elsewhere[name].split(":")
        return getattr(importlib.import_module(module), attribute)


def _homes(command: click.Command, home: str) -> dict | None:
    """`--home` given before the verb, as defaults for the verb (and a group's verbs) that
    take it; None when none does. Given after the verb as well, the later one wins."""
    if isinstance(command, click.Group):
        found = {name: _homes(sub, home) for name, sub in command.commands.items()}
        found = {name: value for name, value in found.items() if value is not None}
        return found or None
    return {"home": home} if any(p.name == "home" for p in command.params) else None


@click.group(cls=_Verbs)
@click.version_option(package_name="ireneo")
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    default=None,
    help="Memory directory for the verb that follows (as its own --home).",
)
@click.pass_context
def main(ctx: click.Context, home: str | None) -> None:
    """ireneo: verbatim, searchable recall of earlier conversations."""
    if home is None or ctx.invoked_subcommand is None or ctx.resilient_parsing:
        return
    verb = ctx.invoked_subcommand
    command = ctx.command.get_command(ctx, verb) if isinstance(ctx.command, click.Group) else None
    defaults = _homes(command, home) if command is not None else None
    if defaults is None:
        raise click.UsageError(f"ireneo {verb} keeps no memory: it takes no --home")
    ctx.default_map = {**(ctx.default_map or {}), verb: defaults}


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@memory_options
def index(memory: Memory, as_json: bool, paths: tuple[Path, ...]) -> None:
    """Index .funes.jsonl files, or directories of them. Unchanged files cost nothing."""
    with progress_bar("embedding", not as_json) as progress:
        report = memory.index(paths, progress=progress)
    if not (report.files_indexed or report.files_unchanged or report.refused):
        raise click.ClickException(
            f"no .funes.jsonl files in {', '.join(map(str, paths))}: ireneo index reads only "
            "those; bring other history in with ireneo import claude-code|codex|chatgpt"
        )
    emit(as_json, report.to_dict(), _index_summary(report))
    for error in report.refused:
        if not as_json:
            click.echo(f"refused {error}", err=True)
    if report.refused:
        sys.exit(1)


def _index_summary(report) -> str:
    t = report.turns
    return (
        f"{report.files_indexed} files indexed, {report.files_unchanged} unchanged, "
        f"{len(report.refused)} refused; turns: {t.added} added, {t.replaced} replaced, "
        f"{t.unchanged} unchanged; {report.embedded} passages embedded"
    )


@main.command()
@click.argument("query", nargs=-1, required=True)
@click.option(
    "-k", "k", type=click.IntRange(1, 1000), default=8, show_default=True, help="How many hits."
)
@click.option("--since", help="Only turns on or after this date (YYYY-MM-DD) or time.")
@click.option("--until", help="Only turns on or before this date or time.")
@click.option("--role", help="Only turns of this role (user, assistant, …).")
@click.option("--session", "session_id", help="Only this conversation.")
@click.option(
    "--rerank",
    metavar="sentences|DIR",
    help="A last look at the best hits [env IRENEO_RERANK, default none]: sentences weighs each "
    "hit's sentence nearest the query; DIR is a cross-encoder (see docs/rerank.md).",
)
@memory_options
def recall(
    memory: Memory,
    as_json: bool,
    query: tuple[str, ...],
    k: int,
    since,
    until,
    role,
    session_id,
    rerank: str | None,
) -> None:
    """Ranked, dated passages for QUERY. Put -- before a query that starts with -."""
    text = " ".join(query)
    if rerank:
        memory.rerank = rerank
    hits = memory.recall(text, k=k, since=since, until=until, role=role, session_id=session_id)
    document = {"query": text, "hits": [hit.to_dict() for hit in hits]}
    emit(as_json, document, render_hits(hits) if hits else f"No passages found for {text!r}.")


@main.command()
@click.argument("session")
@click.option("--from", "from_seq", type=int, help="First turn (seq).")
@click.option("--to", "to_seq", type=int, help="Last turn (seq).")
@memory_options
def get(
    memory: Memory, as_json: bool, session: str, from_seq: int | None, to_seq: int | None
) -> None:
    """Read a conversation as it was written."""
    turns = memory.get(session, from_seq, to_seq)
    emit(
        as_json,
        {"session_id": session, "turns": [_turn_dict(t) for t in turns]},
        render_turns(turns) or _no_turns(memory, session, from_seq, to_seq),
    )


def _no_turns(memory: Memory, session: str, from_seq: int | None, to_seq: int | None) -> str:
    """Why `get` printed nothing: the range asked for and the turns the conversation has."""
    seqs = [turn.seq for turn in memory.get(session)]
    asked = " ".join(
        part
        for part in (
            "" if from_seq is None else f"from {from_seq}",
            "" if to_seq is None else f"to {to_seq}",
        )
        if part
    )
    return f"No turns {asked} in {session}: its turns are {min(seqs)} to {max(seqs)}."


@main.command()
@click.argument("session")
@click.argument("needle")
@memory_options
def scan(memory: Memory, as_json: bool, session: str, needle: str) -> None:
    """Find an exact string inside one conversation."""
    turns = memory.scan(session, needle)
    lines = [
        f"[{t.seq}] {t.ts:%Y-%m-%d %H:%M} {inline(t.role)}: {inline(line.strip())}"
        for t in turns
        for line in t.text.splitlines()
        if needle in line
    ]
    document = {"session_id": session, "needle": needle, "matches": [_turn_dict(t) for t in turns]}
    emit(
        as_json, document, "\n".join(lines) if lines else f"{needle!r} does not occur in {session}."
    )


@main.command()
@click.option("--since", help="Only conversations with turns on or after this date.")
@click.option("--until", help="Only conversations with turns on or before this date.")
@memory_options
def sessions(memory: Memory, as_json: bool, since, until) -> None:
    """List conversations, with dates and first words."""
    found = memory.sessions(since, until)
    emit(
        as_json,
        {"sessions": [s.to_dict() for s in found]},
        render_conversations(found) or "No conversations.",
    )


@main.command()
@memory_options
def status(memory: Memory, as_json: bool) -> None:
    """Counts, model, disk size, last indexed."""
    s = memory.status()
    document = {
        "home": memory.location,
        "conversations": s.sessions,
        "turns": s.turns,
        "passages": s.passages,
        "embedded": s.embedded,
        "model": s.model,
        "disk_bytes": s.disk_bytes,
        "last_indexed": s.last_indexed,
        "retention_days": memory.settings.retention_days,
        "korean": memory.hangul,
        **s.extra,
    }
    retention = document["retention_days"]
    s.extra["retention"] = f"{retention:g} days" if retention else "off (keep everything)"
    s.extra["korean"] = (
        "by morphemes"
        if memory.hangul == "morphemes"
        else "by bigrams (made before morphemes or without the ko extra; a new memory made "
        "after pip install 'ireneo[ko]' reads by morphemes)"
    )
    if s.model is None:  # recorded with the first turns stored (Memory.settle_model)
        s = replace(s, model=f"none yet: {memory.requested or _CHOSEN}")
    emit(as_json, document, render_status(s, memory.location))


_CHOSEN = "chosen by the language of its first turns"


@main.command()
@click.option("--session", "session_id", help="Forget this conversation.")
@click.option("--all", "everything", is_flag=True, help="Forget every conversation and memory.")
@click.option(
    "--older-than",
    "days",
    type=click.FloatRange(min=0, min_open=True),
    help="Forget conversations whose last turn is more than DAYS days old.",
)
@click.option("--log", "show_log", is_flag=True, help="Show the audit log of forgets instead.")
@memory_options
def forget(
    memory: Memory,
    as_json: bool,
    session_id: str | None,
    everything: bool,
    days: float | None,
    show_log: bool,
) -> None:
    """Forget conversations now: their text, search entries and vectors leave the files."""
    chosen = [bool(session_id), everything, days is not None, show_log]
    if sum(chosen) != 1:
        raise click.UsageError("give exactly one of --session ID, --all, --older-than DAYS, --log")
    if show_log:
        entries = memory.audit_log()
        emit(
            as_json,
            {"audit": [entry.to_dict() for entry in entries]},
            "\n".join(_audit_line(entry) for entry in entries) or "Nothing was ever forgotten.",
        )
        return
    if session_id:
        forgotten = memory.forget(session_id, actor="cli")
        if not forgotten.turns:
            raise NotFound(
                f"no conversation {session_id!r} in {memory.location} (see: ireneo sessions)"
            )
        what = f"conversation {session_id}"
    elif everything:
        forgotten = memory.forget_all(actor="cli")
        what = "everything"
    else:
        forgotten = memory.forget_older_than(days, actor="cli")
        what = f"conversations older than {days:g} days"
    emit(
        as_json, {"forgotten": what, **forgotten.to_dict()}, f"Forgot {what}: {_counts(forgotten)}."
    )


def _counts(f) -> str:
    """`1 conversation, 3 turns, 0 memories`."""
    words = (("conversation", "conversations"), ("turn", "turns"), ("memory", "memories"))
    counts = (f.conversations, f.turns, f.memories)
    return ", ".join(
        f"{n} {one if n == 1 else many}" for n, (one, many) in zip(counts, words, strict=True)
    )


def _audit_line(entry) -> str:
    what = {
        "forget_conversation": f"conversation #{entry.conversation}",
        "forget_all": "everything",
        "forget_before": "conversations before "
        + (entry.before.strftime("%Y-%m-%d %H:%M") if entry.before else "?"),
    }.get(entry.action, entry.action)
    return f"{entry.at:%Y-%m-%d %H:%M} UTC  by {entry.actor:<9}  {what}: {_counts(entry.forgotten)}"


@main.command()
@click.option("--to", "target", required=True, help="The model to re-embed with.")
@memory_options
def reembed(memory: Memory, as_json: bool, target: str) -> None:
    """Replace every vector with one from another embedding model."""
    with progress_bar("re-embedding", not as_json) as progress:
        count = memory.reembed(target, progress=progress)
    emit(
        as_json,
        {"model": memory.model_name, "passages_embedded": count},
        f"{count} passages re-embedded with {memory.model_name}",
    )


@main.command()
@click.option(
    "--quick",
    is_flag=True,
    help="One size (1,000 conversations), English, 50 questions: a few minutes.",
)
@click.option("--sizes", help="Comma-separated numbers of conversations [1000,3000,10000].")
@click.option("--langs", help="Comma-separated languages among en, ru, ko [all three].")
@click.option(
    "--family",
    type=click.Choice(["A", "B", "C"]),
    default="A",
    show_default=True,
    help="Template family: A while tuning, B held out.",
)
@click.option("--questions", type=int, help="Questions per size [100].")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Another number writes other histories and questions: a check on ones not tuned on.",
)
@click.option("--model", default=None, help="Embedding model to index with.")
@click.option(
    "--models",
    help="Instead of --model: comma-separated models, each measured on the same histories in "
    "this run and tabled side by side (the first is the one the others are compared with).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench/results"),
    show_default=True,
)
@click.option(
    "--load",
    is_flag=True,
    help="Instead: concurrent ingest and recall against a real server (results in OUT/load).",
)
@click.option(
    "--clients", type=click.IntRange(1), default=50, show_default=True, help="--load: clients."
)
@click.option(
    "--seconds",
    type=click.FloatRange(1),
    default=180.0,
    show_default=True,
    help="--load: duration.",
)
@click.option(
    "--database-url",
    help="Also store every history in this PostgreSQL database (the server's role, schema "
    "upgraded) and compare the two stores.",
)
@click.option(
    "--locomo",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Instead: recall on the LoCoMo file you downloaded (locomo10.json), judged by the "
    "evidence the tool's answer shows (results in OUT/locomo).",
)
@click.option(
    "--samples",
    type=click.IntRange(1),
    help="--locomo: only the first N samples (a quick run) [all].",
)
@click.option(
    "--together/--no-together",
    default=True,
    show_default=True,
    help="--locomo: also ask the nothing-relevant queries of one memory holding every sample "
    "(a larger memory than any sample alone).",
)
def bench(
    quick: bool,
    sizes,
    langs,
    family: str,
    questions,
    seed: int,
    model,
    models,
    out: Path,
    load,
    clients,
    seconds,
    database_url,
    locomo,
    samples,
    together,
) -> None:
    """Measure recall accuracy and cost on synthetic histories, against baselines."""
    from datetime import datetime

    from ireneo.extras import MissingExtra, need

    try:  # before minutes of work: every mode ends in plots
        need("bench", "ireneo bench (its plots)", "matplotlib")
    except MissingExtra as exc:
        raise click.ClickException(str(exc)) from None
    if models is not None:
        chosen = tuple(name.strip() for name in models.split(","))
        if model or locomo or load:
            raise click.UsageError("--models is for the synthetic run, in place of --model")
        if not all(chosen) or len(set(chosen)) != len(chosen):
            raise click.BadParameter(
                f"{models!r}: give distinct model names, comma-separated", param_hint="--models"
            )

    if locomo:
        from ireneo.benchmark import locomo as locomo_bench
        from ireneo.errors import UnknownModel

        try:
            with _bench_stages() as stage:
                document = locomo_bench.run(
                    locomo_bench.LocomoConfig(locomo, samples, model, out, together), stage
                )
        except (locomo_bench.LocomoError, UnknownModel) as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(locomo_bench.save(document, out).read_text())
        return
    if load:
        from ireneo.benchmark.load import LoadConfig, run_load

        report = run_load(LoadConfig(clients=clients, seconds=seconds), out / "load")
        if report.total_errors or report.acked_turns_missing:
            raise SystemExit(1)
        return

    from ireneo.benchmark.run import Config, run, save
    from ireneo.errors import UnknownModel

    overrides = {
        "family": family,
        "seed": seed,
        "model": model,
        "models": chosen if models is not None else (),
        "out": out,
        "database_url": database_url,
    }
    if sizes:
        overrides["sizes"] = tuple(int(x) for x in sizes.split(","))
    if langs:
        overrides["langs"] = tuple(langs.split(","))
    if questions:
        overrides["questions"] = questions
    config = Config.quick(**overrides) if quick else Config(**overrides)
    started = datetime.now().strftime("%Y-%m-%d %H:%M")
    try:
        with _bench_stages() as stage:
            runs = run(config, stage)
    except (UnknownModel, MissingExtra) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(save(runs, config, started).read_text())


@contextmanager
def _bench_stages():
    """The bench's stages as they start (bench.run.Stage): on a terminal a line each that keeps
    its time, with a bar for the questions; in a log (CI) a line each, stamped."""
    if not sys.stderr.isatty():
        started = time.monotonic()

        def logged(label: str, steps: int | None):
            click.echo(f"[{time.monotonic() - started:5.0f} s] {label}", err=True)
            return lambda: None

        yield logged
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    from rich.text import Text

    class Steps(MofNCompleteColumn):  # a stage that does not count its steps shows none
        def render(self, task):
            return super().render(task) if task.fields["counted"] else Text("")

    with Progress("{task.description}", BarColumn(), Steps(), TimeElapsedColumn()) as bar:

        def finish(task) -> None:  # full, its time kept
            bar.update(task.id, total=task.total or 1, completed=task.total or 1)
            bar.stop_task(task.id)

        def shown(label: str, steps: int | None):
            if bar.tasks:
                finish(bar.tasks[-1])
            task = bar.add_task(label, total=steps, counted=steps is not None)
            return lambda: bar.advance(task)

        yield shown
        if bar.tasks:
            finish(bar.tasks[-1])


IMPORTANCE = click.Choice(["low", "medium", "high"])


@main.group()
def memories() -> None:
    """Explicit memories: facts saved on purpose, with tags, importance and expiry."""


@memories.command("add")
@click.argument("content", nargs=-1, required=True)
@click.option("--tag", "tags", multiple=True, help="A tag (repeat for more).")
@click.option("--importance", type=IMPORTANCE, default="medium", show_default=True)
@click.option("--source", help="Where the fact came from.")
@memory_options
def memories_add(memory: Memory, as_json: bool, content, tags, importance, source) -> None:
    """Save a fact. A near-duplicate of a saved one updates it instead."""
    from ireneo.memories import describe_write

    written = memory.memories.store(" ".join(content), tags, importance, source)
    document = {"id": written.memory_id, "created": written.created, "updates": written.updates}
    emit(as_json, document, describe_write(written))


@memories.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("--tag", "tags", multiple=True, help="Only memories holding any of these tags.")
@click.option("--min-importance", type=IMPORTANCE, help="Only this importance and above.")
@click.option("-k", "k", type=click.IntRange(1, 100), default=10, show_default=True)
@memory_options
def memories_search(memory: Memory, as_json: bool, query, tags, min_importance, k) -> None:
    """Search saved facts with the same hybrid search as conversations."""
    from ireneo.memories import memory_to_dict, render_memory_hits

    text = " ".join(query)
    hits = memory.memories.search(
        text, k, tags=tags or None, min_importance=min_importance, count_use=False
    )
    document = {
        "query": text,
        "memories": [{**memory_to_dict(h.memory), "score": round(h.score, 6)} for h in hits],
    }
    emit(as_json, document, render_memory_hits(hits) or "No memories found.")


@memories.command("list")
@memory_options
def memories_list(memory: Memory, as_json: bool) -> None:
    """Every saved fact, newest first."""
    from ireneo.memories import memory_to_dict, render_memory

    records = memory.memories.all()
    text = "\n\n".join(render_memory(i, r) for i, r in enumerate(records, 1))
    emit(as_json, {"memories": [memory_to_dict(r) for r in records]}, text or "No memories.")


@memories.command("delete")
@click.argument("memory_id")
@memory_options
def memories_delete(memory: Memory, as_json: bool, memory_id: str) -> None:
    """Delete one saved fact by its id."""
    if not memory.memories.delete(memory_id):
        raise NotFound(f"no memory {memory_id!r} (see: ireneo memories list)")
    emit(as_json, {"deleted": memory_id}, f"Deleted memory {memory_id}.")


@memories.command("expire")
@memory_options
def memories_expire(memory: Memory, as_json: bool) -> None:
    """Remove low-importance facts older than IRENEO_MEMORY_LOW_MAX_AGE_DAYS (30)."""
    removed = memory.memories.expire()
    emit(as_json, {"removed": removed}, f"{removed} expired memories removed.")


@main.group()
def db() -> None:
    """The PostgreSQL database that replicas share (see docs/postgres.md)."""


@db.command("upgrade")
@click.option(
    "--database-url",
    help="postgresql:// URL of the role that owns the tables "
    "[env IRENEO_DATABASE_OWNER_URL, else IRENEO_DATABASE_URL].",
)
@click.option(
    "--app-role",
    help="The role the servers connect as; granted the use of the tables, owning none "
    "[env IRENEO_DATABASE_APP_ROLE; default: ireneo_app].",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def db_upgrade(database_url: str | None, app_role: str | None, as_json: bool) -> None:
    """Apply the schema migrations that are missing, then grant the application role."""
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    database_url = database_url or settings.database_owner_url or settings.database_url
    if not database_url:
        raise click.UsageError(
            "Missing option '--database-url' (or IRENEO_DATABASE_OWNER_URL, IRENEO_DATABASE_URL)."
        )
    app_role = app_role or settings.database_app_role
    from ireneo.extras import MissingExtra

    try:
        from ireneo.store import pg_schema  # psycopg with it, or a one-line MissingExtra
    except MissingExtra as exc:
        raise click.ClickException(str(exc)) from None
    import psycopg

    try:
        applied = pg_schema.upgrade(database_url, app_role)
    except (pg_schema.SchemaError, psycopg.Error) as exc:
        raise click.ClickException(str(exc).strip()) from exc
    version = pg_schema.latest_version()
    text = (
        f"applied migrations {', '.join(map(str, applied))}; schema at version {version}"
        if applied
        else f"schema already at version {version}"
    )
    emit(as_json, {"applied": applied, "version": version, "app_role": app_role}, text)


def _turn_dict(turn: Turn) -> dict:
    """A turn as `get --json` prints it: its `.funes.jsonl` record and its text as shown."""
    record = {**funes_jsonl.to_record(turn), "text": turn.text}
    return {**record, "echo": True} if turn.echo else record


if __name__ == "__main__":
    main()
