"""Counts and lists as the app's messages write them, one way everywhere."""

from diagnostics.quoting import quoted


def counted(number: int, noun: str) -> str:
    """ "1 step", "2 steps", "1,200 metric points"."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def shortlist(names: list[str], shown: int = 5) -> str:
    """ "a, b, c" or "a, b, c, d, e and 7 more", each name quoted as a message quotes it."""
    listed = ", ".join(quoted(name) for name in names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")
