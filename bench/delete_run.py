"""Deleting a big run: Run.delete_with_data on a run of --points metric points (10 keys, their rollups), 1,000
samples and 200 detector events, against a peer in the same process: writing those points
(MetricPoint.insert_new, one COPY and the rollups, as an import does). Alternating build/delete and
peer, --repeats times; medians.

It works in DATABASE_URL (migrated; its own user's rows, removed afterwards). Run:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/NAME nice -n 10 .venv/bin/python bench/delete_run.py
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("ECHOLAB_VAR", str(ROOT / "var" / "bench"))
KEYS = 10


def series(points: int):
    steps = points // KEYS
    return ((step, f"bench/key{k}", step / steps) for step in range(steps) for k in range(KEYS))


def big_run(experiment, points: int):
    from webapp.alerts.models import DetectorEvent
    from webapp.experiments.models import Run
    from webapp.metrics.models import MetricPoint, Sample

    run = Run.objects.create(experiment=experiment, label="big", config={}, status=Run.Status.COMPLETED)
    started = time.perf_counter()
    MetricPoint.insert_new(run.pk, series(points))
    written = time.perf_counter() - started
    Sample.objects.bulk_create(
        [Sample(run=run, step=s, index=i, data={"turns": []}) for s in range(100) for i in range(10)]
    )
    DetectorEvent.objects.bulk_create(
        [DetectorEvent(run=run, step=s, level="info", rule="grad_spike", message="spike") for s in range(200)]
    )
    return run, written


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from webapp.experiments.models import Experiment

    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-delete")
    experiment = Experiment.objects.create(owner=user, name="bench delete", config={})
    deletes, writes = [], []
    try:
        for _ in range(args.repeats):
            run, written = big_run(experiment, args.points)
            started = time.perf_counter()
            run.delete_with_data()
            deletes.append(time.perf_counter() - started)
            writes.append(written)
            print(f"delete {deletes[-1]:.2f} s, write (peer) {written:.2f} s", flush=True)
    finally:
        user.delete()
    delete, write = statistics.median(deletes), statistics.median(writes)
    print(f"{args.points:,} points: delete {delete:.2f} s, peer {write:.2f} s, ratio {delete / write:.2f}")


if __name__ == "__main__":
    main()
