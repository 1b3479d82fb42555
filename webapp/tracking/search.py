"""MLflow's search syntax (mlflow/utils/search_utils.py), for runs/search and experiments/search: a filter
of `<entity>.<name> <comparator> <value>` clauses joined by AND, and order_by entries `<entity>.<name>
[ASC|DESC]`. A notebook's first question, "the best run by reward", is
`search_runs(order_by=["metrics.reward DESC"])`.

What a name is decides its comparators and its value: text (params, tags, a run's name) is compared with a
quoted string (=, !=, LIKE and ILIKE with SQL's % and _; IS NULL and IS NOT NULL for params and tags),
numbers (metrics, times in milliseconds) with a number (=, !=, >, >=, <, <=), a run's id and the datasets
it used (`datasets.name`, `.digest`, `.context`: true if any of them passes) also with a list, IN ('a',
'b'). A
name with other characters than letters, digits, `_` and `.` is quoted, in backquotes or double quotes
(veRL's params.`actor_rollout_ref/actor/lr`). A value runs to its closing quote, so "a = 'x' OR b = 'y'" is
not one clause whose value is "x' OR b = 'y". OR is not MLflow's either. A quote inside a value may be
written twice or after a backslash, and is kept as written, as MLflow keeps it ('it''s' finds no "it's";
"it's" in double quotes does).

Sorting: each entry in turn, NaN after the other values and values missing last whichever the direction,
as MLflow's SQL store does; the order before it (newest first, then by run id) breaks ties.
"""

import math
import re
import sys
from collections.abc import Iterable

from webapp.tracking.protocol import invalid

# The kinds of searchable values, and the comparators MLflow's store takes for each.
TEXT, NAME, NUMBER, ID, DATASET = "text", "name", "number", "id", "dataset"
COMPARATORS = {
    TEXT: ("=", "!=", "LIKE", "ILIKE", "IS NULL", "IS NOT NULL"),  # params and tags: a run may have none
    NAME: ("=", "!=", "LIKE", "ILIKE"),  # a run's name and status, an experiment's name
    NUMBER: ("=", "!=", ">", ">=", "<", "<="),
    ID: ("=", "!=", "LIKE", "ILIKE", "IN", "NOT IN"),  # a run's id: MLflow takes a list for it alone
    DATASET: ("=", "!=", "LIKE", "ILIKE", "IN", "NOT IN"),  # a dataset the run used: true if any passes
}

_NAME = r"""(?:(?P<entity>\w+)\.)?(?:`(?P<backquoted>[^`]+)`|"(?P<quoted>[^"]+)"|(?P<plain>[\w.]+))"""
_COMPARATOR = r"(?P<op>!=|>=|<=|=|>|<|(?i:not\s+in|in|i?like|is\s+not\s+null|is\s+null)(?!\w))"
_VALUE = (
    r"""(?:'(?P<single>(?:[^'\\]|''|\\.)*)'|"(?P<double>(?:[^"\\]|""|\\.)*)"|\((?P<items>[^()]*)\)"""
    r"""|(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.]))"""
)
_CLAUSE = re.compile(rf"\s*{_NAME}\s*{_COMPARATOR}\s*(?:{_VALUE})?\s*")
_AND = re.compile(r"(?i:and)\s+")
_ITEM = re.compile(r"""\s*(?:'((?:[^'\\]|''|\\.)*)'|"((?:[^"\\]|""|\\.)*)")\s*(?:,|$)""")
_ORDER = re.compile(rf"\s*{_NAME}(?:\s+(?P<direction>(?i:asc|desc)))?\s*")
# MLflow's spellings of each entity, as the prefix of our names ("" for the run's own attributes).
_ENTITIES = {
    **dict.fromkeys(("attributes", "attribute", "attr", "run"), ""),
    **dict.fromkeys(("params", "param", "parameters", "parameter"), "params."),
    **dict.fromkeys(("tags", "tag"), "tags."),
    **dict.fromkeys(("metrics", "metric"), "metrics."),
    **dict.fromkeys(("datasets", "dataset"), "datasets."),
}


# A search judges every clause and sort of every run in Python: one request of 40,000 clauses held a server
# thread for 25 s. MLflow's notebooks ask a few.
MAX_CLAUSES = MAX_ORDERS = 100


