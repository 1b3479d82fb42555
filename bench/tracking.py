"""EchoLab's metric tracking side by side with an MLflow tracking server, on the same Postgres.

  1. ingest: N points per server over HTTP, KEYS keys a step, in batches of at most 1,000 (ours:
     POST /api/runs/<id>/metrics; MLflow: POST /api/2.0/mlflow/runs/log-batch), points/s for each.
     Beside them, in the same turns: the database's own limit on the same rows from a bare psycopg
     client (COPY into a table shaped like ours, with its unique index, one commit per batch; and one
     COPY per turn), and ours called in this process (ingest.write, no HTTP). After --ingest-warmup
     untimed points each, they take turns, --ingest-chunk points at a time, the first rotating, so all
     see the same machine load. Ours runs under gunicorn as `./echolab run` starts it;
  2. chart query: one run with KEYS x STEPS points (loaded straight into each server's table with
     generate_series, so both hold the same rows), 6 keys at <= 1,000 points each, latency p50/p95
     and payload size. Ours: one GET /api/runs/<id>/metrics; MLflow: get-history-bulk-interval (the
     sampled series its UI charts), one request per key, the 6 sent at once on 6 connections as a
     browser sends them (and, for reference, one after another), and metrics/get-history (the whole
     series, as its REST API gives it). After one untimed call of each, the requests take turns,
     the side that goes first alternating. Also: does a one-step spike survive in the 1,000-point
     answer?
  3. pollers (ours only; the target is absolute: p99 under 200 ms): --pollers run pages open on that
     run while a trainer ingests a step a second; each polls the incremental endpoint every 2 s, as
     run.js does, against gunicorn with the workers `./echolab run` starts.

Both servers run as one worker process each (ours: gunicorn, but for the ingest stage; MLflow:
`mlflow server --workers 1`, with MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false so that no job runner starts
beside it and competes with the first minutes of its ingest). The load average is printed before and after each stage.
MLflow lives in its own virtualenv (never EchoLab's):
    python3.11 -m venv /tmp/mlflow-venv && /tmp/mlflow-venv/bin/pip install mlflow==3.17.2 psycopg2-binary
Run (--stages ingest for the first stage alone; the pollers need the query stage's run):
    .venv/bin/python bench/tracking.py --mlflow /tmp/mlflow-venv/bin/mlflow
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432"
OURS_DB, MLFLOW_DB = "echolab_bench_tracking", "mlflow_bench_tracking"
OURS_PORT, MLFLOW_PORT, POLLERS_PORT, INGEST_PORT = 8765, 8766, 8768, 8769
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
BATCH = 1000  # points per ingest request: MLflow's log-batch limit
BROWSER_CONNECTIONS = 6  # a browser's parallel HTTP/1.1 connections to one host


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


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
        # No job runner (and its Huey workers) starting beside the server: it would compete with the
        # first minutes of MLflow's ingest, and EchoLab's side starts no background worker either.
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        stdout=open(logs / "mlflow.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    servers.append(mlflow)
    wait_http(MLFLOW_PORT, "/health")


def our_run(owner):
    """A run started as an MLflow client starts one: the runs POST /api/runs/<id>/metrics takes points for
    (each batch also moves its heartbeat and asks for its detection, as in use)."""
    from django.utils import timezone

    from webapp.tracking.models import ExternalExperiment, ExternalRun

    experiment = ExternalExperiment.create(owner, f"bench {time.time_ns()}")
    return ExternalRun.start(experiment, "bench", {}, "bench", timezone.now()).run


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


def batches(first_step, points, keys):
    """(step, key, value) in step order, `keys` keys a step, cut into batches of whole steps (at most BATCH
    points each) until `points` points; returns the list of batches and the next step."""
    steps_per_batch = BATCH // keys
    steps = points // keys
    out = [
        [
            (step, f"metric/{k}", step * 0.001 + k)
            for step in range(first, min(first + steps_per_batch, first_step + steps))
            for k in range(keys)
        ]
        for first in range(first_step, first_step + steps, steps_per_batch)
    ]
    return out, first_step + steps


class IngestTarget:
    """One server's ingest: a run to log into, the next step, and the points and seconds timed so far."""

    def __init__(self, name, send):
        self.name, self.send = name, send
        self.step, self.points, self.seconds = 0, 0, 0.0

    def log(self, points, keys, timed=True):
        chunk, self.step = batches(self.step, points, keys)  # built before the clock starts
        start = time.perf_counter()
        for batch in chunk:
            self.send(batch)
        if timed:
            self.seconds += time.perf_counter() - start
            self.points += sum(map(len, chunk))

    @property
    def rate(self):
        return self.points / self.seconds


