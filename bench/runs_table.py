"""The runs table at thousands of runs: GET /api/runs (and the /runs/ page) for a user with --runs runs,
sorted by summary metrics that are computed per request, against a peer in the same run: the
experiments list API (GET /api/experiments), which reads stored columns only.

The database (echolab_bench_runs) holds two users with --runs runs each (scoping must not cost: the
other user's runs are in the same tables), 50 experiments per user, every run with train/success at
every step and val/success every 10 steps (--steps steps), a detector collapse event on every fifth
run, tags on every third. Points are written with generate_series. Requests go through Django's test
client in this process (one thread), alternating measure and peer; p50 over --repeats each.
Run:
    nice -n 10 .venv/bin/python bench/runs_table.py [--runs 5000] [--reuse]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG = "postgres://postgres@127.0.0.1:5432"
DB = "echolab_bench_runs"
os.environ.update(
    {
        "DATABASE_URL": f"{PG}/{DB}",
        "ECHOLAB_VAR": str(ROOT / "var" / "bench"),
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/14",
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "ALLOWED_HOSTS": "testserver",
    }
)


def recreate_database():
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")


def populate(runs: int, steps: int):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from webapp.experiments.models import Experiment, Run

    call_command("migrate", verbosity=0)
    for name in ("bench", "other"):
        user = get_user_model().objects.create_user(name, f"{name}@example.com", "bench-password-1")
        experiments = Experiment.objects.bulk_create(
            [Experiment(owner=user, name=f"{name} sweep {i}", config={}) for i in range(50)]
        )
        Run.objects.bulk_create(
            [
                Run(
                    experiment=experiments[i % 50],
                    label=f"seed={i}",
                    status=("completed", "running", "queued")[i % 3],
                    config={
                        "env": {"name": ("frozenlake", "sokoban", "bandit")[i % 3]},
                        "seed": i,
                        "algorithm": {
                            "advantage": ("ppo", "grpo")[i % 2],
                            "filter_ratio": (0.25, 0.5, 1.0)[i % 3],
                        },
                    },
                    tags=["baseline"] if i % 3 == 0 else [],
                    total_steps=steps,
                    step=steps,
                )
                for i in range(runs)
            ],
            batch_size=1000,
        )
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO metrics_metricpoint (run_id, key, step, value)
            SELECT r.id, 'train/success', s, (r.id * 7919 + s) % 1000 / 1000.0
            FROM experiments_run r, generate_series(0, {steps - 1}) AS s;
            INSERT INTO metrics_metricpoint (run_id, key, step, value)
            SELECT r.id, 'val/success', s, (r.id * 104729 + s) % 997 / 997.0
            FROM experiments_run r, generate_series(0, {steps - 1}, 10) AS s;
            INSERT INTO alerts_detectorevent (run_id, step, level, rule, message, signals, created_at)
            SELECT r.id, r.id % {steps}, 'collapse', 'echo_trap', 'bench', '{{}}', now()
            FROM experiments_run r WHERE r.id % 5 = 0;
            UPDATE experiments_run SET started_at = now() - interval '1 hour', finished_at = now()
            WHERE status = 'completed';
            ANALYZE;
        """)


def p50(client, path, repeats) -> tuple[float, int]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, (path, response.status_code)
    return statistics.median(times) * 1000, len(response.content)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000, help="runs per user")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--reuse", action="store_true", help="measure on the database of an earlier call")
    args = parser.parse_args()
    if not args.reuse:
        recreate_database()
    import django

    django.setup()
    if not args.reuse:
        started = time.perf_counter()
        populate(args.runs, args.steps)
        print(f"filled {args.runs} runs x 2 users in {time.perf_counter() - started:.0f} s")
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    peer = "/api/experiments?page_size=50"
    measures = [
        "/api/runs?page_size=50",
        "/api/runs?page_size=50&sort=-best_val",
        "/api/runs?page_size=50&sort=-final_val",
        "/api/runs?page_size=50&sort=collapse",
        "/api/runs?page_size=50&sort=-duration",
        "/api/runs?page_size=50&env=frozenlake&tag=baseline&sort=-final_train",
        "/api/runs?page_size=50&sort=-best_val&page=60",
        "/runs/?sort=-best_val",
    ]
    client.get(peer), [client.get(path) for path in measures]  # warm-up
    print(f"{args.runs} runs per user, {args.steps} steps; p50 of {args.repeats}; peer: GET {peer}")
    print(f"{'request':<78} {'ms':>8} {'peer ms':>8} {'ratio':>6} {'bytes':>8}")
    for path in measures:
        ms, size = p50(client, path, args.repeats)
        peer_ms, _ = p50(client, peer, args.repeats)
        print(f"{path:<78} {ms:8.1f} {peer_ms:8.1f} {ms / peer_ms:6.2f} {size:8d}")


if __name__ == "__main__":
    main()
