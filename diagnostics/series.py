"""Read a metric history from CSV or JSON lines into [(step, {key: value})], sorted by step.

CSV: a header row with a `step` column and one column per metric, separated by commas (a file separated by
semicolons or tabs is refused with a hint), lines ending in LF, CRLF or CR; an empty cell means "not logged".
JSONL (our metrics.jsonl): one object per line, `{"step": n, "<key>": value, ...}`; null = not logged.
A Hugging Face `trainer_state.json` (what TRL's trainers write with each checkpoint) is read as the JSON
lines of its `log_history`, and a JSON list of objects as its items: line N is then the Nth. Any of them
may come gzip-compressed.
NaN and inf are numbers: a NaN gradient norm is exactly what the detector looks for. In CSV, nan, inf and
Infinity in any case; in JSON, NaN, Infinity and -Infinity, bare or quoted (NON_FINITE: the strings the
ingest API takes), and no other string: "1.5" is refused as the ingest API refuses it, as is a step "3" or
a key given twice. A number too large for a float (1e400) is an error, not an inf.
Rows of one step are merged (a trainer's log history has a training row and an evaluation row at the
same step, both with its `epoch`), unless they give one column two different values. Every problem raises
ValueError naming the line and column, quoting at most 100 characters of a bad value or name (`shown`).
"""

import csv
import io
import json
import math
import operator
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable
from typing import Any

from diagnostics import gzip_stream
from diagnostics.quoting import clipped, quoted

MAX_BYTES = 64 * 1024 * 1024

# [(step, {key: value})], sorted by step: what load_series returns and Detector.replay takes.
Series = list[tuple[int, dict[str, float]]]
# (line number, step, values) as parsed, before the steps are checked and sorted.
_Row = tuple[int, int, dict[str, float]]
PathOrText = str | os.PathLike[str]


def load_series(
    path_or_text: PathOrText, fmt: str | None = None, max_bytes: int = MAX_BYTES, max_step: int | None = None
) -> Series:
    """`path_or_text`: a path, or the text itself (a str holding a newline or starting with "{" or "[").

    `fmt`: "csv", "jsonl", or None to tell from the first character ("{" or "[" means JSON).
    `max_step`: a larger step is refused, naming its line (the first in the file).
    """
    text = _read(path_or_text, max_bytes)
    if fmt is None:
        fmt = "jsonl" if text.lstrip().startswith(("{", "[")) else "csv"
    if fmt not in ("csv", "jsonl"):
        raise ValueError(f"format: {quoted(fmt)} is not 'csv' or 'jsonl'")
    checked = bool(_MAYBE_BEYOND_FLOAT.search(text))  # only then is a cell read number by number
    if fmt == "csv":
        rows = _parse_csv(text, checked)
    else:
        records = _document_records(text, checked)
        lines = enumerate(text.splitlines(), start=1) if records is None else enumerate(records, start=1)
        rows = _parse_jsonl(lines, checked)
    by_step: dict[int, dict[str, float]] = {}
    for line, step, values in rows:
        if max_step is not None and step > max_step:
            raise ValueError(f"line {line}: step {quoted(step)} is larger than the largest step, {max_step}")
        merged = by_step.setdefault(step, values)
        if merged is values:
            continue
        for key in values.keys() & merged.keys():
            if not _same(values[key], merged[key]):  # named with the first row of this step that gave it
                earlier = next(n for n, s, v in rows if s == step and key in v)
                raise ValueError(
                    f"line {line}: step {step}, column {quoted(key)} is {values[key]!r} here but "
                    f"{merged[key]!r} on line {earlier}"
                )
        # A new dict, not merged.update(): each row keeps its own values, so that the error above finds
        # the line that gave a column, not the first line of the step.
        by_step[step] = {**merged, **values}
    return sorted(by_step.items(), key=lambda row: row[0])


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _document_records(text: str, checked: bool) -> list | None:
    """The records of a text that is one JSON document: a trainer_state.json's `log_history`, or a list of
    objects. None when it is not one document (JSON lines, a line of them, or broken JSON: each line is
    then read, and named, on its own)."""
    try:
        document = _loads(text, checked)
    except (ValueError, RecursionError, _BeyondFloat):
        return None
    if isinstance(document, dict) and isinstance(document.get("log_history"), list):
        if type(document) is _Duplicated:  # two log histories, say: which one is meant is not known
            raise ValueError(f"key {quoted(document.duplicate)} appears twice in the trainer state")
        return document["log_history"]
    if isinstance(document, list):
        return document  # each item must be an object with a step, as a line of JSON lines
    if isinstance(document, dict) and len([line for line in text.splitlines() if line.strip()]) > 1:
        raise ValueError(
            "a JSON document, but not JSON lines (one object per line) nor a trainer_state.json "
            "(it has no log_history list)"
        )
    return None


