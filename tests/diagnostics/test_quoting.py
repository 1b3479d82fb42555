"""Error messages quote a user's value short."""

from diagnostics.quoting import MAX_QUOTED, quoted


def test_a_value_is_quoted_whole_when_short_and_cut_with_an_ellipsis_when_long():
    assert quoted("x") == "'x'" and quoted(1.5) == "1.5" and quoted([1, "a"]) == "[1, 'a']"
    long = quoted("a" * 10_000_000)
    assert len(long) == MAX_QUOTED and long == "'" + "a" * (MAX_QUOTED - 2) + "…"
    assert len(quoted(list(range(10_000)))) == MAX_QUOTED


def test_an_integer_too_long_to_write_out_is_described():
    assert quoted(10**5000) == "a number of over 4,300 digits"
