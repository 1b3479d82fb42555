"""jsonsafe.loads parses with orjson where it can; what it returns, and what it refuses, must be what the
standard library's reading (integer hook, depth limit) gives."""

import json
import math
import random
import struct

import pytest

from webapp.core import jsonsafe


def unique_keys(pairs):
    keys = [key for key, _ in pairs]
    twice = [key for key in keys if keys.count(key) > 1]
    if twice:
        raise ValueError(f"the key {json.dumps(twice[0])} appears twice in one object")
    return dict(pairs)


def reference(text):
    """The standard library's reading, as jsonsafe documents it: a key twice in one object refused."""
    try:
        value = json.loads(
            text,
            parse_int=jsonsafe._parse_int,
            parse_float=jsonsafe._parse_float,
            object_pairs_hook=unique_keys,
        )
    except RecursionError:
        raise ValueError("nested") from None
    if jsonsafe.depth(value) > jsonsafe.MAX_DEPTH:
        raise ValueError("nested")
    return value


NESTED = f"nested more than {jsonsafe.MAX_DEPTH} levels deep"


def same(a, b) -> bool:
    """Equal values of equal types, NaN equal to NaN, OversizedNumbers by their literals."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, jsonsafe.OversizedNumber):
        return a == b
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


EDGES = [
    "18446744073709551615",  # the largest unsigned 64-bit integer: orjson keeps it exact
    "18446744073709551616",  # one beyond: orjson would make it a float
    "-9223372036854775809",  # below int64 with 19 digits: orjson would make it a float
    "-9223372036854775808",
    "1" + "0" * 500,  # an OversizedNumber
    "1" + "0" * 330,  # an int beyond the float range, but no OversizedNumber
    "1e400",  # an OversizedNumber (the standard library alone reads infinity), an error to orjson
    "-1e400",
    "NaN",
    '{"value": Infinity}',
    '"\\ud800"',  # a lone surrogate
    "\ufeff{}",
    '{"a": 1, "a": 2}',
    '{"a": "x:y", "a": 1}',  # a colon inside a string as well
    '{"\\u0061": 1, "a": 2}',  # the same key, once escaped
    '[{"step": 1, "value": 2, "step": 3}]',
    '{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}',  # one key in different objects: no duplicate
    '{"a": "::", "b": "x"}',
    '{"a\\u003a": 1, "a:": 2}',  # the same key, its colon once escaped
    '{"x": "\\u003a", "y": "::"}',  # escaped and literal colons in values, no key twice
    '[{"k": "a:b", "v": 0.00333025075263667}, {"k": "c", "v": 1, "v": 2}]',  # the standard library's path
    "0.1234567890123456789",  # a 19-digit run in a float
    "[" * 64 + "]" * 64,
    "[" * 65 + "]" * 65,
    "[" * 2000 + "]" * 2000,  # beyond orjson's own limit too
    '{"a": ' * 70 + "1" + "}" * 70,
    "",
    "[1,]",
    "nul",
    '"\\u0000"',
    "-0",
    "-0.0",
    '[{"step": 3.0, "key": "k", "value": null}]',
]


@pytest.mark.parametrize("text", EDGES)
@pytest.mark.parametrize("as_bytes", [False, True])
def test_loads_reads_what_the_standard_library_reads(text, as_bytes):
    given = text.encode("utf-8", "surrogatepass") if as_bytes else text
    try:
        expected = reference(given)
    except ValueError as refused:
        with pytest.raises(ValueError) as error:
            jsonsafe.loads(given)
        assert str(error.value) == (NESTED if str(refused) == "nested" else str(refused))
        return
    assert same(jsonsafe.loads(given), expected)


def test_loads_reads_random_numbers_and_strings_like_the_standard_library():
    rng = random.Random(7)
    for _ in range(3000):
        bits = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        number = rng.choice(
            [
                repr(bits) if math.isfinite(bits) else "1.5",
                str(rng.randint(-(2**70), 2**70)),
                f"{rng.randint(0, 10**8)}.{rng.randint(0, 10**9)}e{rng.randint(-330, 310)}",  # orjson reads it
            ]
        )
        text = json.dumps({"key": "".join(chr(rng.randint(1, 0x2FFF)) for _ in range(5))})[:-1]
        text += f', "value": [{number}]}}'
        assert same(jsonsafe.loads(text.encode()), reference(text.encode())), text


@pytest.mark.parametrize(
    "text, path",
    [
        (b'[{"step": 1, "key": "k", "value": 1}, {"step": 2, "key": "k", "value": 1, "value": 2}]', "[1]"),
        (b'{"config": {"optim": {"lr": 1, "lr": 2}}, "name": "a:b"}', "config.optim"),
        (b'{"name": "a", "name": "b"}', ""),
    ],
)
def test_a_key_twice_in_one_object_is_refused_by_name_and_place(text, path):
    with pytest.raises(jsonsafe.DuplicateKey, match=r'the key "\w+" appears twice in one object') as error:
        jsonsafe.loads(text)
    assert error.value.path == path


def test_too_deep_is_refused_with_the_limit_named():
    with pytest.raises(ValueError, match=f"nested more than {jsonsafe.MAX_DEPTH} levels deep"):
        jsonsafe.loads("[" * 100 + "]" * 100)


def test_depth_counts_levels_and_stops_past_the_limit():
    assert [jsonsafe.depth(v) for v in (1, [], {}, [[]], {"a": [1, {"b": {}}]})] == [0, 1, 1, 2, 4]
    looped = []
    looped.append(looped)  # a self-referencing alias, as YAML can make
    assert jsonsafe.depth(looped) == jsonsafe.MAX_DEPTH + 1
