"""The times a query names: "on 8 May, 2023", "in January 2022", "2023-05-08", "в мае 2023",
"2023년 5월". The recall tool takes only a query, so a question about a time says it in words;
recall then ranks what was said in that time higher (search.Fusion.time_weight).

A period is a day, a month or a year, as whole seconds since the epoch, UTC: [start, end).
A year counts only written apart from other digits and letters (not "MT-2023", "2023kg"), and
only between 1900 and 2099; a day or a month without a year names no period.
"""

from __future__ import annotations

import re
from calendar import monthrange
from datetime import UTC, datetime, timedelta

Period = tuple[int, int]  # [start, end) in whole seconds, UTC

MAX_PERIODS = 4  # a query naming more times than this asks about none of them in particular

# Each month's stem, as English, Russian (every case: "мая", "мае", "май") write it.
_MONTHS = (
    ("jan", "январ"),
    ("feb", "феврал"),
    ("mar", "март"),
    ("apr", "апрел"),
    ("may", "ма[йяе]"),
    ("jun", "июн"),
    ("jul", "июл"),
    ("aug", "август"),
    ("sep", "сентябр"),
    ("oct", "октябр"),
    ("nov", "ноябр"),
    ("dec", "декабр"),
)
_ENGLISH = {
    "jan": "uary", "feb": "ruary", "mar": "ch", "apr": "il", "may": "", "jun": "e", "jul": "y",
    "aug": "ust", "sep": "t|tember", "oct": "ober", "nov": "ember", "dec": "ember",
}  # fmt: skip
_MONTH = "|".join(
    f"(?P<m{i}>{en}(?:{_ENGLISH[en]})?\\.?|{ru}[а-я]*)" for i, (en, ru) in enumerate(_MONTHS, 1)
)
_YEAR = r"(?P<year>(?:19|20)\d\d)(?![\w-])"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"(?<![\w-])(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)(?![\w-])",
        rf"(?<![\w-]){_DAY}(?:\s+of)?\s+(?:{_MONTH}),?\s*{_YEAR}",
        rf"(?<![\w-])(?:{_MONTH})\s+{_DAY},?\s*{_YEAR}",
        rf"(?<![\w-])(?:{_MONTH})(?:,|\s+of)?\s+{_YEAR}",
        r"(?<![\w-])(?P<year>(?:19|20)\d\d)\s*년(?:\s*(?P<month>1[0-2]|0?[1-9])\s*월"
        r"(?:\s*(?P<day>[0-3]?\d)\s*일)?)?",
        rf"(?<![\w-]){_YEAR}",
    )
]


def periods(query: str) -> list[Period]:
    """The days, months and years `query` names, in order, each once; none if it names more
    than MAX_PERIODS."""
    found: list[Period] = []
    taken = [False] * len(query)
    for pattern in _PATTERNS:
        for match in pattern.finditer(query):
            if any(taken[match.start() : match.end()]):
                continue  # part of a fuller date found before ("May 2023" of "8 May 2023")
            taken[match.start() : match.end()] = [True] * (match.end() - match.start())
            period = _period(match)  # None for a day no calendar has: "31 February 2023"
            if period is not None and period not in found:
                found.append(period)
    return found if len(found) <= MAX_PERIODS else []


def _period(match: re.Match[str]) -> Period | None:
    groups = match.groupdict()
    year = int(groups["year"])
    month = groups.get("month")
    number = int(month) if month else next((i for i in range(1, 13) if groups.get(f"m{i}")), None)
    day = int(groups["day"]) if groups.get("day") else None
    if number is None:
        return _span(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))
    if not 1 <= number <= 12:
        return None
    if day is None:
        end = datetime(year + (number == 12), number % 12 + 1, 1, tzinfo=UTC)
        return _span(datetime(year, number, 1, tzinfo=UTC), end)
    if not 1 <= day <= monthrange(year, number)[1]:
        return None
    start = datetime(year, number, day, tzinfo=UTC)
    return _span(start, start + timedelta(days=1))


def _span(start: datetime, end: datetime) -> Period:
    return int(start.timestamp()), int(end.timestamp())
