"""What an answer with room shows past its hits (search.widen): further hits and grown contexts,
whichever is worth more first."""

from dataclasses import replace

import pytest

from ireneo import search
from ireneo.render import render_hits, within
from tests.conftest import conversation

QUERY = "chiller CH-7 valve"
BUDGET = 900  # room for a few more turns: not for every further hit and every ring


@pytest.fixture
def ranked(memory, tmp_path):
    """One hit in a long chat of short turns, then three short chats that match less."""
    filler = [f"Short line number {n:02d} about lunch." for n in range(30)]
    conversation(
        tmp_path, "chat", [*filler[:15], "The chiller CH-7 valve was replaced.", *filler[15:]]
    )
    for n in range(3):
        texts = [f"Hi {n}.", f"The chiller valve of line {n} was checked.", "Ok."]
        conversation(tmp_path, f"other{n}", texts)
    memory.index([tmp_path])
    hits = memory.recall(QUERY, k=4)
    assert [h.session_id for h in hits][0] == "chat" and hits[0].seq == 15
    return hits


def _shown(hit) -> list[int]:
    return sorted([hit.seq, *(t.seq for t in hit.context)])


def _widen(memory, top_score: float, further_score: float, hits) -> list:
    top, further = hits[0], hits[1:]
    return search.widen(
        memory.store,
        [replace(top, score=top_score)],
        within(BUDGET),
        further=[replace(h, score=further_score) for h in further],
    )


def test_a_hit_far_above_the_rest_shows_its_conversation_before_weaker_hits(memory, ranked):
    """A turn beside a hit is worth the hit's score less GROWTH_COST per turn out; a further
    hit is worth its own score. Far below, the further hits wait until the hit's context has
    grown past the turns worth more than they are."""
    answer = _widen(memory, 1.0, 0.3, ranked)
    assert len(render_hits(answer)) <= BUDGET
    worth_more = round((1.0 - 0.3) / search.GROWTH_COST)  # how far a turn beats a further hit
    seqs = _shown(answer[0])
    assert seqs == list(range(seqs[0], seqs[-1] + 1))  # one run, nearest turns first
    assert len(seqs) > len(_shown(ranked[0])) + 6  # it grew, on both sides
    if len(answer) == 1:  # no further hit: the best one did not fit beside the grown hit
        assert len(render_hits([*answer, ranked[1]])) > BUDGET
    else:  # one came only once every turn worth more was shown
        assert set(range(15 - worth_more + 1, 15 + worth_more)) <= set(seqs)


def test_close_scores_show_the_next_hits_first(memory, ranked):
    """Further hits as good as the hit come first, in rank order, as when scores cannot be
    compared (out of rank order, as a reranker's may be): then the contexts grow."""
    close = _widen(memory, 1.0, 1.0, ranked)
    unordered = _widen(memory, 0.1, 1.0, ranked)
    assert [h.session_id for h in close] == [h.session_id for h in ranked]
    assert [_shown(h) for h in close] == [_shown(h) for h in unordered]
    assert len(render_hits(close)) <= BUDGET
    far = _widen(memory, 1.0, 0.3, ranked)
    assert len(_shown(far[0])) > len(_shown(close[0]))  # the room went to the hits instead


def test_a_flat_head_shows_more_hits_each_as_its_own_turn(memory, tmp_path):
    """When the hit at FLAT_RANK scores at least FLAT_SHARE of the best's (evidence spread over
    many close windows), the further hits come as their own turn only, so more of them fit;
    a head just steeper keeps their context and shows fewer."""
    for n in range(9):
        texts = [
            f"We planned the lunch menu for the week, list {n}.",
            f"The chiller valve of line {n} was checked.",
            f"Good, the team looks at the filters of line {n} tomorrow.",
        ]
        conversation(tmp_path, f"line{n}", texts)
    memory.index([tmp_path])
    hits = memory.recall(QUERY, k=9)
    assert len(hits) == 9 and all(h.context for h in hits)
    budget = len(render_hits(hits[:5])) + 20  # two further hits with their context, no third

    def widen(share: float) -> list:
        return search.widen(
            memory.store,
            [replace(h, score=1.0) for h in hits[:3]],
            within(budget),
            further=[replace(h, score=share) for h in hits[3:]],
        )

    flat, steep = widen(search.FLAT_SHARE), widen(search.FLAT_SHARE - 0.05)
    assert [h.session_id for h in steep] == [h.session_id for h in hits[:5]]
    assert [h.session_id for h in flat] == [h.session_id for h in hits[: len(flat)]]
    assert len(flat) > len(steep)
    assert len(render_hits(flat)) <= budget
