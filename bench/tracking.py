"""EchoLab's metric tracking side by side with an MLflow tracking server, on the same Postgres.

  1. ingest: N points over HTTP in batches of 1,000 (ours: POST /api/runs/<id>/metrics; MLflow:
     POST /api/2.0/mlflow/runs/log-batch), points/s for each;
  2. chart query: one run with KEYS x STEPS points (loaded straight into each server's table with
     generate_series, so both hold the same rows), 6 keys at <= 1,000 points each, latency p50/p95
     and payload size. Ours: one GET /api/runs/<id>/metrics; MLflow: metrics/get-history (the whole
     series, as its REST API gives it) and get-history-bulk-interval (the sampled series its UI
     charts), one request per key. Also: does a one-step spike survive in the 1,000-point answer?
  3. pollers (ours only; the target is absolute: p99 under 200 ms): --pollers run pages open on that
     run while a trainer ingests a step a second; each polls the incremental endpoint every 2 s, as
     run.js does, against gunicorn with the workers `./echolab run` starts.

Both servers run as one worker process each (ours: gunicorn; MLflow: `mlflow server --workers 1`).
MLflow lives in its own virtualenv (never EchoLab's):
    python3.11 -m venv /tmp/mlflow-venv && /tmp/mlflow-venv/bin/pip install mlflow psycopg2-binary
Run:
    .venv/bin/python bench/tracking.py --mlflow /tmp/mlflow-venv/bin/mlflow
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432"
OURS_DB, MLFLOW_DB = "echolab_bench_tracking", "mlflow_bench_tracking"
OURS_PORT, MLFLOW_PORT, POLLERS_PORT = 8765, 8766, 8768
CHART_KEYS = [
    "train/success",
    "val/success",
    "train/reward_mean",
    "train/reward_std_in_group",
    "actor/entropy",
    "actor/grad_norm",
]
SPIKE_STEP, SPIKE_VALUE = 54_321, 1e4
POLL_S, WRITE_S = 2.0, 1.0  # run.js polls every 2 s; a fast trainer logs a step a second
# The web server as `./echolab run` starts it (webapp/core/management/commands/serve.py).
SERVE_WORKERS = ("--workers", "2", "--threads", "4")


def recreate_databases(names=(OURS_DB, MLFLOW_DB)):
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        for name in names:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")


def our_env(database=OURS_DB, broker="redis://127.0.0.1:6379/14") -> dict:
    """The environment of an EchoLab process on the bench's own database and broker."""
    return {
        **os.environ,
        "DATABASE_URL": f"{PG}/{database}",
        "ECHOLAB_VAR": str(ROOT / "var" / "bench"),
        "CELERY_BROKER_URL": broker,
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
    }


def wait_http(port, path, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path)
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"nothing answers on port {port}")