# A literal that may not fit in a float: an exponent of three digits or more, or 309 digits in a row.
_MAYBE_BEYOND_FLOAT = re.compile(r"[eE][+]?0*[0-9]{3}|[0-9]{309}")


def _read(path_or_text: PathOrText, max_bytes: int) -> str:
    if isinstance(path_or_text, str) and ("\n" in path_or_text or path_or_text.startswith(("{", "["))):
        data = path_or_text.encode()
    else:
        size = os.path.getsize(path_or_text)
        if size > max_bytes:
            raise ValueError(f"file is {size} bytes, over the limit of {max_bytes}")
        with open(path_or_text, "rb") as f:
            data = f.read()
    if len(data) > max_bytes:
        raise ValueError(f"text is {len(data)} bytes, over the limit of {max_bytes}")
    if data[:2] == gzip_stream.MAGIC:
        data = _gunzip(data, max_bytes)
    if data[:2] in _UTF16_BOMS:  # a spreadsheet's "Unicode text", saved with its byte order mark
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"not CSV or JSON lines: not UTF-16 text after its byte order mark (byte {error.start})"
            ) from None
    if b"\0" in data:
        raise ValueError("not CSV or JSON lines: the data is binary")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"not CSV or JSON lines: not UTF-8 text (byte {error.start})") from None


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    """What a gzip file holds (every member), refused beyond max_bytes."""
    try:
        return b"".join(gzip_stream.inflate([data], max_bytes))
    except gzip_stream.Oversized:
        raise ValueError(f"file is over the limit of {max_bytes:,} bytes once decompressed") from None
    except gzip_stream.Truncated:
        raise ValueError("gzip: the file ends before its compressed data does") from None
    except ValueError as error:
        raise ValueError(f"gzip: {error}") from None


def key_problem(key: Any) -> str | None:
    """What is wrong with a metric name, or None: the one rule for files (CSV columns, JSONL keys) and for
    the web app's live ingest. A name is text a database can store: not blank, no NUL, no lone surrogate
    (JSON's \\ud800 escapes decode to one)."""
    if not isinstance(key, str) or not key.strip():
        return "must not be empty"
    if "\x00" in key:
        return "must not contain NUL (\\u0000)"
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode text (it holds a lone surrogate)"
    return None


# A number as a file writes one: decimal, or nan / inf / infinity in any case. float() alone also reads
# "1_5" as 15.0 and other scripts' digits ("\u0663" as 3).
_DECIMAL = re.compile(
    r"[+-]?(([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?|inf|infinity|nan)", re.IGNORECASE
)


def _number(text: str, where: str) -> float:
    if not _DECIMAL.fullmatch(text):
        raise ValueError(f"{where}: {quoted(text)} is not a number")
    value = float(text)
    if math.isinf(value) and "inf" not in text.lower():
        raise ValueError(f"{where}: {quoted(text)} is beyond a 64-bit float's range")
    return value