def parse_filter(text: str, names: dict[str, str], field: str = "filter") -> list[tuple[str, str, object]]:
    """[(name, comparator, value)] from "run_name LIKE 'lr%' AND metrics.reward > 0.5". `names`: the
    searchable names and their kinds, a prefix ("params.") standing for every name under it. Names are
    normalised ("attributes.status" -> "status", "param.lr" -> "params.lr", quotes dropped); anything
    else is refused, naming what is supported."""
    clauses, at = [], 0
    while text.strip():
        match = _CLAUSE.match(text, at)
        name = match and _name(match)
        kind = match and _kind(name, names)
        if not kind:
            raise invalid(field, _unsupported(text[at:], names))
        op = " ".join(match["op"].upper().split())
        clauses.append((name, op, _value(match, name, kind, op, field)))
        if len(clauses) > MAX_CLAUSES:
            raise invalid(field, f"has more than {MAX_CLAUSES} clauses; at most {MAX_CLAUSES} a search")
        at = match.end()
        if at == len(text):
            break
        joined = _AND.match(text, at)
        if not joined:
            raise invalid(field, _unsupported(text[at:], names))
        at = joined.end()
    return clauses


def parse_order_by(
    entries: list[str], names: dict[str, str], field: str = "order_by"
) -> list[tuple[str, bool]]:
    """[(name, descending)] from ["metrics.reward DESC", "params.lr"] (ascending unless DESC)."""
    if len(entries) > MAX_ORDERS:
        raise invalid(field, f"has {len(entries):,} entries; at most {MAX_ORDERS} a search")
    orders = []
    for index, entry in enumerate(entries):
        match = _ORDER.fullmatch(entry)
        if not match or not _kind(_name(match), names):
            shown = entry if len(entry) <= 80 else entry[:80] + "..."
            raise invalid(
                f"{field}[{index}]",
                f"{shown!r} is not supported; EchoLab's MLflow endpoint sorts by {_listed(names)}, each "
                "followed by ASC or DESC",
            )
        orders.append((_name(match), (match["direction"] or "").upper() == "DESC"))
    return orders


def matches(actual, op: str, value) -> bool:
    """Whether a value (None: the run has none; a list: one per dataset the run used, any passing) passes a
    clause, as MLflow's store decides."""
    if isinstance(actual, list):
        return any(matches(each, op, value) for each in actual)
    if op in ("IS NULL", "IS NOT NULL"):
        return (actual is None) == (op == "IS NULL")
    if actual is None:  # a param or metric the run has not logged matches no other clause on it
        return False
    if op in ("IN", "NOT IN"):
        return (actual in value) == (op == "IN")
    if op in ("LIKE", "ILIKE"):
        return like(value, actual, ignore_case=op == "ILIKE")
    actual = _as_stored(actual)  # (NaN fails every comparison but !=, there as here)
    return {
        "=": lambda: actual == value,
        "!=": lambda: actual != value,
        ">": lambda: actual > value,
        ">=": lambda: actual >= value,
        "<": lambda: actual < value,
        "<=": lambda: actual <= value,
    }[op]()


def found(items: Iterable, clauses: list[tuple[str, str, object]], orders: list[tuple[str, bool]]) -> list:
    """The items (runs, experiments: anything with a `searched(name)` value) that pass every clause, sorted
    by each order in turn (the first decides), NaN after the other values and missing ones last, as MLflow's
    SQL store sorts; ties keep the order `items` came in."""
    items = [
        item for item in items if all(matches(item.searched(name), op, value) for name, op, value in clauses)
    ]
    for name, descending in reversed(orders):
        values = [item.searched(name) for item in items]
        groups = [_group(value) for value in values]
        present = [(value, item) for value, item, group in zip(values, items, groups) if group == 0]
        present.sort(key=lambda pair: _as_stored(pair[0]), reverse=descending)  # stable, reversed or not
        items = [item for _, item in present] + [
            item for last in (1, 2) for item, group in zip(items, groups) if group == last
        ]
    return items


