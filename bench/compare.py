"""The compare page for 20 and for 100 runs of 10,000 steps each, against the run page for one run.

--runs runs are written once; each of --sizes (default 20 and 100) is measured on the first that many.
  1. bulk data: GET /api/compare for N runs x every charted key with each bucket's min..max (what the
     page asks for: 100 points per run and key from 20 runs on), latency p50/p95 over --repeats
     requests and payload size; peer: the same data as N run-page requests (GET /api/runs/<id>/metrics,
     one per run, same points), alternated with it. Also the bulk request with
     group_by=algorithm.filter_ratio (4 groups: mean and min..max per step), and the bulk request with
     clock=1 (each run's time/step_s over every step, summed per bucket: the training-time axis),
     alternated with the bulk request alone.
  2. page: headless Debian chromium opens /compare?runs=<N ids> and waits until every chart is drawn
     (compare.js sets body[data-charts-drawn] when Plotly has rendered all panels with the data);
     peer: the run page of one of the runs until all its metric charts hold data, alternated with it. Median
     of --loads loads each, after one warm-up load of each; for the compare page also the time until the
     charts in the first screen (1400 x 1000 px) are drawn. Each time is taken in the page, at the first
     animation frame in which the condition holds (MARKS), not by polling from outside. Then, on the
     drawn compare page, how long a redraw takes after moving the smoothing slider and after unticking
     one run in the runs table.

Points are written straight into a throwaway database (echolab_bench_compare) with generate_series;
the server is gunicorn with one worker, as in bench/tracking.py.
Run:
    .venv/bin/python bench/compare.py
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG = "postgres://postgres@127.0.0.1:5432"
DB, PORT = "echolab_bench_compare", 8767
CHROMIUM = "/usr/bin/chromium"


def env() -> dict:
    return {
        **os.environ,
        "DATABASE_URL": f"{PG}/{DB}",
        "ECHOLAB_VAR": str(ROOT / "var" / "bench"),
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/14",
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
    }


def recreate_database():
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")


def populate(runs: int, steps: int):
    """A user, one grid experiment, `runs` finished runs, every charted key and time/step_s at every step
    (val/success every 10 steps), a one-step gradient spike and a few detector events per run."""
    import django

    os.environ.update(env())
    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from trainer.config import TrainConfig
    from webapp.accounts.models import ApiToken
    from webapp.alerts.models import DetectorEvent
    from webapp.compare.api import CHART_KEYS
    from webapp.experiments.models import Experiment, Run
    from webapp.metrics.models import MetricPoint, MetricRollup

    user = get_user_model().objects.create_user("bench", "bench@example.com", "bench-password-1")
    experiment = Experiment.objects.create(owner=user, name="bench grid", config={})
    ids = []
    for i in range(runs):
        ratio, seed = [0.25, 0.5, 0.75, 1.0][i % 4], i // 4
        config = TrainConfig.preset("starpo-s", algorithm={"filter_ratio": ratio}, seed=seed).to_dict()
        run = Run.objects.create(
            experiment=experiment,
            label=f"seed={seed} algorithm.filter_ratio={ratio}",
            config=config,
            status=Run.Status.COMPLETED,
            step=steps,
            total_steps=steps,
        )
        ids.append(run.pk)
        DetectorEvent.objects.create(
            run=run, step=steps // 3, level="warning", rule="reward_std_drop", message="w"
        )
        DetectorEvent.objects.create(
            run=run, step=steps // 2, level="collapse", rule="grad_spike", message="c"
        )
    with connection.cursor() as cursor:
        for n, key in enumerate([*CHART_KEYS, "time/step_s"]):
            every = 10 if key == "val/success" else 1
            cursor.execute(
                f"INSERT INTO {MetricPoint._meta.db_table} (run_id, key, step, value) "
                "SELECT r, %s, s, 0.5 + 0.4 * sin(s / 300.0 + r + %s) + 0.05 * random() "
                "FROM unnest(%s::bigint[]) AS r, generate_series(0, %s, %s) AS s",
                [key, n, ids, steps - 1, every],
            )
        cursor.execute(
            f"UPDATE {MetricPoint._meta.db_table} SET value = 1000 "
            "WHERE key = 'actor/grad_norm' AND step = 4321"
        )
        cursor.execute(f"ANALYZE {MetricPoint._meta.db_table}")
    for run_id in ids:
        MetricRollup.refresh(run_id)  # what MetricPoint.upsert keeps up to date for points written live
    token = ApiToken.issue(user, "bench")[1]
    count = MetricPoint.objects.count()
    return ids, token, count


def existing():
    import django

    os.environ.update(env())
    django.setup()
    from django.contrib.auth import get_user_model

    from webapp.accounts.models import ApiToken
    from webapp.experiments.models import Run
    from webapp.metrics.models import MetricPoint

    user = get_user_model().objects.get(username="bench")
    ApiToken.objects.filter(user=user).delete()  # one token per name: the last run's goes
    return (
        list(Run.objects.filter(experiment__owner=user).order_by("id").values_list("id", flat=True)),
        ApiToken.issue(user, "bench")[1],
        MetricPoint.objects.count(),
    )


def start_server(logs: Path):
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env(), check=True)
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "webapp.wsgi:application",
            "-w",
            "1",
            "-b",
            f"127.0.0.1:{PORT}",
            "--timeout",
            "600",
        ],
        cwd=ROOT,
        env=env(),
        stdout=open(logs / "server.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            return server
        except OSError:
            time.sleep(0.5)
    raise TimeoutError("the server did not start")


def timed_get(conn, path, headers) -> tuple[float, int]:
    start = time.perf_counter()
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    data = response.read()
    elapsed = time.perf_counter() - start
    if response.status != 200:
        raise RuntimeError(f"GET {path}: {response.status} {data[:300]!r}")
    return elapsed, len(data)


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_api(ids, token, repeats):
    from webapp.compare.api import CHART_KEYS
    from webapp.compare.views import page_points

    points = page_points(len(ids))  # what the compare page asks for
    headers = {"Authorization": f"Bearer {token}"}
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=600)
    keys = ",".join(CHART_KEYS)
    bulk_path = f"/api/compare?runs={','.join(map(str, ids))}&keys={keys}&max_points={points}&bands=1"
    bulk, per_run, size = [], [], 0
    timed_get(conn, bulk_path, headers)  # warm up
    for _ in range(repeats):  # alternate, so load changes on the machine hit both alike
        elapsed, size = timed_get(conn, bulk_path, headers)
        bulk.append(elapsed)
        start = time.perf_counter()
        for pk in ids:
            timed_get(conn, f"/api/runs/{pk}/metrics?keys={keys}&max_points={points}", headers)
        per_run.append(time.perf_counter() - start)
    grouped = [
        timed_get(conn, bulk_path + "&group_by=algorithm.filter_ratio", headers)[0]
        for _ in range(max(3, repeats // 4))
    ]
    plain, clocked = [], []
    timed_get(conn, bulk_path + "&clock=1", headers)  # warm up
    for _ in range(repeats):
        plain.append(timed_get(conn, bulk_path, headers)[0])
        clocked.append(timed_get(conn, bulk_path + "&clock=1", headers)[0])
    return {
        "bulk": bulk,
        "per_run": per_run,
        "bytes": size,
        "max_points": points,
        "grouped": grouped,
        "plain": plain,
        "clocked": clocked,
    }


# In the page: run `action`, then resolve with the milliseconds until every chart has been drawn again.
REDRAW_MS = """(action) => new Promise((resolve) => {
  const before = Number(document.body.dataset.chartsDrawn);
  const start = performance.now();
  new MutationObserver((_, observer) => {
    if (Number(document.body.dataset.chartsDrawn) > before) {
      observer.disconnect();
      resolve(performance.now() - start);
    }
  }).observe(document.body, { attributes: true, attributeFilter: ["data-charts-drawn"] });
  if (action === "smoothing") {
    const slider = document.getElementById("smoothing");
    slider.value = slider.value === "0" ? "0.6" : "0";
    slider.dispatchEvent(new Event("input"));
  } else {
    document.querySelector("#summary-table input.draw-run").click();
  }
})"""


# Added to every page before its scripts: at each animation frame, until each is true, it notes the time
# when (a) the compare page's charts are all drawn (compare.js counts its renders in body[data-charts-drawn]),
# (b) the charts a person sees without scrolling all hold their data, (c) the run page's metric charts all
# hold their data. Checked once a frame, in the frame callbacks (the first-screen check measures the
# charts, a layout at most once a frame until it is noted): polling from outside every 20 ms forced a
# layout of the page mid-drawing and delayed what it measured.
MARKS = """
window.__marks = {};
(function () {
  const plots = (selector) => Array.from(document.querySelectorAll(selector));
  const held = (div) => div.data && div.data.length;
  function frame() {
    const now = performance.now(), marks = window.__marks;
    if (document.body) {
      if (!("compare" in marks) && Number(document.body.dataset.chartsDrawn) >= 1) marks.compare = now;
      if (!("first_screen" in marks)) {
        const shown = plots(".compare-charts .chart-plot").filter((div) => {
          const box = div.getBoundingClientRect();
          return box.bottom > 0 && box.top < window.innerHeight;
        });
        if (shown.length && shown.every(held)) marks.first_screen = now;
      }
      const run = plots(".chart-section .chart-plot");
      if (!("run" in marks) && run.length && run.every(held)) marks.run = now;
    }
    const done = ("compare" in marks && "first_screen" in marks) || "run" in marks;
    if (!done) requestAnimationFrame(frame);
  }
  requestAnimationFrame(frame);
})();
"""


def marked(page, name: str) -> float:
    """Seconds from navigation start until the frame in which MARKS noted `name`."""
    page.wait_for_function(f"() => '{name}' in window.__marks", polling=100)
    return page.evaluate(f"window.__marks['{name}']") / 1000


def bench_page(ids, loads):
    from playwright.sync_api import sync_playwright

    times = {"first_screen": [], "compare": [], "run": [], "smoothing_ms": [], "untick_ms": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.add_init_script(MARKS)
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"http://127.0.0.1:{PORT}/accounts/login/")
        page.fill("input[name=username]", "bench")
        page.fill("input[name=password]", "bench-password-1")
        page.click("button[type=submit], input[type=submit]")
        page.wait_for_load_state()
        compare_url = f"http://127.0.0.1:{PORT}/compare?runs={','.join(map(str, ids))}"
        run_url = f"http://127.0.0.1:{PORT}/runs/{ids[0]}/"
        for i in range(loads + 1):  # the first load of each warms caches and is not counted
            page.goto(compare_url)
            first_screen, elapsed = marked(page, "first_screen"), marked(page, "compare")
            traces = page.evaluate("document.getElementById('chart-grad_norm').data.length")
            webgl = page.evaluate("!!document.querySelector('#chart-grad_norm .gl-canvas')")
            if i:
                times["first_screen"].append(first_screen)
                times["compare"].append(elapsed)
                for action in ("smoothing", "untick", "untick"):  # untick, then tick again
                    redraw = page.evaluate(REDRAW_MS, action)
                    times["smoothing_ms" if action == "smoothing" else "untick_ms"].append(redraw)
            page.goto(run_url)
            run_drawn = marked(page, "run")
            if i:
                times["run"].append(run_drawn)
        page.goto(compare_url)
        page.wait_for_function("() => Number(document.body.dataset.chartsDrawn) >= 1")
        page.locator("#chart-success").scroll_into_view_if_needed()
        page.screenshot(path=str(ROOT / "var" / "bench" / f"compare-{len(ids)}-runs.png"), full_page=False)
        browser.close()
    return times, traces, webgl


def measure(ids, token, args) -> dict:
    api = bench_api(ids, token, args.repeats)
    times, traces, webgl = bench_page(ids, args.loads)
    bulk, per_run = api["bulk"], api["per_run"]
    return {
        "runs": len(ids),
        "bulk_p50_ms": 1000 * statistics.median(bulk),
        "bulk_p95_ms": 1000 * percentile(bulk, 0.95),
        "bulk_bytes": api["bytes"],
        "max_points": api["max_points"],
        "per_run_requests_p50_ms": 1000 * statistics.median(per_run),
        "per_run_requests_p95_ms": 1000 * percentile(per_run, 0.95),
        "bulk_over_per_run_ratio": statistics.median(bulk) / statistics.median(per_run),
        "grouped_by_filter_ratio_p50_ms": 1000 * statistics.median(api["grouped"]),
        "without_clock_p50_ms": 1000 * statistics.median(api["plain"]),
        "with_clock_p50_ms": 1000 * statistics.median(api["clocked"]),
        "with_clock_over_bulk_ratio": statistics.median(api["clocked"]) / statistics.median(api["plain"]),
        "compare_first_screen_drawn_s": [round(t, 3) for t in times["first_screen"]],
        "compare_first_screen_median_s": statistics.median(times["first_screen"]),
        "compare_page_drawn_s": [round(t, 3) for t in times["compare"]],
        "compare_page_median_s": statistics.median(times["compare"]),
        "run_page_drawn_s": [round(t, 3) for t in times["run"]],
        "run_page_median_s": statistics.median(times["run"]),
        "compare_over_run_page_ratio": statistics.median(times["compare"]) / statistics.median(times["run"]),
        "smoothing_redraw_median_ms": statistics.median(times["smoothing_ms"]),
        "untick_redraw_median_ms": statistics.median(times["untick_ms"]),
        "grad_norm_chart_traces": traces,
        "webgl": webgl,
    }


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100, help="runs written to the database")
    parser.add_argument("--sizes", default="20,100", help="how many of them each measurement compares")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="keep the database a previous run filled")
    args = parser.parse_args()
    logs = ROOT / "var" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.reuse:
        ids, token, count = existing()
    else:
        recreate_database()
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env(), check=True)
        ids, token, count = populate(args.runs, args.steps)
    print(f"populated {len(ids)} runs, {count:,} points in {time.perf_counter() - start:.1f} s", flush=True)
    sizes = [int(size) for size in args.sizes.split(",")]
    if max(sizes) > len(ids):
        parser.error(f"--sizes: the database holds {len(ids)} runs")
    server = start_server(logs)
    try:
        results = []
        for size in sizes:
            results.append(measure(ids[:size], token, args))
            print(json.dumps(results[-1], indent=2), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(
        json.dumps(
            {"steps": args.steps, "points": count, "loadavg": Path("/proc/loadavg").read_text().split()[:3]}
        )
    )


if __name__ == "__main__":
    main()
