from datetime import UTC, datetime

from ireneo.model import Block, ContextTurn, Hit, Turn
from ireneo.render import cut_block, render_hits, render_turns, within

TS = datetime(2026, 10, 8, 9, 14, tzinfo=UTC)


def hit(n: int, text: str = "text", context: list[ContextTurn] | None = None) -> Hit:
    return Hit(f"s{n}", f"u{n}", 4, TS, "assistant", text, 0.5, context or [])


def test_every_line_of_a_turn_is_quoted_and_context_clipped():
    context = [ContextTurn(3, "user", TS, "q" * 700)]
    out = render_hits([hit(1, "line one\nline two\r\n\nline\u2028four", context)])
    assert out == (
        "[1] 2026-10-08 09:14 UTC · conversation s1 · turn 4\n"
        "    [3] user:\n"
        f"    | {'q' * 600} […]\n"
        "  > [4] assistant:\n"
        "    | line one\n    | line two\n    |\n    | line\n    | four"
    )


def test_names_in_framing_lines_hold_no_line_break():
    turn = Turn("s\n[9] x", "u", 0, TS, "user\n[2] 2026", "gateway", (Block("text", "hi"),))
    out = render_turns([turn])
    assert out.splitlines()[0] == "conversation s [9] x · turns 0–0"
    assert "[0] 2026-10-08 09:14 UTC · user [2] 2026\n    | hi" in out


def test_refs_replace_session_ids():
    assert render_hits([hit(1)], refs={"s1": "abc123"}).startswith(
        "[1] 2026-10-08 09:14 UTC · ref abc123 · turn 4"
    )


def test_cap_keeps_whole_hits_and_says_how_many_were_cut():
    hits = [hit(i, "x" * 100) for i in range(1, 6)]
    out = render_hits(hits, max_chars=400)
    assert len(out) <= 400
    assert out.count("  > [4]") == 2
    assert out.endswith("[… 3 more passages cut]")


def test_cap_smaller_than_the_first_hit_keeps_its_beginning():
    out = render_hits([hit(1, "y" * 5000), hit(2)], max_chars=300)
    assert len(out) <= 300
    assert out.startswith("[1] 2026-10-08") and "y" * 100 in out
    assert out.endswith(" […]\n\n[… 1 more passage cut]")


def test_no_cap_needed_means_no_footer():
    out = render_hits([hit(1), hit(2)], max_chars=10_000)
    assert "cut]" not in out and out.count("\n\n") == 1


def test_a_cut_passage_never_ends_in_a_framing_line_cut_short():
    context = [
        ContextTurn(3, "user", TS, "first line\nsecond line"),
        ContextTurn(5, "user", TS, "z"),
    ]
    block = render_hits([hit(1, "y" * 80 + "\n" + "w" * 80, context)], refs={"s1": "abc"})
    whole_lines = set(block.split("\n"))
    for room in range(3, len(block) + 10):
        out = cut_block(block, room)
        assert len(out) <= room, room
        lines = out.split("\n")
        for line in lines[:-1]:
            assert line in whole_lines, (room, line)  # every line but the last is whole
        last = lines[-1]
        if last != "[…]":  # no quoted line fitted: the whole framing lines, then "[…]"
            assert last.startswith("    |") and last.endswith(" […]"), (room, last)


def test_within_measures_the_answer_as_the_tool_names_its_conversations():
    hits = [hit(1, "x" * 50), hit(2, "y" * 50)]
    asked: list[str] = []

    def ref(session_id: str) -> str:
        asked.append(session_id)
        return "r" * 40  # a name longer than the conversation's id

    as_tool = render_hits(hits, refs={"s1": "r" * 40, "s2": "r" * 40})
    assert within(len(as_tool), ref)(hits) and not within(len(as_tool) - 1, ref)(hits)
    assert within(len(as_tool) - 1)(hits)  # by ids, the same answer is shorter
    fits = within(10_000, ref)
    asked.clear()
    assert fits(hits) and fits(hits) and asked == ["s1", "s2"]  # each looked up once


def test_within_measures_exactly_what_render_hits_prints():
    texts = ["", "a\r\nb\n\nc\u2028d\x85e", "q" * 600, "q" * 601, "w " * 300 + "  tail", "\n"]
    context = [ContextTurn(seq, "user\n\x07", TS, text) for seq, text in enumerate(texts, 1)]
    grown: list[Hit] = []
    for n in range(len(context) + 1):
        # the same turns again, each time with one more: turns are measured once per `fits`
        grown.append(Hit("s\n1", "u", 123, TS, "assistant", texts[n % 6], 0.5, context[:n]))
    fits = within(10**6)
    for n in range(len(grown)):
        hits = grown[: n + 1]
        size = len(render_hits(hits))
        assert within(size)(hits) and not within(size - 1)(hits), n
        assert fits(hits)