# The strings a JSON value may be for the numbers JSON has no literal for: the one rule for files and for
# the web app's live ingest, which its export writes back.
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _non_finite(text: str, where: str) -> float:
    if text not in NON_FINITE:
        raise ValueError(
            f"{where}: {quoted(text)} is not a number (a number is written bare; the only strings read as "
            'numbers are "NaN", "Infinity" and "-Infinity")'
        )
    return NON_FINITE[text]


def _step(value: Any, where: str) -> int:
    """A step: an int, or a float that is one (3.0), as the ingest API takes it; a JSON string is not."""
    if isinstance(value, str):
        raise ValueError(f'{where}: {quoted(value)} is a string, not a number (write 3, not "3")')
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: {quoted(value)} is not a step number")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{where}: {quoted(value)} is not a whole step number >= 0")
        return value
    if not math.isfinite(value) or value != int(value) or value < 0:
        raise ValueError(f"{where}: {quoted(value)} is not a whole step number >= 0")
    return int(value)


def _parse_csv(text: str, checked: bool) -> list[_Row]:
    # The rows' fast path reads cells with float(), which takes what _DECIMAL does not ("1_5", "\u0663"):
    # a file with an underscore or a letter beyond ASCII below its header is read cell by cell.
    body = text.partition("\n")[2]
    checked = checked or "_" in body or not body.isascii()
    # strict: a quote never closed is an error, not a cell that swallows the rest of the file. newline="":
    # rows end at \n, \r\n or a lone \r (an old Mac file), as the csv module reads them.
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_separator(text), strict=True)
    row_start = [1]  # the line the row being read starts on (a quoted cell may span lines)
    try:
        return _csv_rows(reader, checked, row_start)
    except csv.Error as error:  # also a cell longer than csv.field_size_limit()
        hint = "; it looks like JSON lines: read it as jsonl" if text.lstrip().startswith("{") else ""
        if str(error) == "unexpected end of data":
            raise ValueError(
                f'line {row_start[0]}: a quoted cell opened on this line is never closed (a " missing; '
                f"the file ends inside it){hint}"
            ) from None
        raise ValueError(f"line {reader.line_num}: {error}{hint}") from None


# A spreadsheet reads a cell that opens with one of these as a formula ("CSV injection", OWASP). A CSV
# writer shows such a name as text with a leading apostrophe (as_text_cell); reading a header takes one
# off again (csv_column_name), so a key comes back as it was logged. Apostrophes already before the
# character count too ("'=x" is written "''=x"), so the round trip is exact.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def as_text_cell(text: str) -> str:
    return "'" + text if text.lstrip("'")[:1] in FORMULA_STARTS else text


def csv_column_name(cell: str) -> str:
    """A CSV header cell as the key it names: without surrounding spaces, and without the apostrophe
    as_text_cell put before a formula's first character."""
    name = cell.strip()
    return name[1:] if name[:1] == "'" and name.lstrip("'")[:1] in FORMULA_STARTS else name


def _csv_rows(reader: Any, checked: bool, row_start: list[int]) -> list[_Row]:
    header = next(reader, None)
    row_start[0] = reader.line_num + 1
    if not header or header == [""]:
        raise ValueError("line 1: empty file, expected a CSV header or JSON lines")
    header = _with_step_column([csv_column_name(name) for name in header])
    if "step" not in header:
        raise ValueError(
            f"line 1: no 'step' column, nor one of {', '.join(STEP_NAMES[1:])} in any case "
            f"(columns: {clipped(', '.join(header))}){_no_step_hint(header)}"
        )
    for i, name in enumerate(header):
        if not name:
            raise ValueError(f"line 1, column {i + 1}: empty column name")
        if header.index(name) != i:
            raise ValueError(f"line 1: column {quoted(name)} appears twice")
        if key_problem(name):
            raise ValueError(f"line 1, column {i + 1}: the name {quoted(name)} {key_problem(name)}")
    step_at = header.index("step")
    names = [name for name in header if name != "step"]
    metric_cells = cells_at([i for i, name in enumerate(header) if name != "step"])
    rows: list[_Row] = []
    for cells in reader:
        row_start[0] = reader.line_num + 1
        if not cells:
            continue
        # The common row (every cell a number, a whole step) in C: float() skips the whitespace that
        # strip() would. Any other row goes through _csv_row, which reads it cell by cell and names the
        # cell that is wrong; the two agree on every row the fast path takes.
        try:
            if len(cells) == len(header) and not checked:
                number = float(cells[step_at])
                step = int(number)
                if step == number and 0 <= step <= _EXACT_FLOAT_INT:  # beyond, a float may misread it
                    rows.append((reader.line_num, step, dict(zip(names, map(float, metric_cells(cells))))))
                    continue
        except (ValueError, OverflowError):
            pass
        rows.append(_csv_row(header, cells, reader.line_num))
    return rows


