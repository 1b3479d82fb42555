"""Names in the order people expect: "seed 2" before "seed 10", "Adam" beside "adam".

Both databases know a collation of this name: Postgres as an ICU collation with numeric ordering
(migration core 0002), SQLite through `register`, called for every new connection.
"""

import re

COLLATION = "natural_sort"

_DIGITS = re.compile(r"(\d+)")


def sort_key(text: str) -> list:
    """Text and digit runs alternate after the split, so two keys compare part by part like with like."""
    parts = _DIGITS.split(text.casefold())
    return [int(part) if index % 2 else part for index, part in enumerate(parts)]


def _compare(a: str, b: str) -> int:
    first, second = sort_key(a), sort_key(b)
    return (first > second) - (first < second)


def register(sender, connection, **kwargs) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_collation(COLLATION, _compare)
