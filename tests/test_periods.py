from datetime import UTC, datetime

import pytest

from ireneo.periods import MAX_PERIODS, periods


def days(query):
    return [
        (datetime.fromtimestamp(a, UTC).date().isoformat(), (b - a) // 86400)
        for a, b in periods(query)
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Maria do on 31 July, 2023?", [("2023-07-31", 1)]),
        ("what happened on July 31st 2023", [("2023-07-31", 1)]),
        ("the forest picture shared on December 1,2023", [("2023-12-01", 1)]),
        ("the 8th of May 2023", [("2023-05-08", 1)]),
        ("notes from 2023-05-08", [("2023-05-08", 1)]),
        ("What did Joanna finish in January 2022?", [("2022-01-01", 31)]),
        ("the Sept 2021 review", [("2021-09-01", 30)]),
        ("his injury in 2024", [("2024-01-01", 366)]),
        ("что решили 8 мая 2023", [("2023-05-08", 1)]),
        ("что было в мае 2023 года", [("2023-05-01", 31)]),
        ("2023년 5월 8일 회의", [("2023-05-08", 1)]),
        ("2023년 2월 결정", [("2023-02-01", 28)]),
        ("2022년 예산", [("2022-01-01", 365)]),
    ],
)
def test_named_times(query, expected):
    assert days(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "ticket MT-2023 for pump P-253",  # an identifier's number, not a year
        "part 2023kg",
        "3 years of yoga",
        "on 8 May",  # a day or a month without a year names no period
        "in January",
        "31 February 2023",  # no such day
        "",
    ],
)
def test_no_named_time(query):
    assert periods(query) == []


def test_many_times_name_none():
    query = " ".join(f"{1990 + i}" for i in range(MAX_PERIODS + 1))
    assert periods(query) == []
    assert len(periods(" and ".join(f"{1990 + i}" for i in range(MAX_PERIODS)))) == MAX_PERIODS
