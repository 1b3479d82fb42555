"""JSON from users, parsed so that no input can become a 500: integer literals too long to convert, nesting
deeper than the parser's stack, and numbers beyond 64 bits are named by the validators that meet them.

`loads` keeps an integer literal of more than MAX_INT_DIGITS digits, and a number literal beyond a 64-bit
float (1e400), as an `OversizedNumber`: a value of no JSON type, which every type check refuses by name (a
point's value, a config field), instead of the interpreter's conversion error, which names no field, or
an infinity nobody wrote (`Infinity` itself stays infinity).

`loads` parses with orjson (a 1,000-point metrics batch in a tenth of the standard library's time, which
spent most of it calling the integer hook), and hands anything orjson refuses, or would read differently,
to the standard library: the values and the error messages are the standard library's either way.
A key written twice in one object is refused (DuplicateKey), where both parsers would keep its last value.
"""

import contextlib
import json
import math
import re

import orjson

INT64_MAX = 2**63 - 1
MAX_INT_DIGITS = 400  # beyond any float; far below Python's 4,300-digit conversion limit
MAX_DEPTH = 64  # nested objects and lists; code that walks a value recursively stays far from the stack limit
_CONTAINERS = (dict, list)


class OversizedNumber:
    """A number literal too large to be a number here: an integer of too many digits, or beyond a float."""

    def __init__(self, literal: str):
        self.literal = literal

    def __repr__(self):
        digits = len(self.literal.lstrip("-"))
        if digits > MAX_INT_DIGITS:
            return f"<an integer of {digits} digits>"
        return f"<{self.literal[:40]}: beyond a 64-bit float's range>"

    def __eq__(self, other):
        return isinstance(other, OversizedNumber) and other.literal == self.literal


def _parse_int(literal: str):
    return OversizedNumber(literal) if len(literal.lstrip("-")) > MAX_INT_DIGITS else int(literal)


def _parse_float(literal: str):
    value = float(literal)
    return OversizedNumber(literal) if math.isinf(value) else value


# orjson reads an integer beyond 64 bits as a float, where the standard library keeps an int (and a
# validator names it): a literal with a run of 19 digits goes to the standard library.
_LONG_DIGIT_RUN = "0" * 19
_DIGITS_TO_ZERO = str.maketrans(dict.fromkeys("0123456789", "0"))
_DIGITS_TO_ZERO_BYTES = bytes(ord("0") if byte in b"0123456789" else ord(" ") for byte in range(256))


def _has_long_digit_run(text) -> bool:
    if isinstance(text, str):
        return _LONG_DIGIT_RUN in text.translate(_DIGITS_TO_ZERO)
    return _LONG_DIGIT_RUN.encode() in bytes(text).translate(_DIGITS_TO_ZERO_BYTES)


class DuplicateKey(ValueError):
    """An object that names one key twice: JSON parsers keep one of the values without a word. `path` is
    where the object is in the document ("[17]" in a list, "config.optim"; "" for the document itself)."""

    def __init__(self, key: str, path: str):
        super().__init__(f"the key {json.dumps(key, ensure_ascii=False)} appears twice in one object")
        self.key, self.path = key, path


_MISSING = object()


def loads(text):
    """json.loads, or ValueError with one line; nesting deeper than MAX_DEPTH is a ValueError too, and so is
    an object with a key written twice (DuplicateKey)."""
    value = _MISSING
    if not _has_long_digit_run(text):
        # NaN literals, lone surrogates, a byte order mark, bad JSON: the standard library decides
        with contextlib.suppress(orjson.JSONDecodeError):
            value = orjson.loads(text)
    if value is _MISSING:
        if isinstance(text, (bytes, bytearray)):
            # Strictly: json.loads would let the UTF-8 bytes of a surrogate (ED A0 80) through as a lone
            # surrogate, which nothing can store; they are not UTF-8, so not JSON text (UnicodeDecodeError).
            text = text.decode(json.detect_encoding(text))
        try:
            value = json.loads(text, parse_int=_parse_int, parse_float=_parse_float)
        except RecursionError:
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep") from None
    levels, members = _shape(value)
    if levels > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if _may_repeat_a_key(text, value, members):
        _refuse_a_repeated_key(text)
    return value


# JSON's one other way to write a colon, inside a string: \u003a
_ESCAPED_COLON = re.compile(r"\\u003[aA]")
_ESCAPED_COLON_BYTES = re.compile(rb"\\u003[aA]")


def _may_repeat_a_key(text, value, members: int) -> bool:
    """Whether an object of `text` may name a key twice, from counts: each member of an object has one
    colon outside strings (a key twice is a member parsers dropped), and the strings' own colons are in
    the parsed strings, except those written \\u003a. Exact without that escape; with it, maybe."""
    binary = isinstance(text, (bytes, bytearray))
    colons = text.count(b":" if binary else ":")
    if colons == members:  # the common case: no colon in any string
        return False
    if (_ESCAPED_COLON_BYTES if binary else _ESCAPED_COLON).search(text):
        return True
    return colons - _colons_in_strings(value) != members