def copy_limit_targets():
    """The database's own limit on the same rows, from a bare psycopg client: COPY into a table shaped like
    ours (its columns and its unique (run, key, step) index), one commit per batch, as an acknowledged
    batch needs (as run 1); and, for reference, one COPY and one commit per turn (as run 2)."""
    import psycopg

    conn = psycopg.connect(f"{PG}/{OURS_DB}")
    conn.execute("DROP TABLE IF EXISTS bench_copy_limit")
    conn.execute("CREATE TABLE bench_copy_limit (LIKE metrics_metricpoint INCLUDING ALL)")
    conn.commit()
    copy_sql = "COPY bench_copy_limit (run_id, step, key, value) FROM STDIN"

    def copy(rows, run_id):
        with conn.cursor() as cursor, cursor.copy(copy_sql) as stream:
            for step, key, value in rows:
                stream.write_row((run_id, step, key, value))

    def per_batch(batch):
        copy(batch, 1)
        conn.commit()

    class OneStream(IngestTarget):
        def log(self, points, keys, timed=True):
            chunk, self.step = batches(self.step, points, keys)
            start = time.perf_counter()
            copy((row for batch in chunk for row in batch), 2)
            conn.commit()
            if timed:
                self.seconds += time.perf_counter() - start
                self.points += sum(map(len, chunk))

    return [IngestTarget("copy_per_batch", per_batch), OneStream("copy_one_stream", None)]


