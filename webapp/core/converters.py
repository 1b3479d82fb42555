"""The `id` path converter: a database id (a bigint), so that /runs/<19 nines>/ is a 404 like any other
missing id instead of an integer overflow in the query."""

import re

from webapp.core.jsonsafe import INT64_MAX

_ID = re.compile("[0-9]{1,19}")


def parse_id(text: str) -> int | None:
    """`text` as a database id, or None: only ASCII digits (str.isdigit also takes "²" and other scripts'
    digits), and within a bigint."""
    if not _ID.fullmatch(text):
        return None
    number = int(text)
    return number if number <= INT64_MAX else None


class IdConverter:
    regex = _ID.pattern

    def to_python(self, value: str) -> int:
        number = parse_id(value)
        if number is None:
            raise ValueError("beyond a bigint")  # the URL does not match: 404
        return number

    def to_url(self, value) -> str:
        return str(int(value))
