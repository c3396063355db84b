"""Bring existing history in: Claude Code and Codex transcripts, ChatGPT exports, `.funes.jsonl`.

    from ireneo.importing import import_paths
    report = import_paths(memory, "claude-code", ["~/.claude/projects"])

Each source's reader (`ireneo.formats.claude_code`, `.codex`, `.chatgpt`) turns a file into
conversations of `Turn`s, or refuses it whole with `FormatError`. A refused file is reported and
skipped, and nothing of it is stored; the other files go on. Each conversation is stored in one
transaction (`Memory.store_turns`), then whatever is new is embedded (`Memory.embed_pending`).
Turns carry the source's own ids, so importing again changes nothing.

`ireneo import SOURCE [PATH]` is the command-line door (`import_`, a click group).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import click

from ireneo.errors import FormatError
from ireneo.formats import chatgpt, claude_code, codex
from ireneo.index import Progress
from ireneo.memory import Memory
from ireneo.model import Turn
from ireneo.store import StoreResult


@dataclass(frozen=True)
class Source:
    name: str
    find_files: Callable[[Iterable[str | Path]], list[Path]]
    read_file: Callable[[Path], list[list[Turn]]]  # conversations, each a list of turns


SOURCES: dict[str, Source] = {
    "claude-code": Source(
        "claude-code", claude_code.find_files, lambda path: [claude_code.read_file(path)]
    ),
    "codex": Source("codex", codex.find_files, lambda path: [codex.read_file(path)]),
    "chatgpt": Source("chatgpt", chatgpt.find_files, chatgpt.read_file),
}


@dataclass
class ImportReport:
    source: str
    files_read: int = 0
    files_empty: int = 0  # read, but holding no turn (a transcript with no messages)
    conversations: int | None = 0  # None: not counted (funes files are indexed whole)
    turns: StoreResult = field(default_factory=StoreResult)
    embedded: int = 0
    refused: list[FormatError] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "files_read": self.files_read,
            "files_empty": self.files_empty,
            "files_refused": len(self.refused),
            "conversations": self.conversations,
            "turns_added": self.turns.added,
            "turns_replaced": self.turns.replaced,
            "turns_unchanged": self.turns.unchanged,
            "passages_embedded": self.embedded,
            "refused": [str(error) for error in self.refused],
        }

    def summary(self) -> str:
        t = self.turns
        conversations = (
            "" if self.conversations is None else f"{self.conversations} conversations; "
        )
        return (
            f"{self.source}: {self.files_read} files read ({self.files_empty} without messages), "
            f"{len(self.refused)} refused; {conversations}"
            f"turns: {t.added} added, {t.replaced} replaced, {t.unchanged} unchanged; "
            f"{self.embedded} passages embedded"
        )


def import_paths(
    memory: Memory, source: str, paths: Iterable[str | Path], progress: Progress | None = None
) -> ImportReport:
    """Import every file of `source` format found at `paths` into `memory`."""
    if source == "funes":
        return _import_funes(memory, paths, progress)
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}: one of {', '.join(SOURCES)}, funes")
    reader = SOURCES[source]
    report = ImportReport(source)
    for path in reader.find_files(paths):
        try:
            conversations = reader.read_file(path)
        except FormatError as error:
            report.refused.append(error)
            continue
        report.files_read += 1
        stored = [turns for turns in conversations if turns]
        if not stored:
            report.files_empty += 1
        for turns in stored:  # one transaction per conversation
            report.turns += memory.store_turns(turns)
            report.conversations = (report.conversations or 0) + 1
    report.embedded = memory.embed_pending(progress)
    return report


def _import_funes(
    memory: Memory, paths: Iterable[str | Path], progress: Progress | None
) -> ImportReport:
    """`.funes.jsonl` as is: exactly `Memory.index` (unchanged files cost nothing)."""
    indexed = memory.index(paths, progress=progress)
    return ImportReport(
        source="funes",
        files_read=indexed.files_indexed + indexed.files_unchanged,
        turns=indexed.turns,
        embedded=indexed.embedded,
        refused=indexed.refused,
        conversations=None,  # indexing counts files and turns, not conversations
    )


# -- the command line ------------------------------------------------------------------------
# The group is defined before `ireneo.cli` is imported: cli.py registers it at import time, so
# whichever of the two modules is imported first, the other finds what it needs.


@click.group("import")
def import_() -> None:
    """Bring existing history in: Claude Code, Codex, ChatGPT exports, .funes.jsonl."""


from ireneo.cli import emit, memory_options, progress_bar  # noqa: E402


def _run(memory: Memory, as_json: bool, source: str, paths: list[Path]) -> None:
    with progress_bar("embedding", not as_json) as progress:
        report = import_paths(memory, source, paths, progress)
    emit(as_json, report.to_dict(), report.summary())
    if not as_json:
        for error in report.refused:
            click.echo(f"refused {error}", err=True)
    if report.refused:
        sys.exit(1)


def _default(path: Path, what: str) -> Path:
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such directory; give the directory of your {what}")
    return path


@import_.command("claude-code")
@click.argument(
    "directory", required=False, type=click.Path(exists=True, path_type=Path), metavar="[DIR]"
)
@memory_options
def claude_code_command(memory: Memory, as_json: bool, directory: Path | None) -> None:
    """Claude Code transcripts (*.jsonl) below DIR [default ~/.claude/projects]."""
    root = directory or _default(claude_code.default_dir(), "Claude Code transcripts")
    _run(memory, as_json, "claude-code", [root])


@import_.command("codex")
@click.argument(
    "directory", required=False, type=click.Path(exists=True, path_type=Path), metavar="[DIR]"
)
@memory_options
def codex_command(memory: Memory, as_json: bool, directory: Path | None) -> None:
    """Codex CLI rollouts (*.jsonl) below DIR [default ~/.codex/sessions]."""
    root = directory or _default(codex.default_dir(), "Codex sessions")
    _run(memory, as_json, "codex", [root])


@import_.command("chatgpt")
@click.argument("export", type=click.Path(exists=True, path_type=Path))
@memory_options
def chatgpt_command(memory: Memory, as_json: bool, export: Path) -> None:
    """ChatGPT's data export: conversations.json, the export's .zip, or its directory."""
    _run(memory, as_json, "chatgpt", [export])


@import_.command("funes")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@memory_options
def funes_command(memory: Memory, as_json: bool, paths: tuple[Path, ...]) -> None:
    """.funes.jsonl files or directories of them, as is (the same as `ireneo index`)."""
    _run(memory, as_json, "funes", list(paths))
