"""Where a 1,000-point ingest request's time goes: the metrics view's phases, timed inside one process
(Django's test client: the middleware, the view and the database, without the HTTP server), beside bare
psycopg writes of the same rows on a connection of their own. Sides alternate, batch by batch, after a
warm-up; medians per batch, with /proc/loadavg.

Phases: auth (the token's lookup), body (reading and decoding the JSON), parse (validating the points),
write (ingest.write: the run's lock and ownership check, points, rollups, latest_metrics, heartbeat and
step in one round trip), mlflow (ExternalRun.ingested: the run is an MLflow client's, as every run the API
takes points for; its detection message, to Redis, at most once a second), request (the whole request
through the middleware). Bare writes, each batch its own transaction
into a table shaped like MetricPoint's (columns, unique (run, key, step) index): COPY, the INSERT of three
binary arrays that ingest.write's append uses, and the same as an upsert.

Run:
    .venv/bin/python bench/ingest_profile.py --batches 300
"""

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432"
DB = "echolab_bench_ingest_profile"
KEYS, STEPS_PER_BATCH = 50, 20  # 1,000 points a batch, as bench/tracking.py sends them
ARRAYS = "SELECT %b, * FROM unnest(%b::int[], %b::text[], %b::float8[])"
BARE = {
    "COPY": None,
    "INSERT arrays": f"INSERT INTO bench_profile (run_id, step, key, value) {ARRAYS}",
    "upsert arrays": f"INSERT INTO bench_profile (run_id, step, key, value) {ARRAYS} "
    "ON CONFLICT (run_id, key, step) DO UPDATE SET value = EXCLUDED.value",
}


def batch(index):
    first = index * STEPS_PER_BATCH
    return [
        (s, f"metric/{k}", s * 0.001 + k) for s in range(first, first + STEPS_PER_BATCH) for k in range(KEYS)
    ]


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=300, help="timed batches per side")
    parser.add_argument("--warmup", type=int, default=30, help="untimed batches per side first")
    args = parser.parse_args()

    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    env = {
        **os.environ,
        "DATABASE_URL": f"{PG}/{DB}",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/13",
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils import timezone

    from webapp.accounts.models import ApiToken
    from webapp.metrics import api, ingest
    from webapp.tracking.models import ExternalExperiment, ExternalRun

    phases = {}

    def timed(name, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                phases.setdefault(name, []).append(time.perf_counter() - start)

        return wrapper

    ApiToken.authenticate = classmethod(timed("auth", ApiToken.authenticate.__func__))
    api.json_body = timed("body", api.json_body)
    ingest.parse = timed("parse", ingest.parse)
    ingest.write = timed("write", ingest.write)
    ExternalRun.ingested = classmethod(timed("mlflow", ExternalRun.ingested.__func__))

    user = get_user_model().objects.create_user("profile", "profile@example.com", "profile-password-1")
    token = ApiToken.issue(user, "profile")[1]
    run = ExternalRun.start(
        ExternalExperiment.create(user, "profile"), "profile", {}, "profile", timezone.now()
    ).run
    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")
    url = f"/api/runs/{run.pk}/metrics"

    bare = psycopg.connect(f"{PG}/{DB}")
    bare.execute("CREATE TABLE bench_profile (LIKE metrics_metricpoint INCLUDING ALL)")
    bare.commit()

    def write_bare(name, run_id, rows):
        if name == "COPY":
            with (
                bare.cursor() as cursor,
                cursor.copy("COPY bench_profile (run_id, step, key, value) FROM STDIN") as copy,
            ):
                for step, key, value in rows:
                    copy.write_row((run_id, step, key, value))
        else:
            steps, keys, values = map(list, zip(*rows))
            bare.execute(BARE[name], [run_id, steps, keys, values])
        bare.commit()

    bare_times = {name: [] for name in BARE}
    for index in range(args.warmup + args.batches):
        rows = batch(index)
        body = json.dumps([{"step": s, "key": k, "value": v} for s, k, v in rows])
        sides = ["request", *BARE]
        for side in sides if index % 2 == 0 else sides[::-1]:
            start = time.perf_counter()
            if side == "request":
                response = client.post(url, body, content_type="application/json")
                assert response.status_code == 200, response.content
            else:
                write_bare(side, 1 + list(BARE).index(side), rows)
            elapsed = time.perf_counter() - start
            if side == "request":
                phases.setdefault("request", []).append(elapsed)
            else:
                bare_times[side].append(elapsed)
        if index == args.warmup - 1:
            phases.clear()
            bare_times = {name: [] for name in BARE}

    with open("/proc/loadavg") as f:
        load = f.read().strip()
    print(
        f"{args.batches} batches of {KEYS * STEPS_PER_BATCH} points per side after {args.warmup} untimed; "
        f"/proc/loadavg: {load}"
    )
    print("the metrics view, in process (median ms per batch):")
    for name in ("auth", "body", "parse", "write", "mlflow", "request"):
        print(f"  {name:14s} {1000 * statistics.median(phases[name]):6.2f}")
    print("bare psycopg, one transaction per batch (median ms per batch):")
    for name, times in bare_times.items():
        print(f"  {name:14s} {1000 * statistics.median(times):6.2f}")


if __name__ == "__main__":
    main()
