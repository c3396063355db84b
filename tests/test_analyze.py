"""Text to terms (analyze.py): what keyword search, the names a query mentions and the
sentences a reranker weighs are made of."""

from __future__ import annotations

import pytest

from ireneo.analyze import names, query_terms, sentences, terms, written_names


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
        # Hangul has no capitals: a proper noun names, with the nouns of the word after it
        ("당진 제4정비센터 믹서 MX-716", [["mx716"], terms("당진 제4정비센터")]),
        ("영월 사업장의 믹서가 또 말썽이에요", [["영월", "사업장"]]),
        ("믹서가 또 말썽이에요", []),
        ("which ticket was raised for the leak", []),
    ],
)
def test_the_names_a_text_mentions(text: str, expected: list[list[str]]) -> None:
    assert names(text) == expected


def test_korean_is_read_by_its_content_morphemes() -> None:
    # particles and endings go: "믹서의" is "믹서", "발행한" is "발행"
    assert terms("영월 사업장 믹서의 베어링 때문에 발행한 작업지시") == [
        *["영월", "사업장", "믹서", "베어링", "때문", "발행", "작업", "지시"]
    ]
    assert terms("구워 먹었어요") == ["굽", "먹"]  # a verb's stem, as the dictionary writes it
    # a memory written before keeps its overlapping bigrams, and finds no Korean names
    assert terms("믹서의 베어링", "bigrams") == ["믹서", "서의", "베어", "어링"]
    assert names("영월 사업장의 믹서", "bigrams") == []
    assert terms("会議室で") == ["会議", "議室", "室で"]  # Chinese and Japanese: still bigrams


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A sentence's first word may owe its capital to the sentence: it is left out.
        ("The Saltmarsh Works team is back. Anna said so", [["saltmarsh", "work"]]),
        ("We met at Carrow Depot 8 with Anna.", [["carrow", "depot", "8"], ["anna"]]),
        ("Carrow Depot 8 is down", [["depot", "8"]]),
        ("Ticket MT-4471 is open at Carrow", [["carrow"]]),  # identifiers are not written names
        ("caps from carrow depot 8", []),
        ("Which caps failed?", []),
    ],
)
def test_the_names_a_text_writes_in_capitals(text: str, expected: list[list[str]]) -> None:
    assert written_names(text) == expected


@pytest.mark.parametrize(
    ("text", "most", "expected"),
    [
        (
            "Hi there. P-253 won't restart! Ticket?\nMT-8305 is open",
            8,
            ["Hi there.", "P-253 won't restart!", "Ticket?", "MT-8305 is open"],
        ),
        ("3.5% rejects on K-2.5 today.", 8, ["3.5% rejects on K-2.5 today."]),  # no space: no end
        (
            "회의는 끝났어요. 결정은 DR-4878이에요.",
            8,
            ["회의는 끝났어요.", "결정은 DR-4878이에요."],
        ),
        ("One. Two. Three. Four. Five.", 2, ["One. Two.", "Three. Four. Five."]),  # runs, all kept
        ("  \n ", 8, []),
    ],
)
def test_sentences_are_verbatim_and_bounded(text: str, most: int, expected: list[str]) -> None:
    assert sentences(text, most) == expected