def bench_ingest(points, keys, warmup, chunk, ours, our_runs, mlflow, mlflow_run_id):
    """The targets take turns, `chunk` points at a time (which goes first rotating), after `warmup`
    untimed points each; points/s of each over its timed turns. Targets: ours over HTTP; ours in this
    process (ingest.write, no HTTP or Django request: what the request path adds); the COPY limit; MLflow."""
    from webapp.metrics import ingest

    now = int(time.time() * 1000)
    over_http, in_process = our_runs
    targets = [
        IngestTarget(
            "ours",
            lambda batch: ours.call(
                "POST",
                f"/api/runs/{over_http.pk}/metrics",
                [{"step": s, "key": k, "value": v} for s, k, v in batch],
            ),
        ),
        IngestTarget("ours_in_process", lambda batch: ingest.write(in_process.pk, batch)),
        *copy_limit_targets(),
        IngestTarget(
            "mlflow",
            lambda batch: mlflow.call(
                "POST",
                "/api/2.0/mlflow/runs/log-batch",
                {
                    "run_id": mlflow_run_id,
                    "metrics": [{"key": k, "value": v, "timestamp": now, "step": s} for s, k, v in batch],
                },
            ),
        ),
    ]
    for target in targets:
        target.log(warmup, keys, timed=False)
    for turn in range(max(1, points // chunk)):
        first = turn % len(targets)
        for target in targets[first:] + targets[:first]:
            target.log(chunk, keys)
    return {target.name: target for target in targets}


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


def summary(latencies, size):
    latencies = sorted(latencies)
    return {
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
        "requests": len(latencies),
        "bytes": size,
    }


def alternate(measures, repeats):
    """Each measure (name -> (function returning the payload size, how many of the rounds it runs in))
    once untimed, then `repeats` rounds in which they take turns, the order reversed every other round."""
    for fn, _ in measures.values():
        fn()
    latencies, sizes = {name: [] for name in measures}, {}
    names = list(measures)
    for round_ in range(repeats):
        for name in names if round_ % 2 == 0 else names[::-1]:
            fn, rounds = measures[name]
            if round_ >= rounds:
                continue
            start = time.perf_counter()
            sizes[name] = fn()
            latencies[name].append(time.perf_counter() - start)
    return {name: summary(latencies[name], sizes[name]) for name in names}


def bench_query(ours, our_run_id, mlflow_port, mlflow_run_id, repeats):
    from urllib.parse import quote

    spike = {}
    # A browser's connections to the MLflow server: one keep-alive connection per parallel request.
    connections = [Client(mlflow_port) for _ in CHART_KEYS]

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
                data = connections[0].call(
                    "GET",
                    f"/api/2.0/mlflow/metrics/get-history?run_id={mlflow_run_id}"
                    f"&metric_key={quote(key)}&max_results=25000" + (f"&page_token={token}" if token else ""),
                )
                total += len(data)
                token = json.loads(data).get("next_page_token")
                if not token:
                    break
        return total

    def sampled(client, key):
        data = client.call(
            "GET",
            f"/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval?run_ids={mlflow_run_id}"
            f"&metric_key={quote(key)}&max_results=1000",
        )
        if key == "actor/grad_norm":
            spike["mlflow_sampled"] = any(m["value"] == SPIKE_VALUE for m in json.loads(data)["metrics"])
        return len(data)

    def mlflow_sampled_concurrent():
        sizes = [0] * len(CHART_KEYS)

        def fetch(i):
            sizes[i] = sampled(connections[i % BROWSER_CONNECTIONS], CHART_KEYS[i])

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(len(CHART_KEYS))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return sum(sizes)

    def mlflow_sampled_sequential():
        return sum(sampled(connections[0], key) for key in CHART_KEYS)

    results = alternate(
        {
            "ours": (ours_query, repeats),
            "mlflow_sampled": (mlflow_sampled_concurrent, repeats),
            "mlflow_sequential": (mlflow_sampled_sequential, repeats),
            "mlflow_history": (mlflow_history, max(3, repeats // 5)),
        },
        repeats,
    )
    return results, spike


def bench_pollers(port, token, run_id, first_step, pollers, seconds, keys):
    """`pollers` run pages open on one live run: each polls every POLL_S (the page's interval, started at a
    random phase) for the points after the last step it holds, then the run's events, as run.js does;
    meanwhile a trainer ingests one step of `keys` keys per WRITE_S. Latency of every metrics poll."""
    import random
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


def proc_loadavg() -> str:
    with open("/proc/loadavg") as f:
        return f.read().strip()


def bench_ingest_stage(args, token, user, mlflow):
    before = proc_loadavg()
    ingest = bench_ingest(
        args.ingest_points,
        args.keys,
        args.ingest_warmup,
        args.ingest_chunk,
        Client(INGEST_PORT, {"Authorization": f"Bearer {token}"}),
        (our_run(user), our_run(user)),
        mlflow,
        mlflow_run(mlflow, "ingest"),
    )
    print(
        f"ingest, {args.keys} keys a step, batches of {BATCH // args.keys * args.keys}, turns of "
        f"{args.ingest_chunk:,} points after {args.ingest_warmup:,} untimed, {os.cpu_count()} CPUs; "
        f"/proc/loadavg before: {before}, after: {proc_loadavg()}",
        flush=True,
    )
    for target in ingest.values():
        print(
            f"  {target.name:16s} {target.rate:9,.0f} points/s "
            f"({target.points:,} points in {target.seconds:.1f} s)"
        )
    ours, limit = ingest["ours"].rate, ingest["copy_per_batch"].rate
    print(f"  ratio ours / COPY limit (one commit per batch): {ours / limit:.0%}")
    print(f"  ratio ours / COPY, one stream: {ours / ingest['copy_one_stream'].rate:.0%}")
    print(f"  ratio ours / MLflow: {ours / ingest['mlflow'].rate:.2f}x", flush=True)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mlflow", required=True, help="the mlflow executable of a separate virtualenv")
    parser.add_argument("--ingest-points", type=int, default=1_000_000, help="timed points per server")
    parser.add_argument("--ingest-chunk", type=int, default=20_000, help="points per turn")
    parser.add_argument("--ingest-warmup", type=int, default=5_000, help="untimed points per server first")
    parser.add_argument("--keys", type=int, default=50, help="keys a step, in the ingest and the chart run")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument(
        "--stages",
        default="ingest,query,pollers",
        help="which of ingest, query, pollers to run (comma-separated)",
    )
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--pollers", type=int, default=50, help="concurrent run pages polling (0: skip)")
    parser.add_argument("--poll-seconds", type=int, default=60)
    args = parser.parse_args()
    args.stages = set(args.stages.split(","))
    if not 0 < args.keys <= BATCH or args.keys < len(CHART_KEYS):
        parser.error(f"--keys must lie between {len(CHART_KEYS)} (the charted keys) and {BATCH}")

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

        if "ingest" in args.stages:
            # The server as `./echolab run` starts it (gthread workers: keep-alive).
            start_ours(INGEST_PORT, logs, servers, *SERVE_WORKERS)
            bench_ingest_stage(args, token, user, mlflow)
        if "query" not in args.stages:
            return
        chart_run, mlflow_chart_run = our_run(user).pk, mlflow_run(mlflow, "chart")
        load_chart_data(chart_run, mlflow_chart_run, args.keys, args.steps)
        load = load_average()
        query, spike = bench_query(ours, chart_run, MLFLOW_PORT, mlflow_chart_run, args.repeats)
        print(
            f"chart query, 6 of {args.keys} keys x {args.steps} steps, turns after one untimed call each "
            f"(load average before {load}, after {load_average()}):"
        )
        for name, row in query.items():
            print(
                f"  {name:17s} p50 {row['p50_ms']:8.1f} ms  p95 {row['p95_ms']:8.1f} ms  "
                f"({row['requests']} timed)  payload {row['bytes']:>10,d} bytes"
            )
        for name in ("mlflow_sampled", "mlflow_sequential", "mlflow_history"):
            print(f"  ratio {name} / ours, p50: {query[name]['p50_ms'] / query['ours']['p50_ms']:.1f}x")
        print(
            f"  spike at step {SPIKE_STEP} kept in the 1,000-point answer: ours {spike['ours']}, "
            f"MLflow sampled {spike['mlflow_sampled']}"
        )

        if "pollers" in args.stages and args.pollers:
            load = load_average()
            start_ours(POLLERS_PORT, logs, servers, *SERVE_WORKERS)
            polls = bench_pollers(
                POLLERS_PORT, token, chart_run, args.steps - 1, args.pollers, args.poll_seconds, args.keys
            )
            print(
                f"{args.pollers} pollers on the live run's incremental endpoint for {args.poll_seconds} s "
                f"(gunicorn {' '.join(SERVE_WORKERS)}): {polls['requests']} polls, {polls['failures']} failed, "
                f"p50 {polls['p50_ms']:.1f} ms, p95 {polls['p95_ms']:.1f} ms, p99 {polls['p99_ms']:.1f} ms, "
                f"max {polls['max_ms']:.1f} ms (load average before {load}, after {load_average()})",
                flush=True,
            )
    finally:
        for server in servers:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