# The step under the names other tools write it: W&B's history (_step), Hugging Face's global_step, and
# TensorBoard's and W&B's CSV exports (Step). Read as our `step` when a file has no `step` of its own.
STEP_NAMES = ("step", "_step", "global_step")


def _step_name(names: Iterable[str]) -> str | None:
    """The one name among names that is the step: `step`, else a single one of STEP_NAMES in any case."""
    names = list(names)
    if "step" in names:
        return "step"
    found = [name for name in names if name.lower() in STEP_NAMES]
    return found[0] if len(found) == 1 else None


def _with_step_column(header: list[str]) -> list[str]:
    step = _step_name(header)
    return [("step" if name == step else name) for name in header]


def _separator(text: str) -> str:
    """A comma, or a tab where the header names its step column between tabs and not between commas (a
    spreadsheet's "Unicode text" or "tab-separated" export)."""
    header = text[: min((text.find(end) for end in "\r\n" if end in text), default=len(text))]
    if not _step_name(csv_column_name(name) for name in header.split(",")) and _step_name(
        csv_column_name(name) for name in header.split("\t")
    ):
        return "\t"
    return ","


def _no_step_hint(header: list[str]) -> str:
    """Why a header may have no step column: the file is JSON lines, or its separator is a semicolon
    (Excel's in locales that write 0,5; read as CSV, such a number would be two cells, so it is not read)."""
    if header[0].startswith("{"):
        return "; it looks like JSON lines: read it as jsonl"
    if _step_name(name.strip() for name in ",".join(header).split(";")):
        return "; the file seems to separate its columns with ';': commas (or tabs) are read"
    return ""


def cells_at(indices: list[int]) -> Any:
    """A function: a sequence (a CSV row, a row's values) -> a tuple of its items at `indices` (in C)."""
    if len(indices) == 1:
        return lambda cells: (cells[indices[0]],)
    return operator.itemgetter(*indices) if indices else lambda cells: ()


def _csv_row(header: list[str], cells: list[str], line: int) -> _Row:
    if len(cells) != len(header):
        raise ValueError(f"line {line}: {len(cells)} cells, the header has {len(header)}")
    step_cell = cells[header.index("step")].strip()
    if not step_cell:
        raise ValueError(f"line {line}, column 'step': empty")
    where = f"line {line}, column 'step'"
    # Whole numbers as integers: a float would misquote them (-5 as -5.0, 10**23 as 99999999999999991611392)
    whole = _WHOLE.fullmatch(step_cell) and len(step_cell) <= _WHOLE_DIGITS
    step = _step(int(step_cell) if whole else _number(step_cell, where), where)
    values = {
        name: _number(cell.strip(), f"line {line}, column {quoted(name)}")
        for name, cell in zip(header, cells)
        if name != "step" and cell.strip()
    }
    return line, step, values


_WHOLE = re.compile(r"[+-]?[0-9]+")
_EXACT_FLOAT_INT = 2**53  # every whole number up to this is exactly a float
_WHOLE_DIGITS = 400  # Python reads no longer decimal text as an int (4,300), and no step is this long


def _loads(text: str, checked: bool) -> Any:
    return json.loads(text, parse_float=_checked_float if checked else None, object_pairs_hook=_object)