def _colons_in_strings(value) -> int:
    """The colons in every string of `value`, its objects' keys included."""
    count, layer = 0, [value]
    while layer:
        strings = [item for item in layer if isinstance(item, str)]
        count += sum(item.count(":") for item in strings)
        dicts = [item for item in layer if isinstance(item, dict)]
        count += sum(key.count(":") for item in dicts for key in item)
        layer = [
            inner
            for item in layer
            if isinstance(item, _CONTAINERS)
            for inner in (item.values() if isinstance(item, dict) else item)
        ]
    return count


class _Repeated(dict):
    """An object parsed with a key written twice (`repeated`)."""

    repeated: str


def _object_marking_repeats(pairs: list) -> dict:
    value = dict(pairs)
    if len(value) == len(pairs):
        return value
    seen: set = set()
    marked = _Repeated(value)
    marked.repeated = next(key for key, _ in pairs if key in seen or seen.add(key))
    return marked


def _refuse_a_repeated_key(text) -> None:
    """DuplicateKey for the first object of `text` that writes a key twice, by its path (a batch of 1,000
    points names the point); nothing when none does."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode(json.detect_encoding(text))
    value = json.loads(
        text, parse_int=_parse_int, parse_float=_parse_float, object_pairs_hook=_object_marking_repeats
    )
    stack = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _Repeated):
            raise DuplicateKey(item.repeated, path)
        if isinstance(item, dict):
            stack.extend(
                (f"{path}.{key}" if path else str(key), inner) for key, inner in reversed(item.items())
            )
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", inner) for index, inner in reversed(list(enumerate(item))))


def depth(value) -> int:
    """How many objects and lists deep `value` is (0 for a scalar), without recursion; counting stops past
    MAX_DEPTH, so a self-referencing YAML alias ends too."""
    return _shape(value)[0]


def _shape(value) -> tuple[int, int]:
    """How deep `value` is (as `depth`) and how many members its objects have in all. Level by level, each
    container once a level (an alias shared by many is not walked many times), scalars dropped as each
    level is built: a 1,000-point metrics batch is two levels of comprehensions, not a loop over its
    4,000 values."""
    level, members, layer = 0, 0, [value] if isinstance(value, _CONTAINERS) else []
    while layer and level <= MAX_DEPTH:
        level += 1
        containers = {id(item): item for item in layer}
        members += sum(len(item) for item in containers.values() if isinstance(item, dict))
        layer = [
            inner
            for item in containers.values()
            for inner in (item.values() if isinstance(item, dict) else item)
            if isinstance(inner, _CONTAINERS)
        ]
    return level, members


def beyond_int64(value, where: str = "") -> str | None:
    """The dotted path of the first integer in `value` (nested dicts and lists) that does not fit in 64
    bits (or an OversizedNumber), else None."""
    stack = [(where, value)]
    while stack:
        path, item = stack.pop()
        whole = isinstance(item, int) and not isinstance(item, bool)
        wide = whole and not -INT64_MAX - 1 <= item <= INT64_MAX
        if wide or isinstance(item, OversizedNumber):
            return path or "value"
        if isinstance(item, dict):
            stack.extend((f"{path}.{key}" if path else str(key), inner) for key, inner in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{path}[{index}]", inner) for index, inner in enumerate(item))
    return None


def readable(text: str) -> str:
    """`text` with every lone surrogate written as its escape (\\ud800), so a message can quote it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _is_storable(text: str) -> bool:
    """Valid Unicode (JSON's "\\ud800" escape decodes to a lone surrogate, which is not) without NUL
    (Postgres text and jsonb refuse it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def unstorable_text(value, where: str = "") -> str | None:
    """The dotted path (`where` for `value` itself) of the first string in `value` (nested dicts and lists,
    keys included) that no database or page can store (a lone surrogate, or NUL), else None."""
    stack = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str) and not _is_storable(item):
            return path
        if isinstance(item, dict):
            for key, inner in reversed(item.items()):
                inner_path = f"{path}.{readable(str(key))}" if path else readable(str(key))
                if isinstance(key, str) and not _is_storable(key):
                    return inner_path
                stack.append((inner_path, inner))
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{path}[{index}]", inner) for index, inner in reversed(list(enumerate(item))))
    return None


# 15 us on a 1,000-point metrics batch (53 KB); lower-casing the body to search it once took 50 us
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:[dD]|0000)")


def may_hold_unstorable_text(body: bytes) -> bool:
    """Whether JSON text could decode to a lone surrogate or NUL: only a \\uD800-\\uDFFF or \\u0000 escape
    makes one (UTF-8 cannot encode a surrogate; JSON allows no raw control character in a string), so a
    body without one needs no walk (a 10,000-point metrics batch)."""
    return _UNSTORABLE_ESCAPE.search(body) is not None


UNSTORABLE_TEXT = (
    "must be valid Unicode text without NUL (a lone surrogate such as \\ud800 is not, nor \\u0000)"
)


def jsonb_safe(value):
    """What Postgres JSON columns refuse, made storable: NaN and infinities become null (charts draw a
    gap) and NUL characters, which a collapsing model does generate, become U+FFFD."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {key: jsonb_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonb_safe(item) for item in value]
    return value


_JSON_TYPES = (
    (bool, "a boolean"),
    (dict, "an object"),
    (list, "a list"),
    (str, "a string"),
    ((int, float, OversizedNumber), "a number"),
)


def json_type(value) -> str:
    """What a JSON value is, in JSON's words: a message about an API body names the type a user sent."""
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)