def _as_stored(value):
    """A value as MLflow's SQL store compares and sorts it: infinities as the largest finite floats."""
    if isinstance(value, float) and math.isinf(value):
        return math.copysign(sys.float_info.max, value)
    return value


def _group(value) -> int:
    """0: a value sorted by; 1: NaN; 2: none."""
    if value is None:
        return 2
    return 1 if isinstance(value, float) and math.isnan(value) else 0


# The other names MLflow takes for a run's attributes, to filter and sort by (its UI's column "Created")
_ATTRIBUTE_ALIASES = dict.fromkeys(("created", "Created"), "start_time")


def _name(match: re.Match) -> str:
    key = match["backquoted"] or match["quoted"] or match["plain"]
    entity = match["entity"]
    prefix = "" if entity is None else _ENTITIES.get(entity.lower())
    if prefix is None:
        return f"{entity}.{key}"
    return prefix + key if prefix else _ATTRIBUTE_ALIASES.get(key, key)


def _kind(name: str, names: dict[str, str]) -> str | None:
    if name in names and not name.endswith("."):
        return names[name]
    entity, dot, key = name.partition(".")
    return names.get(entity + dot) if dot and key else None  # "params." alone names no param


def _value(match: re.Match, name: str, kind: str, op: str, field: str):
    given = next(
        (group for group in ("single", "double", "number", "items") if match[group] is not None), None
    )
    if op not in COMPARATORS[kind]:
        raise invalid(field, f"{name} is compared with {', '.join(COMPARATORS[kind])}, not {op}")
    if op in ("IS NULL", "IS NOT NULL"):
        if given is not None:
            raise invalid(field, f"{name} {op} takes no value")
        return None
    if op in ("IN", "NOT IN"):
        if given != "items":
            raise invalid(field, f"{name} {op} takes a list of quoted values, as {name} {op} ('a', 'b')")
        return tuple(_items(match["items"], name, field))
    if kind == NUMBER:
        if given != "number":
            raise invalid(field, f"{name} is compared with a number, as {name} {op} 0.5 (no quotes)")
        return float(match["number"])
    if given not in ("single", "double"):
        raise invalid(field, f"{name} is compared with a quoted value, as {name} {op} 'a'")
    return match["single"] if given == "single" else match["double"]


def _items(text: str, name: str, field: str) -> list[str]:
    items, at = [], 0
    while at < len(text.rstrip()) or not items:
        item = _ITEM.match(text, at)
        if not item or item.end() == at:
            raise invalid(field, f"{name}: ({text[:60]}) is not a list of quoted values, as ('a', 'b')")
        items.append(item[1] if item[1] is not None else item[2])
        at = item.end()
    return items


def like(pattern: str, text: str, ignore_case: bool = False) -> bool:
    """SQL's LIKE: % any run of characters, _ any one. Not one regular expression with a `.*` per %: that
    backtracked without end on '%%%%%%%%%%%%x' (a fuzzer's search held a web worker until it was killed).
    The pieces between the %s match a fixed number of characters each, so the first is matched at the
    start, the last at the end, and each other one at its leftmost place after the one before (the
    leftmost is never worse for what follows): linear in the text for each piece."""
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    pieces = [
        (re.compile("".join("." if c == "_" else re.escape(c) for c in piece), flags), len(piece))
        for piece in pattern.split("%")
    ]
    if len(pieces) == 1:
        return pieces[0][0].fullmatch(text) is not None
    (first, _), *middle, (last, last_length) = pieces
    start = first.match(text)
    if start is None:
        return False
    at = start.end()
    for piece, _ in middle:
        found = piece.search(text, at)
        if found is None:
            return False
        at = found.end()
    end = len(text) - last_length
    return end >= at and last.fullmatch(text, end) is not None


def _listed(names: dict[str, str]) -> str:
    return ", ".join(name + ("<name>" if name.endswith(".") else "") for name in sorted(names))


def _unsupported(rest: str, names: dict[str, str]) -> str:
    shown = rest.strip() if len(rest.strip()) <= 80 else rest.strip()[:80] + "..."
    return (
        f"{shown!r} is not supported; EchoLab's MLflow endpoint supports <name> <comparator> <value> "
        f"clauses joined by AND, for {_listed(names)}"
    )
