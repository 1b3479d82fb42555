"""Importing a metrics CSV as a run, against the import path it replaced, in the same process and database.

The file: --steps rows of a step column and 10 metric columns (six decimals each), ~96 bytes a row, so
--steps 86500 is ~8 MB / 865k points and --steps 540000 is ~50 MB (IMPORT_MAX_BYTES). Each path gets the
parsed series (importer.load, timed once apart) and creates an imported run with its points, rollups and
detector events in one transaction:
  old: MetricPoint.upsert in batches of 5,000 points, then Detector.replay (the code before this bench);
  new: importer.create_run (one COPY via MetricPoint.insert_new, the detector replayed in a second thread).
Then the points alone, written both ways into fresh runs (no detector). Prints seconds per phase, the ratios,
and the machine's load average (the numbers only compare within a run).
Run:
    nice -n 10 .venv/bin/python bench/imports.py --steps 86500
"""

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG = "postgres://postgres@127.0.0.1:5432"
DB = "echolab_bench_imports"
KEYS = [
    "train/success",
    "train/reward_mean",
    "train/reward_std_in_group",
    "actor/entropy",
    "actor/grad_norm",
    "val/success",
    "critic/value_loss",
    "response_length/mean",
    "actor/pg_loss",
    "actor/kl",
]


def setup():
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    os.environ.update(
        {
            "DATABASE_URL": f"{PG}/{DB}",
            "ECHOLAB_VAR": str(ROOT / "var" / "bench"),
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
            "IMPORT_MAX_BYTES": str(200 * 2**20),
        }
    )
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def write_csv(path: Path, steps: int):
    rng = random.Random(0)
    with open(path, "w") as out:
        out.write("step," + ",".join(KEYS) + "\n")
        for step in range(steps):
            out.write(f"{step}," + ",".join(f"{rng.random():.6f}" for _ in KEYS) + "\n")


def old_create_run(owner, name, filename, series):
    """importer.create_run as it was: upsert batches of 5,000 points, then the detector, one after another."""
    import math

    from django.db import transaction
    from django.utils import timezone

    from diagnostics import Detector
    from webapp.alerts.models import DetectorEvent
    from webapp.core.jsonsafe import jsonb_safe
    from webapp.experiments.models import Experiment, Run
    from webapp.metrics.models import MetricPoint

    latest = {}
    for _, values in series:
        latest.update(values)
    now = timezone.now()
    with transaction.atomic():
        experiment = Experiment.objects.create(owner=owner, name=name, config={}, imported=True)
        run = Run.objects.create(
            experiment=experiment,
            label=f"imported: {filename}",
            config={},
            status=Run.Status.COMPLETED,
            step=series[-1][0],
            total_steps=series[-1][0],
            started_at=now,
            finished_at=now,
            latest_metrics={key: value if math.isfinite(value) else None for key, value in latest.items()},
        )
        batch = []
        for step, values in series:
            batch.extend((step, key, value) for key, value in values.items())
            if len(batch) >= 5000:
                MetricPoint.upsert(run.pk, batch)
                batch = []
        MetricPoint.upsert(run.pk, batch)
        _, found = Detector.replay(series, experiment.detector_overrides)
        DetectorEvent.objects.bulk_create(
            [
                DetectorEvent(
                    run=run,
                    step=e["step"],
                    level=e["level"],
                    rule=e["rule"],
                    message=e["message"],
                    signals=jsonb_safe(e.get("signals", {})),
                )
                for e in found
            ]
        )
    return run


def write_points(owner, series, write) -> float:
    """Seconds for `write(run_id, points)` alone (a fresh run, one transaction): the write paths compared
    without the detector."""
    from django.db import transaction

    from webapp.experiments.models import Experiment, Run

    experiment = Experiment.objects.create(owner=owner, name="points only", config={}, imported=True)
    run = Run.objects.create(experiment=experiment, label="points only", config={})
    points = [(step, key, value) for step, values in series for key, value in values.items()]
    start = time.perf_counter()
    with transaction.atomic():
        write(run.pk, points)
    return time.perf_counter() - start


def upsert_batches(run_id, points):
    from webapp.metrics.models import MetricPoint

    for start in range(0, len(points), 5000):
        MetricPoint.upsert(run_id, points[start : start + 5000])


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=86_500)
    parser.add_argument("--file", default=str(ROOT / "var" / "bench" / "import.csv"))
    args = parser.parse_args()
    setup()
    from django.contrib.auth import get_user_model

    from diagnostics import Detector
    from webapp.imports import importer
    from webapp.metrics.models import MetricPoint

    path = Path(args.file)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_csv(path, args.steps)
    print(
        f"file: {path.stat().st_size / 2**20:.1f} MB, {args.steps} steps x {len(KEYS)} keys; "
        f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    series, parse_s = timed(importer.load, str(path), "csv")
    _, replay_s = timed(Detector.replay, series, {})
    owner = get_user_model().objects.create_user("bench")
    old, old_s = timed(old_create_run, owner, "old", path.name, series)
    new, new_s = timed(importer.create_run, owner, "new", path.name, series)
    upsert_s = write_points(owner, series, upsert_batches)
    copy_s = write_points(owner, series, MetricPoint.insert_new)
    points = MetricPoint.objects.filter(run=new).count()
    assert points == MetricPoint.objects.filter(run=old).count() == args.steps * len(KEYS)
    assert new.events.count() == old.events.count()
    print(f"parse (importer.load): {parse_s:.1f} s; detector replay alone: {replay_s:.1f} s")
    print(f"old path (upsert batches, then detector): {old_s:.1f} s = {parse_s + old_s:.1f} s with parsing")
    print(f"new path (COPY + detector in a thread):   {new_s:.1f} s = {parse_s + new_s:.1f} s with parsing")
    print(f"points alone: upsert batches {upsert_s:.1f} s, COPY {copy_s:.1f} s ({upsert_s / copy_s:.2f}x)")
    print(f"speed-up of creating the run: {old_s / new_s:.2f}x; load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
