"""All of a run's metrics as CSV or JSONL, streamed: rows come from a server-side cursor in chunks, so
an export of millions of points never sits in memory.

CSV: a `step` column and one column per key (sorted); an empty cell is no point at that step, and
non-finite values are written as nan, inf, -inf. JSONL: one object per step in the trainer's
metrics.jsonl format, {"step": n, "<key>": value, ...}; non-finite values are the strings "NaN",
"Infinity", "-Infinity" (standard JSON has no literal for them; the ingest API accepts them back).
A point stored as null is a NaN (SQLite stores a NaN as null, and the ingest reads null as a NaN, as
MetricPoint.steps does), so it is written as one, not as a missing value.
Several runs (the runs table's export): one CSV with the run first on each row, see runs_csv_lines.
A key named like one of the export's own columns (a script that logs its step as a metric, "step") is
written as "step (metric)", so the real steps are never overwritten and the file imports back; in CSV
also a key that the reader would take for another column once it strips the header's spaces (" step").
A CSV name that opens like a formula (=, +, -, @) gets a leading apostrophe, which the import takes off.
"""

import csv
import io
import itertools
import json
import math
from operator import itemgetter

from diagnostics.series import NON_FINITE, as_text_cell, csv_column_name
from webapp.metrics.models import MetricPoint

FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
_NON_FINITE_NAMES = {repr(value): name for name, value in NON_FINITE.items()}
CHUNK_ROWS = 10_000


def run_keys(run_id: int) -> list[str]:
    return list(
        MetricPoint.objects.filter(run_id=run_id).order_by("key").values_list("key", flat=True).distinct()
    )


def _steps(run_id: int):
    """(step, {key: value}) in step order."""
    points = (
        MetricPoint.objects.filter(run_id=run_id)
        .order_by("step", "key")
        .values_list("step", "key", "value")
        .iterator(chunk_size=CHUNK_ROWS)
    )
    for step, rows in itertools.groupby(points, key=itemgetter(0)):
        yield step, {key: value for _, key, value in rows}


def csv_writer():
    """A function that turns one row into one CSV line."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def line(row):
        writer.writerow(row)
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    return line


# The first columns of an export of several runs (the runs table's "Export selected as CSV"): the import
# knows such a file by them, and says it takes one run's metrics.
RUNS_CSV_COLUMNS = ("run_id", "run", "experiment", "step")


def key_columns(keys: list[str], fixed: tuple[str, ...], read_as=lambda name: name) -> list[str]:
    """The column name of each key: the key itself, or "<key> (metric)" (as often as needed) where the
    format's reader (`read_as`: a CSV header is read stripped, csv_column_name) would take it for one of
    the `fixed` columns or another key's. A key read back as it is written keeps its name first: " step"
    gives way to "step", not the other way round."""
    taken = {read_as(name) for name in fixed}
    names = dict.fromkeys(keys)
    for key in keys:
        if read_as(key) == key and key not in taken:
            names[key] = key
            taken.add(key)
    for key in sorted(
        (key for key, name in names.items() if name is None), key=lambda key: read_as(key) != key
    ):
        name = key
        while read_as(name) in taken:
            name += " (metric)"
        taken.add(read_as(name))
        names[key] = name
    return list(names.values())


def csv_columns(keys: list[str], fixed: tuple[str, ...]) -> list[str]:
    """The header cells of `keys`, each read back by diagnostics.series as its own column."""
    names = key_columns(keys, fixed, lambda name: csv_column_name(as_text_cell(name)))
    return [as_text_cell(name) for name in names]


def _cells(values: dict, keys: list[str]):
    return ("" if key not in values else "nan" if values[key] is None else repr(values[key]) for key in keys)


def csv_lines(run_id: int):
    keys = run_keys(run_id)
    line = csv_writer()
    yield line(["step", *csv_columns(keys, ("step",))])
    for step, values in _steps(run_id):
        yield line([step, *_cells(values, keys)])


def runs_csv_lines(runs):
    """Several runs in one CSV: `run_id`, `run` (its name), `experiment`, `step`, then one column per key
    any of them logged (sorted); each run's rows in step order, the runs in the order given."""
    keys = list(
        MetricPoint.objects.filter(run_id__in=[run.pk for run in runs])
        .order_by("key")
        .values_list("key", flat=True)
        .distinct()
    )
    line = csv_writer()
    fixed = RUNS_CSV_COLUMNS
    yield line([*fixed, *csv_columns(keys, fixed)])
    for run in runs:
        names = [as_text_cell(run.display_name), as_text_cell(run.experiment.name)]
        for step, values in _steps(run.pk):
            yield line([run.pk, *names, step, *_cells(values, keys)])


def _json_value(value):
    if value is None:
        return "NaN"
    if math.isfinite(value):
        return value
    return _NON_FINITE_NAMES[repr(value)]


def jsonl_lines(run_id: int):
    keys = run_keys(run_id)
    names = dict(zip(keys, key_columns(keys, ("step",))))
    for step, values in _steps(run_id):
        # A key logged while this streams (a live run) was not in run_keys: named by the same rule.
        row = {
            "step": step,
            **{
                names.get(key) or key_columns([key], ("step",))[0]: _json_value(value)
                for key, value in values.items()
            },
        }
        yield json.dumps(row, allow_nan=False) + "\n"


def lines(run_id: int, fmt: str):
    return csv_lines(run_id) if fmt == "csv" else jsonl_lines(run_id)
