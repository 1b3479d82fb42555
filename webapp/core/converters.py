"""The `id` path converter: a database id (a bigint), so that /runs/<19 nines>/ is a 404 like any other
missing id instead of an integer overflow in the query."""

from webapp.core.jsonsafe import INT64_MAX


class IdConverter:
    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > INT64_MAX:
            raise ValueError("beyond a bigint")  # the URL does not match: 404
        return number

    def to_url(self, value) -> str:
        return str(int(value))
