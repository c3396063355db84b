"""The text people and agents read. One renderer, every door: the CLI prints exactly what the
MCP tools return. The grammar is written down in docs/output.md and pinned by tests.

Stored text is quoted: every line of it, whatever broke it (\n, \r, U+2028, …), is printed
after `QUOTE`, and no line the renderer writes itself starts that way, so no stored turn can
forge a header or a turn of its own. Names shown inline (roles, conversation ids) have their
line breaks and control characters replaced by spaces.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime

from ireneo.model import ContextTurn, ConversationSummary, Hit, Turn
from ireneo.store import Status

CONTEXT_CHARS = 600
QUOTE = "    | "
_NOT_INLINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def when(hit_or_turn) -> str:
    return hit_or_turn.ts.strftime("%Y-%m-%d %H:%M")


def quote(text: str) -> str:
    """Every line of `text` after QUOTE (an empty line: QUOTE without its last space)."""
    lines = text.splitlines() or [""]
    return "\n".join((QUOTE + line) if line else QUOTE.rstrip() for line in lines)


def inline(name: str) -> str:
    """A stored name (a role, a conversation id) fit for one line of framing."""
    return _NOT_INLINE.sub(" ", name)


def cut_block(block: str, room: int, mark: str = " […]") -> str:
    """The beginning of a rendered block that fits in `room` characters, ending inside quoted
    text, never in the middle of a framing line (a header cut short could read as another), and
    marked with `mark`. Only framing when no quoted line fits: then the framing lines that fit
    whole, and `[…]`."""
    room = max(room - len(mark), 0)
    kept = block[:room]
    lines = kept.split("\n")
    quoted = QUOTE.rstrip()
    cut_short = len(kept) < len(block) and block[len(kept)] != "\n"
    if cut_short and not lines[-1].startswith(quoted):
        lines.pop()  # a framing line cut short
    last = max((i for i, line in enumerate(lines) if line.startswith(quoted)), default=None)
    if last is None:
        framing = [line for line in lines if line]
        return "\n".join([*framing, "[…]"])
    return "\n".join(lines[: last + 1]).rstrip() + mark


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " […]"


def render_hit(number: int, hit: Hit, ref: str | None = None) -> str:
    lines = [_header(number, hit, ref)]
    for turn in sorted([*hit.context, hit], key=lambda t: t.seq):
        lines.extend(_turn_lines(turn, turn is hit))
    return "\n".join(lines)


def _header(number: int, hit: Hit, ref: str | None) -> str:
    where = f"ref {ref}" if ref else f"conversation {inline(hit.session_id)}"
    return f"[{number}] {when(hit)} UTC · {where} · turn {hit.seq}"


def _turn_lines(turn: Hit | ContextTurn, is_hit: bool) -> tuple[str, str]:
    """A turn of a hit's block: its line and its quoted text (a context turn's clipped)."""
    if is_hit:
        return f"  > [{turn.seq}] {inline(turn.role)}:", quote(turn.text)
    return f"    [{turn.seq}] {inline(turn.role)}:", quote(_clip(turn.text, CONTEXT_CHARS))


def render_hits(
    hits: list[Hit], *, max_chars: int | None = None, refs: dict[str, str] | None = None
) -> str:
    """Dated passages, best first, separated by a blank line; whole passages up to `max_chars`."""
    blocks = [render_hit(i, hit, (refs or {}).get(hit.session_id)) for i, hit in enumerate(hits, 1)]
    text = "\n\n".join(blocks)
    if max_chars is None or len(text) <= max_chars:
        return text
    kept: list[str] = []
    for block in blocks:
        if len(_join([*kept, block, _cut_line(len(blocks) - len(kept) - 1)])) > max_chars:
            break
        kept.append(block)
    if not kept:  # the best passage alone is too long: its beginning beats nothing
        room = max_chars - len(_cut_line(len(blocks) - 1)) - 6
        kept.append(cut_block(blocks[0], room))
    return _join([*kept, _cut_line(len(blocks) - len(kept))])


def within(max_chars: int, ref: Callable[[str], str] | None = None) -> Callable[[list[Hit]], bool]:
    """Whether hits, rendered by `render_hits` whole (conversations named by `ref`, as the MCP
    tool names them, or by their ids), fit in `max_chars`: the test under which a hit's context
    grows (Memory.recall's `fits`). A block's size is its header's and its turns' (as
    `render_hit` writes them), each turn measured once: a hit grows one turn at a time, and
    the others are the same objects as before."""
    refs: dict[str, str] = {}
    sizes: dict[tuple[int, int], tuple[Hit, int]] = {}  # by number and id(hit), the hit kept
    turn_sizes: dict[tuple[int, str, str, bool], int] = {}
    headers: dict[tuple[int, str, int, datetime], int] = {}

    def turn_size(turn: Hit | ContextTurn, is_hit: bool) -> int:
        key = (turn.seq, turn.role, turn.text, is_hit)
        known = turn_sizes.get(key)
        if known is None:
            line, text = _turn_lines(turn, is_hit)
            known = turn_sizes[key] = len(line) + len(text) + 2  # each after a line break
        return known

    def size(number: int, hit: Hit) -> int:
        known = sizes.get((number, id(hit)))
        if known is None or known[0] is not hit:
            if ref is not None and hit.session_id not in refs:
                refs[hit.session_id] = ref(hit.session_id)
            where = (number, hit.session_id, hit.seq, hit.ts)  # a grown hit's header is the same
            if where not in headers:
                headers[where] = len(_header(number, hit, refs.get(hit.session_id)))
            block = headers[where] + turn_size(hit, True)
            block += sum(turn_size(turn, False) for turn in hit.context)
            known = sizes[(number, id(hit))] = (hit, block)
        return known[1]

    def fits(hits: list[Hit]) -> bool:
        blocks = [size(number, hit) for number, hit in enumerate(hits, 1)]
        return sum(blocks) + 2 * (len(blocks) - 1) <= max_chars  # joined by blank lines

    return fits


def _cut_line(count: int) -> str:
    if not count:
        return ""
    return f"[… {count} more passage{'s' if count > 1 else ''} cut]"


def _join(parts: list[str]) -> str:
    return "\n\n".join(part for part in parts if part)


def render_turns(turns: list[Turn], *, ref: str | None = None) -> str:
    """A conversation as it was written: each turn dated, in order, verbatim."""
    if not turns:
        return ""
    where = f"ref {ref}" if ref else f"conversation {inline(turns[0].session_id)}"
    lines = [f"{where} · turns {turns[0].seq}–{turns[-1].seq}"]
    for turn in turns:
        echo = " · recall echo" if turn.echo else ""
        lines.append(
            f"\n[{turn.seq}] {when(turn)} UTC · {inline(turn.role)}{echo}\n{quote(turn.text)}"
        )
    return "\n".join(lines)


def render_conversations(sessions: list[ConversationSummary]) -> str:
    return "\n".join(
        f"{s.first_ts:%Y-%m-%d %H:%M}  {s.turns:>4} turns  {s.session_id}  {s.first_words}"
        for s in sessions
    )


def render_status(status: Status, home: str) -> str:
    rows = [
        ("home", home),
        ("conversations", f"{status.sessions:,}"),
        ("turns", f"{status.turns:,}"),
        ("passages", f"{status.passages:,} ({status.embedded:,} embedded)"),
        ("model", status.model or "none yet"),
        ("disk", _size(status.disk_bytes)),
        ("last indexed", status.last_indexed or "never"),
    ]
    rows += [(key, str(value)) for key, value in status.extra.items()]
    return "\n".join(f"{key + ':':<15}{value}" for key, value in rows)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
