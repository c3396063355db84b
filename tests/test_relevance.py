import math

import numpy as np
import pytest

from ireneo import relevance

MINILM = relevance.LIFTS["minilm-l6-v2-q8"]


def answers(best: float, median: float, coverage: float, passages: int, lift=MINILM) -> bool:
    """One query's decision: its best window's cosine and coverage, its median cosine."""
    return relevance.answers(np.array([coverage]), 1.0, np.array([best]), median, lift, passages)


def test_the_floors_grow_with_the_memory_as_the_best_of_unrelated_passages_does():
    assert MINILM.floors(relevance.REFERENCE) == pytest.approx((0.36, 0.27))
    small, large = MINILM.floors(500), MINILM.floors(6000)
    assert small[0] < 0.36 < large[0] and small[1] < 0.27 < large[1]
    ratio = large[0] / small[0]
    assert ratio == pytest.approx(math.sqrt(math.log(6000) / math.log(500)))


def test_the_same_lift_answers_in_a_small_memory_and_not_in_a_large_one():
    # lift 0.35 above the median, best cosine 0.38, no word of the query held
    assert answers(0.38, 0.03, 0.0, passages=600)
    assert not answers(0.38, 0.03, 0.0, passages=6000)
    assert answers(0.45, 0.10, 0.0, passages=6000)  # a best cosine as answers have
    assert answers(0.30, 0.25, 0.6, passages=6000)  # most of the content: words decide


def test_part_of_the_words_needs_its_own_floor():
    assert answers(0.33, 0.15, 0.35, passages=600)
    assert not answers(0.33, 0.15, 0.35, passages=60_000)
    assert not answers(0.33, 0.15, 0.25, passages=600)  # too little of the content


def test_a_model_without_floors_is_judged_by_its_lift_alone():
    e5 = relevance.LIFTS["e5-small-q8"]
    assert e5.floors(10**6) == (-math.inf, -math.inf)
    assert answers(0.80, 0.72, 0.0, passages=100_000, lift=e5)
    assert not answers(0.80, 0.75, 0.0, passages=100_000, lift=e5)
    no_gate = relevance.Lift(alone=-1.0, with_words=-1.0)
    assert answers(-0.2, 0.0, 0.0, passages=6000, lift=no_gate)  # even a negative best cosine
