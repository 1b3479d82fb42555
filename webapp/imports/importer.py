"""Imported runs: a metrics file from elsewhere (CSV with a step column, our metrics.jsonl, or a Hugging
Face trainer_state.json; any of them gzip-compressed) becomes a
completed run of an imported experiment, with its metric points and the detector's events, so it is
charted and diagnosed like a live one. Parsing is diagnostics.load_series (its errors name the line
and column); the run, points and events are written in one transaction or not at all."""

import hashlib
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import PurePath

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from diagnostics import Detector, load_series
from diagnostics.aliases import alias_of, canonical
from diagnostics.metrics import TIME_STEP_S, bounds, out_of_bounds
from diagnostics.quoting import quoted
from diagnostics.series import cells_at
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Experiment, Run
from webapp.metrics.ingest import MAX_KEY_LENGTH, MAX_KEYS_PER_RUN, MAX_STEP
from webapp.metrics.models import MetricPoint

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def uncompressed(filename: str) -> PurePath:
    """The file's name as it was before gzip: metrics.csv.gz -> metrics.csv."""
    return PurePath(filename.removesuffix(".gz").removesuffix(".GZ"))


def format_of(filename: str) -> str | None:
    """The format a file name says (metrics.csv.gz says csv), or None to tell from the content."""
    return FORMATS.get(uncompressed(filename).suffix.lower())


def load(path: str, fmt: str | None) -> list[tuple[int, dict[str, float]]]:
    """The series in the file at `path`, keys renamed to ours (diagnostics.aliases) so that charts
    and rules find them. ValueError names the line or column on bad input."""
    series = load_series(path, fmt, max_bytes=settings.IMPORT_MAX_BYTES, max_step=MAX_STEP)
    if not series:
        raise ValueError("no data rows: the file has no steps")
    if not any(values for _, values in series):  # else a completed run with nothing to chart or diagnose
        raise ValueError(
            "no metric values: the file has steps, but each of its metric cells is empty or null"
        )
    keys = keys_of(series)
    # Counted before the renaming too, which only another trainer's names for ours can shorten: a file of a
    # million columns is refused before a row of it is renamed.
    _check_key_count(len({alias_of(key) or key for key in keys}), "metric columns")
    _check_bounds(series)
    if _renames_any(keys):
        series = _canonical_rows(series)
        keys = keys_of(series)
        _check_key_count(len(keys), "metrics once other trainers' names are renamed to ours")
    else:
        _check_key_count(len(keys), "metric columns")
    for key in sorted(keys):
        if len(key) > MAX_KEY_LENGTH:
            raise ValueError(f"column {key[:40]!r}...: names are at most {MAX_KEY_LENGTH} characters")
    return series


def _check_key_count(count: int, what: str) -> None:
    if count > MAX_KEYS_PER_RUN:
        raise ValueError(f"{count:,} {what}; a run logs at most {MAX_KEYS_PER_RUN:,} distinct keys")


def _check_bounds(series) -> None:
    """ValueError naming the first value no metric of its key can take (a success rate of 7.5), by its
    step and the file's own name for the metric."""
    bounded = {key for key in keys_of(series) if bounds(key) is not None}
    if not bounded:
        return
    for step, values in series:
        for key in bounded.intersection(values):
            problem = out_of_bounds(key, values[key])
            if problem:
                raise ValueError(f"step {step}, {quoted(key)}: {problem}")


def keys_of(series) -> set[str]:
    keys: set[str] = set()
    for _, values in series:
        keys.update(values)
    return keys


def _renames_any(keys: set[str]) -> bool:
    """Whether canonical() changes a step that has some of `keys`: when it renames none of them all at
    once, it returns every step as it is (float values, same keys, same order), and the import skips it."""
    every = dict.fromkeys(sorted(keys), 0.0)
    return list(canonical(every)) != list(every)


def points_by_key(series, keys: list[str]):
    """(step, key, value) for every point, key by key and in step order within a key: the order of the
    (run, key, step) index, so each row lands at its right end (Postgres's fast path for appends) instead
    of in one of ten places, which takes the COPY 1.3-1.9x less time (docs/BENCHMARKS.md, Imports)."""
    for key in keys:
        for step, values in series:
            if key in values:
                yield step, key, values[key]


def _canonical_rows(series):
    """[(step, canonical(values))], asking canonical() once per set of keys a row has (a CSV has a few: its
    columns, less the empty cells) instead of once per row. canonical() on {key: its position} says, for
    each of our names, which position's value it takes; every row with those keys then maps the same way."""
    mappings: dict[tuple[str, ...], tuple[tuple[str, ...], Callable]] = {}
    renamed = []
    for step, values in series:
        keys = tuple(values)
        if keys not in mappings:
            taken = canonical({key: float(at) for at, key in enumerate(keys)})
            positions = [int(at) for at in taken.values()]
            mappings[keys] = (tuple(taken), cells_at(positions))
        names, pick = mappings[keys]
        renamed.append((step, dict(zip(names, pick(list(values.values()))))))
    return renamed


def sha256_of(path: str) -> str:
    """The hex SHA-256 of the file's bytes: the same file imported twice has the same one."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def earlier_imports(owner, sha256: str) -> list[Run]:
    """The owner's imported runs that came from a file with these same bytes, oldest first."""
    return list(
        Run.objects.for_user(owner)
        .filter(experiment__imported=True, experiment__import_sha256=sha256)
        .select_related("experiment")
        .order_by("created_at", "pk")
    )


def logged_seconds(series) -> float:
    """The training time a file logged: the sum of its time/step_s (our trainer's), 0 without it."""
    return sum(
        seconds
        for _, values in series
        if (seconds := values.get(TIME_STEP_S)) is not None and math.isfinite(seconds) and seconds > 0
    )


def create_run(owner, name: str, filename: str, series, sha256: str = "") -> Run:
    """An imported experiment with one completed run holding `series` and its detector events. The points go
    in with one COPY (MetricPoint.insert_new) while another thread replays the detector over the series: the
    database works on the points as Python works on the rules."""
    latest = {}
    for _, values in series:
        latest.update(values)
    now = timezone.now()
    # Steps done, as a run trained here counts them: steps 0-79 are 80; a trainer that counts from 1
    # (Hugging Face's global_step in trainer_state.json) logged 1-500 for 500.
    steps_done = min(series[-1][0] + (1 if series[0][0] == 0 else 0), MAX_STEP)
    with ThreadPoolExecutor(1) as pool, transaction.atomic():
        experiment = Experiment.objects.create(
            owner=owner, name=name, config={}, imported=True, import_sha256=sha256
        )
        replay = pool.submit(Detector.replay, series, experiment.detector_overrides)
        run = Run.objects.create(
            experiment=experiment,
            label=f"imported: {filename}"[:300],
            config={},
            status=Run.Status.COMPLETED,
            step=steps_done,
            total_steps=steps_done,
            latest_metrics={key: value if math.isfinite(value) else None for key, value in latest.items()},
            # When it trained is not in the file; how long, where it logged each step's seconds
            started_at=None,
            earlier_training=timedelta(seconds=logged_seconds(series)),
            finished_at=now,
        )
        MetricPoint.insert_new(run.pk, points_by_key(series, sorted(latest)))
        _, found = replay.result()
        DetectorEvent.record_all(run, found)
    return run
