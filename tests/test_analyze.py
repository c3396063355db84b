"""Text to terms (analyze.py): what keyword search and the names a query mentions are made of."""

from __future__ import annotations

import pytest

from ireneo.analyze import names, query_terms, terms


def test_identifiers_give_their_parts_and_a_joined_term() -> None:
    assert terms("Ticket MT-4471 failed") == ["ticket", "mt", "4471", "fail", "mt4471"]
    assert terms("CH-294의 누유") == ["ch", "294", "의", "누유", "ch294"]
    assert query_terms("seal seal leak") == ["seal", "leak"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Which caps from the mixer at the Carrow Depot 8 failed QC?",
            [["carrow", "depot", "8"], ["qc"]],
        ),
        ("Carrow Depot 8 mixer caps", [["carrow", "depot", "8"]]),  # a run may open a sentence
        ("What did we log for pump p-003 and MT-4471?", [["p003"], ["mt4471"]]),
        (
            "We asked Valley Forge Mill 2, then Anna. Then me",
            [["valley", "forg", "mill", "2"], ["anna"]],
        ),
        ("I think Anna knows", [["anna"]]),  # one letter is no name
        ("MT-4471, MT-4471 and Carrow, Carrow", [["mt4471"], ["carrow"]]),  # once each
        ("Какой брак показал ОТК на заводе «Юность»?", [["отк"], ["юност"]]),
        ("당진 제4정비센터 믹서 MX-716", [["mx716"]]),  # Hangul has no capitals
        ("which ticket was raised for the leak", []),
    ],
)
def test_the_names_a_text_mentions(text: str, expected: list[list[str]]) -> None:
    assert names(text) == expected
