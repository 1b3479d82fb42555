"""A user's value as an error message quotes it. Pure Python, in the package anyone may import, so that
every layer's messages (environments, trainer, detector, web app) quote a value alike."""

import sys

MAX_QUOTED = 100  # characters


def quoted(value) -> str:
    """repr(value), cut to MAX_QUOTED characters with an ellipsis: a message must not echo a megabyte
    someone sent (an API answer would carry it twice, in `error` and in `errors`)."""
    try:
        text = repr(value[: MAX_QUOTED + 1] if isinstance(value, str) else value)
    except ValueError:  # Python writes out no integer of more digits than its limit
        return f"a number of over {sys.get_int_max_str_digits():,} digits"
    return clipped(text)


def clipped(text: str) -> str:
    """Text that is not itself a value (a list of column names), cut to MAX_QUOTED characters alike."""
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 1] + "…"