class _Duplicated(dict):
    """A JSON object in which the key `duplicate` appears more than once: json.loads would keep its last
    value without a word. Marked, not raised, so that the record it is in is named (the Nth of a list)."""

    duplicate: str


def _object(pairs: list[tuple[str, Any]]) -> dict:
    record = dict(pairs)
    if len(record) == len(pairs):
        return record
    marked = _Duplicated(record)
    marked.duplicate = next(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
    return marked


def _json_record(line: int, raw: str, checked: bool) -> Any:
    """The JSON value of a line, None for a blank one."""
    if not raw.strip():
        return None
    try:
        return _loads(raw, checked)
    except json.JSONDecodeError as error:
        raise ValueError(f"line {line}: not JSON ({error.msg})") from None
    except _BeyondFloat as error:
        raise ValueError(f"line {line}: {quoted(str(error))} is beyond a 64-bit float's range") from None
    except ValueError:  # an integer of more digits than Python converts (4,300)
        raise _too_long_integer(line, raw) from None
    except RecursionError:
        raise ValueError(f"line {line}: not JSON (nested too deeply)") from None


class _IntegerText(str):
    """An integer literal kept as its text, by _too_long_integer."""


def _too_long_integer(line: int, raw: str) -> ValueError:
    """The error for a line holding an integer longer than Python converts: the one json.loads raises names
    no key, and tells to call sys.set_int_max_str_digits(). The line is read again, integers as text, to
    name the key."""
    limit = sys.get_int_max_str_digits()
    try:
        record = json.loads(raw, parse_int=_IntegerText)
    except RecursionError:  # nested too deeply after the integer: the key is not named
        record = None
    for key, value in record.items() if isinstance(record, dict) else ():
        digits = len(value.lstrip("-")) if type(value) is _IntegerText else 0
        if digits > limit:
            where = "key 'step'" if key == "step" else f"column {quoted(key)}"
            return ValueError(f"line {line}, {where}: an integer of {digits} digits is too large")
    return ValueError(f"line {line}: an integer of more than {limit} digits is too large")


class _BeyondFloat(Exception):
    """A JSON number literal that a float cannot hold (its text is the message)."""


def _checked_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise _BeyondFloat(literal)
    return value


def _parse_jsonl(lines: Iterable[tuple[int, Any]], checked: bool) -> list[_Row]:
    """lines: (line number, its text, or the record a trainer_state.json's log_history holds there)."""
    rows: list[_Row] = []
    known: set[str] = set()
    for line, raw in lines:
        record = _json_record(line, raw, checked) if isinstance(raw, str) else raw
        if record is None:
            continue
        if not isinstance(record, dict):
            raise ValueError(f"line {line}: expected a JSON object, got {type(record).__name__}")
        if type(record) is _Duplicated:
            raise ValueError(f"line {line}: key {quoted(record.duplicate)} appears twice")
        if "step" not in record:
            alias = _step_name(record)
            if alias is None:
                raise ValueError(f"line {line}: no 'step' key (nor one of {', '.join(STEP_NAMES[1:])})")
            record = {("step" if key == alias else key): value for key, value in record.items()}
        step = _step(record["step"], f"line {line}, key 'step'")
        values: dict[str, float] = {}
        for key, value in record.items():
            if key not in known:
                if key_problem(key):
                    raise ValueError(f"line {line}, column {quoted(key)}: the name {key_problem(key)}")
                known.add(key)
            if type(value) is float and key != "step":  # the common value, without the checks below
                values[key] = value
                continue
            if key == "step" or value is None:
                continue
            where = f"line {line}, column {quoted(key)}"
            if isinstance(value, str):
                value = _non_finite(value, where)
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{where}: {quoted(value)} is not a number")
            try:
                values[key] = float(value)
            except OverflowError:
                raise ValueError(f"{where}: an integer of {len(str(value))} digits is too large") from None
        rows.append((line, step, values))
    return rows
