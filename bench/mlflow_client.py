"""The `mlflow` client's log_batch, log_artifact and download_artifacts against EchoLab's MLflow endpoint and
an MLflow tracking server.

One script, one client library (the mlflow-skinny in .venv), the same batches: POINTS points per server,
KEYS keys per step, 1,000 metrics per log_batch (MLflow's limit). After a warm-up of a few batches each,
the servers take turns, a chunk of CHUNK points at a time, so both see the same machine load. Both use
the same local Postgres (their own databases, recreated) and run as one worker process each (ours:
gunicorn, one sync worker; MLflow: `mlflow server --workers 1`). EchoLab also sends one "judge this run"
task per write to Redis, as in production; the detector itself runs in a worker, which is not started
here (its messages are purged at the end).

Then artifacts: for each size in --artifacts, the same random file uploaded (log_artifact) and downloaded
(download_artifacts) through each server in turn, the side that goes first alternating, after one untimed
round; medians. Both proxy the files to a local folder (MLflow: `--artifacts-destination`, so its runs'
artifact_uri is `mlflow-artifacts:/`, as EchoLab's; with a local `--default-artifact-root` the client would
write the files itself, not through the server).

MLflow lives in its own virtualenv (never EchoLab's):
    python3.11 -m venv /tmp/mlflow-venv && /tmp/mlflow-venv/bin/pip install mlflow==3.17.2 psycopg2-binary
Run:
    .venv/bin/python bench/mlflow_client.py --mlflow /tmp/mlflow-venv/bin/mlflow
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import tracking  # noqa: E402 (needs the sys.path line above)
from bench.tracking import wait_http  # noqa: E402

OURS_DB, MLFLOW_DB = "echolab_bench_mlflow_client", "mlflow_bench_mlflow_client"
OURS_PORT, MLFLOW_PORT = 8775, 8776
BROKER = "redis://127.0.0.1:6379/13"
BATCH = 1000


def recreate_databases():
    tracking.recreate_databases((OURS_DB, MLFLOW_DB))


def our_env() -> dict:
    return tracking.our_env(OURS_DB, BROKER)


def start_servers(mlflow_bin: str, logs: Path) -> list:
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=our_env(), check=True)
    gunicorn = [
        str(Path(sys.executable).parent / "gunicorn"),
        "webapp.wsgi:application",
        "-w",
        "1",
        "-b",
        f"127.0.0.1:{OURS_PORT}",
        "--timeout",
        "600",
    ]
    ours = subprocess.Popen(
        gunicorn,
        cwd=ROOT,
        env=our_env(),
        stdout=open(logs / "ours.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    mlflow = subprocess.Popen(
        [
            mlflow_bin,
            "server",
            "--workers",
            "1",
            "--host",
            "127.0.0.1",
            "--port",
            str(MLFLOW_PORT),
            "--backend-store-uri",
            f"postgresql+psycopg2://postgres@127.0.0.1:5432/{MLFLOW_DB}",
            "--artifacts-destination",
            str(logs / "mlflow-artifacts"),
        ],
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        stdout=open(logs / "mlflow.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    servers = [ours, mlflow]
    try:
        wait_http(OURS_PORT, "/healthz")
        wait_http(MLFLOW_PORT, "/health")
    except TimeoutError:
        stop(servers)
        raise
    return servers


def stop(servers):
    for server in servers:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)


def batches(first_step: int, points: int, keys: int):
    """Metric entities, step by step with `keys` keys each, in log_batch-sized lists."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    steps_per_batch = BATCH // keys
    for first in range(first_step, first_step + points // keys, steps_per_batch):
        yield [
            Metric(f"metric/{k}", step * 0.001 + k, now, step)
            for step in range(first, first + steps_per_batch)
            for k in range(keys)
        ]


class Target:
    """One server, seen through an MlflowClient: a run to log into, and the time spent logging."""

    def __init__(self, name: str, port: int):
        from mlflow import MlflowClient

        self.name = name
        self.client = MlflowClient(tracking_uri=f"http://127.0.0.1:{port}")
        experiment = self.client.create_experiment(f"bench-{time.time_ns()}")
        self.run_id = self.client.create_run(experiment).info.run_id
        self.step, self.points, self.seconds = 0, 0, 0.0

    def log(self, points: int, keys: int, timed: bool = True) -> None:
        start = time.perf_counter()
        for batch in batches(self.step, points, keys):
            self.client.log_batch(self.run_id, metrics=batch)
        if timed:
            self.seconds += time.perf_counter() - start
            self.points += points
        self.step += points // keys

    @property
    def rate(self) -> float:
        return self.points / self.seconds


def time_artifacts(targets: list[Target], folder: Path, size: int, files: int) -> dict[str, dict[str, float]]:
    """Median seconds to upload and to download one file of `size` bytes, per server."""
    from mlflow import artifacts

    source = folder / f"file-{size}.bin"
    source.write_bytes(os.urandom(size))
    seconds = {target.name: {"upload": [], "download": []} for target in targets}
    for round_ in range(files + 1):  # round 0 untimed
        for target in targets if round_ % 2 else targets[::-1]:
            path = f"size-{size}/{round_}"
            start = time.perf_counter()
            target.client.log_artifact(target.run_id, str(source), path)
            uploaded = time.perf_counter()
            artifacts.download_artifacts(
                run_id=target.run_id,
                artifact_path=f"{path}/{source.name}",
                dst_path=str(folder / target.name / str(round_)),
                tracking_uri=target.client.tracking_uri,
            )
            if round_:
                seconds[target.name]["upload"].append(uploaded - start)
                seconds[target.name]["download"].append(time.perf_counter() - uploaded)
            shutil.rmtree(folder / target.name)
    source.unlink()
    return {
        name: {what: statistics.median(values) for what, values in times.items()}
        for name, times in seconds.items()
    }


def print_artifact_times(size: int, files: int, times: dict[str, dict[str, float]]) -> None:
    print(
        f"artifacts of {size:,} bytes, {files} files per server after 1 untimed, sides alternating (median):"
    )
    for what in ("upload", "download"):
        ours, theirs = times["EchoLab"][what], times["MLflow"][what]
        print(
            f"  {what:8s} EchoLab {ours * 1000:8.1f} ms ({size / ours / 2**20:6.1f} MiB/s)   "
            f"MLflow {theirs * 1000:8.1f} ms ({size / theirs / 2**20:6.1f} MiB/s)   "
            f"MLflow / EchoLab time: {theirs / ours:.2f}x"
        )


def purge_detection_messages():
    from kombu import Connection

    with Connection(BROKER) as conn:
        conn.default_channel.queue_purge("default")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mlflow", required=True, help="the mlflow executable of a separate virtualenv")
    parser.add_argument("--points", type=int, default=100_000, help="timed points per server")
    parser.add_argument("--chunk", type=int, default=10_000, help="points per turn")
    parser.add_argument("--warmup", type=int, default=5_000, help="untimed points per server first")
    parser.add_argument("--keys", type=int, default=10, help="metric keys per step")
    parser.add_argument(
        "--artifacts",
        default="1048576x20,67108864x3",
        help="artifact sizes in bytes, each with how many files per server: SIZExFILES,...",
    )
    args = parser.parse_args()
    try:
        artifact_sizes = [tuple(int(part) for part in each.split("x")) for each in args.artifacts.split(",")]
    except ValueError:
        parser.error(f"--artifacts: expected SIZExFILES,... (bytes x files), got {args.artifacts!r}")
    if args.points % args.chunk or args.chunk % BATCH or BATCH % args.keys:
        parser.error("--points must be a multiple of --chunk, --chunk of 1000, and 1000 of --keys")

    logs = ROOT / "var" / "bench" / "mlflow_client"
    for folder in ("echolab-artifacts", "mlflow-artifacts", "files"):
        shutil.rmtree(logs / folder, ignore_errors=True)
    logs.mkdir(parents=True, exist_ok=True)
    os.environ.update(our_env(), ARTIFACT_ROOT=str(logs / "echolab-artifacts"))
    recreate_databases()
    load_before = os.getloadavg()
    servers = start_servers(args.mlflow, logs)
    try:
        import django

        django.setup()
        from django.contrib.auth import get_user_model

        from webapp.accounts.models import ApiToken

        user = get_user_model().objects.create_user("bench", "bench@example.com", "bench-password-1")
        # The client sends it to both servers; MLflow's, without auth, ignores it.
        os.environ["MLFLOW_TRACKING_TOKEN"] = ApiToken.issue(user, "bench")[1]
        targets = [Target("EchoLab", OURS_PORT), Target("MLflow", MLFLOW_PORT)]
        for target in targets:
            target.log(args.warmup, args.keys, timed=False)
        for _ in range(args.points // args.chunk):
            for target in targets:
                target.log(args.chunk, args.keys)
        ours, theirs = targets
        print(
            f"log_batch through the mlflow client, {args.points:,} points per server ({args.keys} keys x "
            f"{args.points // args.keys:,} steps, {BATCH} per call, turns of {args.chunk:,} after "
            f"{args.warmup:,} untimed):"
        )
        for target in targets:
            print(f"  {target.name:8s} {target.rate:9,.0f} points/s  ({target.seconds:.1f} s)")
        print(f"  ratio EchoLab / MLflow: {ours.rate / theirs.rate:.2f}x")
        (logs / "files").mkdir()
        for size, files in artifact_sizes:
            print_artifact_times(size, files, time_artifacts(targets, logs / "files", size, files))
        print(
            f"  load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
            f"after: {' '.join(f'{value:.2f}' for value in os.getloadavg())} ({os.cpu_count()} CPUs)"
        )
        purge_detection_messages()
    finally:
        stop(servers)


if __name__ == "__main__":
    main()
