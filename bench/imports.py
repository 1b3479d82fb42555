"""Importing a metrics CSV at the upload limit (IMPORT_MAX_BYTES, 50 MB) as a run, against the goal of a minute.

The file: a step column and 10 metric columns (six decimals each), ~96 bytes a row, as many rows as fit
under the limit (540,000 steps, 5.4 million points at 50 MB). It is sent as the body of one
POST /api/imports (Django's test client: the whole request, from streaming the body to a temporary file
to the 201, through the middleware, in this process, against Postgres), after a warm-up import of its
first 2,000 rows. Then each phase of that request alone, to say where the time goes: the parse
(importer.load), the detector's replay (Detector.replay), and the write (MetricPoint.insert_new: the COPY
and the rollups; rolled back). The request runs the replay in a second thread while Postgres writes, so
it takes less than the three added up.

The peer: the COPY of the first --compare-steps steps' points in step order (as an import wrote them
before) against key order (importer.points_by_key, the index's order), each into a fresh run and rolled
back, one of each as a warm-up, then step, key, key, step. Prints seconds, the ratio, the goal's pass or
fail and the load average (the numbers only compare within a run).
Run:
    nice -n 10 .venv/bin/python bench/imports.py
"""

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG = "postgres://postgres@127.0.0.1:5432"
DB = "echolab_bench_imports"
GOAL_S = 60.0
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
        }
    )
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def write_csv(path: Path, max_bytes: int) -> int:
    """As many rows as fit in `max_bytes`; returns the number of steps."""
    rng = random.Random(0)
    header = "step," + ",".join(KEYS) + "\n"
    size, step = len(header), 0
    with open(path, "w") as out:
        out.write(header)
        while True:
            row = f"{step}," + ",".join(f"{rng.random():.6f}" for _ in KEYS) + "\n"
            if size + len(row) > max_bytes:
                return step
            out.write(row)
            size += len(row)
            step += 1


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def post(client, token, body: bytes, name: str):
    response = client.post(
        f"/api/imports?format=csv&name={name}",
        body,
        content_type="text/csv",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 201, response.content[:500]
    return response.json()


def write_alone(owner, points) -> float:
    """Seconds for MetricPoint.insert_new(points) into a fresh run (the COPY and the rollups), rolled back."""
    from django.db import transaction

    from webapp.experiments.models import Experiment, Run
    from webapp.metrics.models import MetricPoint

    with transaction.atomic():
        experiment = Experiment.objects.create(owner=owner, name="points only", config={}, imported=True)
        run = Run.objects.create(experiment=experiment, label="points only", config={})
        start = time.perf_counter()
        MetricPoint.insert_new(run.pk, points)
        seconds = time.perf_counter() - start
        transaction.set_rollback(True)
    return seconds


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--compare-steps", type=int, default=100_000)
    parser.add_argument("--file", default=str(ROOT / "var" / "bench" / "import.csv"))
    args = parser.parse_args()
    setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    from diagnostics import Detector
    from webapp.accounts.models import ApiToken
    from webapp.experiments.models import Run
    from webapp.imports import importer

    setup_test_environment()  # the test client's host name is allowed
    path = Path(args.file)
    path.parent.mkdir(parents=True, exist_ok=True)
    steps = write_csv(path, settings.IMPORT_MAX_BYTES)
    body = path.read_bytes()
    print(
        f"file: {len(body)} bytes ({len(body) / 2**20:.2f} MB; the limit IMPORT_MAX_BYTES is "
        f"{settings.IMPORT_MAX_BYTES}), {steps} steps x {len(KEYS)} keys = {steps * len(KEYS)} points; "
        f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    owner = get_user_model().objects.create_user("bench")
    token = ApiToken.issue(owner, "bench")[1]
    client = Client()
    warm_up = b"".join(body.splitlines(keepends=True)[:2001])
    post(client, token, warm_up, "warm-up")

    created, request_s = timed(post, client, token, body, "bench")
    run = Run.objects.get(pk=created["id"])
    assert created["points"] == run.metric_points.count() == steps * len(KEYS), created
    assert created["steps"] == steps and run.metric_rollups.exists()
    load_after_request = os.getloadavg()[0]

    series, parse_s = timed(importer.load, str(path), "csv")
    (_, events), replay_s = timed(Detector.replay, series, {})
    assert len(events) == created["events"]
    keys = sorted(KEYS)
    write_s = write_alone(owner, importer.points_by_key(series, keys))

    head = series[: args.compare_steps]
    sides = {
        "step order": lambda: [(s, k, v) for s, values in head for k, v in values.items()],
        "key order": lambda: list(importer.points_by_key(head, keys)),
    }
    seconds = {side: [] for side in sides}
    for side in ["step order", "key order", "step order", "key order", "key order", "step order"]:
        seconds[side].append(write_alone(owner, sides[side]()))
    by_step, by_key = (statistics.fmean(seconds[side][1:]) for side in sides)  # [0]: the warm-up

    verdict = "PASS" if request_s < GOAL_S else "FAIL"
    print(
        f"POST /api/imports, the whole request: {request_s:.1f} s for {len(body) / 2**20:.2f} MB "
        f"({created['events']} detector events); goal < {GOAL_S:.0f} s: {verdict}; "
        f"load average after it: {load_after_request:.1f}"
    )
    print(
        f"phases alone: parse (importer.load) {parse_s:.1f} s, detector replay {replay_s:.1f} s, "
        f"write (COPY + rollups) {write_s:.1f} s; added up {parse_s + replay_s + write_s:.1f} s"
    )
    print(
        f"COPY of {len(head)} steps' points, step order against key order (2 runs each after a warm-up): "
        f"{by_step:.2f} s vs {by_key:.2f} s ({by_step / by_key:.2f}x); load average after: "
        f"{os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