class Client:
    """Keep-alive JSON over HTTP; returns (status, body bytes)."""

    def __init__(self, port, headers=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.headers = {"Content-Type": "application/json", **(headers or {})}

    def call(self, method, path, body=None):
        payload = None if body is None else json.dumps(body)
        try:
            self.conn.request(method, path, body=payload, headers=self.headers)
            response = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closed a keep-alive connection that sat idle (uvicorn does after 5 s): redial once.
            self.conn.close()
            self.conn.request(method, path, body=payload, headers=self.headers)
            response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {data[:300]!r}")
        return data


def start_ours(port, logs: Path, servers: list, *workers):
    ours = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "webapp.wsgi:application",
            *workers,
            "-b",
            f"127.0.0.1:{port}",
            "--timeout",
            "600",
        ],
        cwd=ROOT,
        env=our_env(),
        stdout=open(logs / f"ours-{port}.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    servers.append(ours)
    wait_http(port, "/healthz")


def start_servers(mlflow_bin, logs: Path, servers: list):
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=our_env(), check=True)
    start_ours(OURS_PORT, logs, servers, "-w", "1")
    mlflow = subprocess.Popen(
        [
            mlflow_bin,
            "server",
            "--backend-store-uri",
            f"postgresql+psycopg2://postgres@127.0.0.1:5432/{MLFLOW_DB}",
            "--default-artifact-root",
            str(logs / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(MLFLOW_PORT),
            "--workers",
            "1",
        ],
        stdout=open(logs / "mlflow.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    servers.append(mlflow)
    wait_http(MLFLOW_PORT, "/health")


def our_run(owner):
    from webapp.experiments.models import Experiment, Run

    experiment = Experiment.objects.create(owner=owner, name="bench", config={})
    return Run.objects.create(experiment=experiment, label="bench", config={})


def mlflow_run(client, name):
    experiment = json.loads(
        client.call("POST", "/api/2.0/mlflow/experiments/create", {"name": f"{name}-{uuid.uuid4().hex[:8]}"})
    )
    run = json.loads(
        client.call(
            "POST",
            "/api/2.0/mlflow/runs/create",
            {"experiment_id": experiment["experiment_id"], "start_time": int(time.time() * 1000)},
        )
    )
    return run["run"]["info"]["run_id"]


def batches(points, keys=10, size=1000):
    """(step, key, value) in step order, keys interleaved, cut into batches of `size`."""
    steps_per_batch = size // keys
    for first in range(0, points // keys, steps_per_batch):
        yield [
            (step, f"metric/{k}", step * 0.001 + k)
            for step in range(first, first + steps_per_batch)
            for k in range(keys)
        ]


def bench_ingest(points, ours, our_run_id, mlflow, mlflow_run_id):
    results = {}
    start = time.perf_counter()
    for batch in batches(points):
        ours.call(
            "POST",
            f"/api/runs/{our_run_id}/metrics",
            [{"step": s, "key": k, "value": v} for s, k, v in batch],
        )
    results["ours"] = points / (time.perf_counter() - start)
    start = time.perf_counter()
    now = int(time.time() * 1000)
    for batch in batches(points):
        mlflow.call(
            "POST",
            "/api/2.0/mlflow/runs/log-batch",
            {
                "run_id": mlflow_run_id,
                "metrics": [{"key": k, "value": v, "timestamp": now, "step": s} for s, k, v in batch],
            },
        )
    results["mlflow"] = points / (time.perf_counter() - start)
    return results


def load_chart_data(our_run_id, mlflow_run_id, keys, steps):
    """keys x steps rows in each server's own table; one spike in actor/grad_norm."""
    import psycopg

    names = CHART_KEYS + [f"extra/{i}" for i in range(keys - len(CHART_KEYS))]
    value = f"CASE WHEN k.name = 'actor/grad_norm' AND s = {SPIKE_STEP} THEN {SPIKE_VALUE} ELSE 1 + 0.1 * sin(s) END"
    with psycopg.connect(f"{PG}/{OURS_DB}", autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO metrics_metricpoint (run_id, key, step, value) SELECT %s, k.name, s, {value} "
            f"FROM unnest(%s::text[]) AS k(name), generate_series(0, %s) AS s",
            [our_run_id, names, steps - 1],
        )
        conn.execute("ANALYZE metrics_metricpoint")
    from webapp.metrics.models import MetricRollup

    MetricRollup.refresh(our_run_id)  # what MetricPoint.upsert keeps up to date for points written live
    with psycopg.connect(f"{PG}/{MLFLOW_DB}", autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
            f"SELECT k.name, {value}, 1700000000000 + s, %s, s, false "
            f"FROM unnest(%s::text[]) AS k(name), generate_series(0, %s) AS s",
            [mlflow_run_id, names, steps - 1],
        )
        conn.execute(
            "INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
            "SELECT k.name, 1, 1700000000000 + %s, %s, false, %s FROM unnest(%s::text[]) AS k(name)",
            [steps - 1, steps - 1, mlflow_run_id, names],
        )
        conn.execute("ANALYZE metrics")


def timed(fn, repeats):
    latencies, size = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        size = fn()
        latencies.append(time.perf_counter() - start)
    latencies.sort()
    return {
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
        "bytes": size,
    }


def bench_query(ours, our_run_id, mlflow, mlflow_run_id, repeats):
    from urllib.parse import quote

    spike = {}

    def ours_query():
        data = ours.call(
            "GET", f"/api/runs/{our_run_id}/metrics?keys={quote(','.join(CHART_KEYS))}&max_points=1000"
        )
        grad_norm = json.loads(data)["series"]["actor/grad_norm"]
        spike["ours"] = SPIKE_VALUE in (grad_norm["max"] if grad_norm["downsampled"] else grad_norm["value"])
        return len(data)

    def mlflow_history():
        total = 0
        for key in CHART_KEYS:
            token = ""
            while True:
                data = mlflow.call(
                    "GET",
                    f"/api/2.0/mlflow/metrics/get-history?run_id={mlflow_run_id}"
                    f"&metric_key={quote(key)}&max_results=25000" + (f"&page_token={token}" if token else ""),
                )
                total += len(data)
                token = json.loads(data).get("next_page_token")
                if not token:
                    break
        return total

    def mlflow_sampled():
        total = 0
        for key in CHART_KEYS:
            data = mlflow.call(
                "GET",
                f"/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval?run_ids={mlflow_run_id}"
                f"&metric_key={quote(key)}&max_results=1000",
            )
            total += len(data)
            if key == "actor/grad_norm":
                spike["mlflow_sampled"] = any(m["value"] == SPIKE_VALUE for m in json.loads(data)["metrics"])
        return total

    results = {
        "ours": timed(ours_query, repeats),
        "mlflow_sampled": timed(mlflow_sampled, repeats),
        "mlflow_history": timed(mlflow_history, max(3, repeats // 5)),
    }
    return results, spike


def bench_pollers(port, token, run_id, first_step, pollers, seconds, keys):
    """`pollers` run pages open on one live run: each polls every POLL_S (the page's interval, started at a
    random phase) for the points after the last step it holds, then the run's events, as run.js does;
    meanwhile a trainer ingests one step of `keys` keys per WRITE_S. Latency of every metrics poll."""
    import random
    import threading
    from urllib.parse import quote

    from webapp.runs.charts import CHARTS

    chart_keys = quote(",".join(key for chart in CHARTS for key in chart["keys"]))
    names = CHART_KEYS + [f"extra/{i}" for i in range(keys - len(CHART_KEYS))]
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + seconds
    latencies, failures = [], []

    def trainer():
        client, step = Client(port, headers), first_step
        while time.monotonic() < deadline:
            step += 1
            client.call(
                "POST", f"/api/runs/{run_id}/metrics", [{"step": step, "key": k, "value": 0.5} for k in names]
            )
            time.sleep(WRITE_S)

    def poller():
        client, after = Client(port, headers), first_step
        time.sleep(random.uniform(0, POLL_S))
        while time.monotonic() < deadline:
            start = time.perf_counter()
            try:
                body = json.loads(
                    client.call(
                        "GET", f"/api/runs/{run_id}/metrics?keys={chart_keys}&max_points=1000&after={after}"
                    )
                )
            except (RuntimeError, OSError) as error:
                failures.append(str(error))
            else:
                latencies.append(time.perf_counter() - start)
                after = max([after, *body["series"]["train/success"]["step"]])
            client.call("GET", f"/api/runs/{run_id}/events")
            time.sleep(max(0.0, POLL_S - (time.perf_counter() - start)))

    threads = [threading.Thread(target=trainer)] + [threading.Thread(target=poller) for _ in range(pollers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    pick = lambda q: 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    return {
        "requests": len(latencies),
        "failures": len(failures),
        "p50_ms": pick(0.5),
        "p95_ms": pick(0.95),
        "p99_ms": pick(0.99),
        "max_ms": 1000 * latencies[-1],
    }


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mlflow", required=True, help="the mlflow executable of a separate virtualenv")
    parser.add_argument("--ingest-points", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--pollers", type=int, default=50, help="concurrent run pages polling (0: skip)")
    parser.add_argument("--poll-seconds", type=int, default=60)
    args = parser.parse_args()

    os.environ.update(our_env())
    sys.path.insert(0, str(ROOT))
    import django

    recreate_databases()
    logs = ROOT / "var" / "bench" / "tracking"
    logs.mkdir(parents=True, exist_ok=True)
    servers = []
    try:
        start_servers(args.mlflow, logs, servers)
        django.setup()
        from django.contrib.auth import get_user_model

        from webapp.accounts.models import ApiToken

        user = get_user_model().objects.create_user("bench", "bench@example.com", "bench-password-1")
        token = ApiToken.issue(user, "bench")[1]
        ours = Client(OURS_PORT, {"Authorization": f"Bearer {token}"})
        mlflow = Client(MLFLOW_PORT)

        ingest = bench_ingest(
            args.ingest_points, ours, our_run(user).pk, mlflow, mlflow_run(mlflow, "ingest")
        )
        print(
            f"ingest {args.ingest_points} points, batches of 1000: ours {ingest['ours']:.0f} points/s, "
            f"MLflow log-batch {ingest['mlflow']:.0f} points/s, ratio {ingest['ours'] / ingest['mlflow']:.2f}x",
            flush=True,
        )

        chart_run, mlflow_chart_run = our_run(user).pk, mlflow_run(mlflow, "chart")
        load_chart_data(chart_run, mlflow_chart_run, args.keys, args.steps)
        query, spike = bench_query(ours, chart_run, mlflow, mlflow_chart_run, args.repeats)
        print(f"chart query, 6 of {args.keys} keys x {args.steps} steps:")
        for name, row in query.items():
            print(
                f"  {name:15s} p50 {row['p50_ms']:8.1f} ms  p95 {row['p95_ms']:8.1f} ms  "
                f"payload {row['bytes']:>10,d} bytes"
            )
        print(
            f"  spike at step {SPIKE_STEP} kept in the 1,000-point answer: ours {spike['ours']}, "
            f"MLflow sampled {spike['mlflow_sampled']}"
        )

        if args.pollers:
            start_ours(POLLERS_PORT, logs, servers, *SERVE_WORKERS)
            polls = bench_pollers(
                POLLERS_PORT, token, chart_run, args.steps - 1, args.pollers, args.poll_seconds, args.keys
            )
            print(
                f"{args.pollers} pollers on the live run's incremental endpoint for {args.poll_seconds} s "
                f"(gunicorn {' '.join(SERVE_WORKERS)}): {polls['requests']} polls, {polls['failures']} failed, "
                f"p50 {polls['p50_ms']:.1f} ms, p95 {polls['p95_ms']:.1f} ms, p99 {polls['p99_ms']:.1f} ms, "
                f"max {polls['max_ms']:.1f} ms",
                flush=True,
            )
    finally:
        for server in servers:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
