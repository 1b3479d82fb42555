"""GET /api/compare: many runs' chart data in one request, group aggregates, bad input, scoping."""

import math

import pytest

from tests.factories import make_event, make_experiment, make_user, points, trained_run
from webapp.accounts.models import ApiToken
from webapp.compare.api import CHART_KEYS, MAX_POINTS_PER_REQUEST
from webapp.compare.selection import MAX_RUNS


@pytest.fixture
def grid_runs(alice):
    """Three seeds of filter_ratio 0.5 and one of 1.0, with hand-chosen success values."""
    experiment = make_experiment(alice, "filter grid")
    half = [
        trained_run(experiment, f"seed={s} ratio=0.5", "starpo-s", {"algorithm.filter_ratio": 0.5, "seed": s})
        for s in (1, 2, 3)
    ]
    full = trained_run(experiment, "seed=1 ratio=1.0", "starpo-s", {"algorithm.filter_ratio": 1.0, "seed": 1})
    points(half[0], "train/success", {0: 0.1, 1: 0.2, 2: 0.9})
    points(half[1], "train/success", {0: 0.3, 1: float("nan"), 2: 0.5})
    points(half[2], "train/success", {0: 0.5, 1: 0.6})  # has not reached step 2
    points(full, "train/success", {0: 0.0, 1: 1.0, 2: 0.25})
    return half, full


def get(client, **params):
    return client.get("/api/compare", params)


def test_group_mean_min_max_over_seeds_aligned_by_step(alice_client, grid_runs):
    half, full = grid_runs
    ids = ",".join(str(run.pk) for run in [*half, full])
    body = get(alice_client, runs=ids, keys="train/success", group_by="algorithm.filter_ratio").json()
    groups = {group["value"]: group for group in body["groups"]}
    assert set(groups) == {"0.5", "1.0"}
    assert groups["0.5"]["runs"] == [run.pk for run in half]
    s = groups["0.5"]["series"]["train/success"]
    assert s["step"] == [0, 1, 2]
    # step 0: 0.1, 0.3, 0.5; step 1: 0.2, (NaN left out), 0.6; step 2: 0.9, 0.5 (seed 3 not there yet)
    assert s["mean"] == pytest.approx([0.3, 0.4, 0.7])
    assert s["min"] == pytest.approx([0.1, 0.2, 0.5])
    assert s["max"] == pytest.approx([0.5, 0.6, 0.9])
    assert s["n"] == [3, 2, 2]
    alone = groups["1.0"]["series"]["train/success"]
    assert alone["mean"] == alone["min"] == alone["max"] == pytest.approx([0.0, 1.0, 0.25])


def test_a_groups_summary_is_mean_and_sample_std_over_its_runs(alice_client, grid_runs):
    half, full = grid_runs
    make_event(half[1], 2, "collapse", "collapse")
    make_event(half[0], 1, "warning")
    ids = ",".join(str(run.pk) for run in [*half, full])
    body = get(alice_client, runs=ids, keys="train/success", group_by="algorithm.filter_ratio").json()
    groups = {group["value"]: group["summary"] for group in body["groups"]}
    # last finite success 0.9, 0.5 (its NaN step is not its last), 0.6; best the same
    for measure in ("final_success", "best_success"):
        assert groups["0.5"][measure]["mean"] == pytest.approx(2.0 / 3)
        assert groups["0.5"][measure]["std"] == pytest.approx(math.sqrt(0.13 / 3))
        assert groups["0.5"][measure]["n"] == 3
    assert groups["0.5"]["val_success"] == {"mean": None, "std": None, "n": 0}
    assert groups["0.5"]["collapsed"] == {"runs": 1, "of": 3, "steps": [2]}
    assert groups["1.0"]["final_success"] == {"mean": 0.25, "std": None, "n": 1}
    assert groups["1.0"]["best_success"]["mean"] == 1.0
    assert groups["1.0"]["collapsed"] == {"runs": 0, "of": 1, "steps": []}


def test_a_zoomed_range_of_many_runs_comes_at_its_own_resolution(alice_client, alice):
    experiment = make_experiment(alice)
    runs = [trained_run(experiment, f"seed={s}", overrides={"seed": s}) for s in (1, 2)]
    for run in runs:
        points(run, "actor/grad_norm", {step: 1.0 + step % 2 for step in range(3000)})
    ids = f"{runs[0].pk},{runs[1].pk}"
    body = get(alice_client, runs=ids, keys="actor/grad_norm", max_points=100, after=999, through=1099).json()
    assert (body["after"], body["through"]) == (999, 1099)
    s = body["series"][str(runs[0].pk)]["actor/grad_norm"]
    assert s["step"] == list(range(1000, 1100)) and not s["downsampled"]
    grouped = get(
        alice_client,
        runs=ids,
        keys="actor/grad_norm",
        max_points=100,
        after=999,
        through=1099,
        group_by="experiment",
    ).json()
    assert grouped["groups"][0]["series"]["actor/grad_norm"]["step"] == list(range(1000, 1100))
    refused = get(alice_client, runs=ids, after=10, through=5)
    assert refused.status_code == 400 and "through" in refused.json()["errors"]


def test_group_aggregate_is_downsampled_without_losing_one_seeds_spike(alice_client, alice):
    experiment = make_experiment(alice)
    runs = [trained_run(experiment, f"seed={s}", overrides={"seed": s}) for s in (1, 2)]
    for run in runs:
        points(run, "actor/grad_norm", {step: 1.0 for step in range(1000)})
    points(runs[1], "actor/grad_norm", {537: 400.0})
    body = get(
        alice_client,
        runs=f"{runs[0].pk},{runs[1].pk}",
        keys="actor/grad_norm",
        max_points=50,
        group_by="seed",
    ).json()
    assert [g["value"] for g in body["groups"]] == ["1", "2"]
    body = get(
        alice_client,
        runs=f"{runs[0].pk},{runs[1].pk}",
        keys="actor/grad_norm",
        max_points=50,
        group_by="experiment",
    ).json()
    (group,) = body["groups"]
    s = group["series"]["actor/grad_norm"]
    assert s["downsampled"] and len(s["step"]) == 50
    assert max(s["max"]) == 400.0 and min(s["min"]) == 1.0
    spike_bucket = next(i for i, high in enumerate(s["max"]) if high == 400.0)
    assert s["step"][spike_bucket - 1] < 537 <= s["step"][spike_bucket]
    assert s["mean"][spike_bucket] == 1.0  # the line is the bucket's last step, as on the run page


def test_per_run_series_are_downsampled_like_the_run_page(alice_client, alice):
    experiment = make_experiment(alice)
    runs = [trained_run(experiment, f"seed={s}", overrides={"seed": s}) for s in (1, 2, 3)]
    for i, run in enumerate(runs):
        points(run, "train/success", {step: i + step / 3000 for step in range(3000)})
    points(runs[2], "train/success", {1234: 99.0})
    body = get(alice_client, runs=",".join(str(r.pk) for r in runs), max_points=100, bands=1).json()
    assert list(body["series"]) == [str(r.pk) for r in runs]
    for i, run in enumerate(runs):
        s = body["series"][str(run.pk)]["train/success"]
        assert s["downsampled"] and len(s["step"]) == 100 and s["step"][-1] == 2999
        assert s["value"][-1] == pytest.approx(i + 2999 / 3000)
    assert max(body["series"][str(runs[2].pk)]["train/success"]["max"]) == 99.0
    # Every panel's keys come back by default, empty when a run never logged them.
    assert body["series"][str(runs[0].pk)]["actor/entropy"] == {"step": [], "value": [], "downsampled": False}
    lean = get(alice_client, runs=str(runs[2].pk), max_points=100).json()["series"][str(runs[2].pk)]
    assert "max" not in lean["train/success"]  # bands only on request: 20 runs x 15 keys stay small


def test_events_come_with_each_run(alice_client, grid_runs):
    half, _ = grid_runs
    make_event(half[0], 40, "warning")
    make_event(half[0], 90, "collapse")
    body = get(alice_client, runs=f"{half[0].pk},{half[1].pk}", keys="train/success").json()
    assert [(e["step"], e["level"]) for e in body["runs"][0]["events"]] == [(40, "warning"), (90, "collapse")]
    assert body["runs"][1]["events"] == []


@pytest.mark.parametrize(
    "params, field, fragment",
    [
        ({"runs": "3,abc"}, "runs", "'abc' is not a run id"),
        ({"runs": "-4"}, "runs", "'-4' is not a run id"),
        ({"runs": "99999999999999999999999"}, "runs", "is not a run id"),
        ({"runs": "3,,1"}, "runs", "'3,,1': expected ids separated by commas"),  # as its document says
        ({"runs": "03"}, "runs", "'03': expected ids separated by commas"),
        ({"runs": "+3"}, "runs", "expected ids separated by commas"),
        ({"runs": "3, 7"}, "runs", "expected ids separated by commas"),
        ({}, "runs", "at least one run id"),
        ({"runs": ",".join(str(i) for i in range(1, MAX_RUNS + 2))}, "runs", f"at most {MAX_RUNS} runs"),
        ({"runs": "1", "max_points": "lots"}, None, "max_points: must be an integer"),
        ({"runs": "1", "max_points": "1"}, None, "max_points: must be between 2"),
        (  # every run at 1,000 points is allowed (below), one point more per run and key is not
            {"runs": ",".join(str(i) for i in range(1, MAX_RUNS + 1)), "max_points": "1001"},
            "max_points",
            f"got {MAX_RUNS} x {len(CHART_KEYS)} x 1001",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_problem(alice_client, params, field, fragment):
    response = get(alice_client, **params)
    assert response.status_code == 400
    assert fragment in response.json()["error"]
    if field:
        assert field in response.json()["errors"]


def test_every_run_with_every_chart_key_at_1000_points_fits_one_request(alice_client):
    assert MAX_RUNS * len(CHART_KEYS) * 1000 <= MAX_POINTS_PER_REQUEST
    response = get(alice_client, runs=",".join(str(i) for i in range(1, MAX_RUNS + 1)), max_points=1000)
    assert response.status_code == 200 and response.json()["not_found"] == list(range(1, MAX_RUNS + 1))


def test_unknown_group_by_field_is_named(alice_client, grid_runs):
    response = get(alice_client, runs=str(grid_runs[1].pk), group_by="algorithm.filter_ration")
    assert response.status_code == 400
    assert "'algorithm.filter_ration' is not a config field" in response.json()["errors"]["group_by"]


def test_other_users_runs_are_dropped_exactly_like_missing_ones(client, alice, bob, grid_runs):
    half, _ = grid_runs
    bobs = trained_run(make_experiment(bob, "bob's"), "seed=1")
    points(bobs, "train/success", {0: 0.77})
    client.force_login(alice)
    missing = bobs.pk + 1000
    body = get(client, runs=f"{half[0].pk},{bobs.pk},{missing}", keys="train/success").json()
    assert [run["id"] for run in body["runs"]] == [half[0].pk]
    assert body["not_found"] == [bobs.pk, missing]
    assert list(body["series"]) == [str(half[0].pk)]
    client.force_login(bob)
    body = get(client, runs=f"{half[0].pk},{half[1].pk}", keys="train/success").json()
    assert body["runs"] == [] and body["series"] == {} and body["not_found"] == [half[0].pk, half[1].pk]


def test_needs_a_login_or_a_token(client, alice, grid_runs):
    run = grid_runs[1]
    assert get(client, runs=str(run.pk)).status_code == 401
    token = ApiToken.issue(alice, "script")[1]
    response = client.get(
        "/api/compare", {"runs": str(run.pk), "keys": "train/success"}, HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 200
    assert response.json()["series"][str(run.pk)]["train/success"]["value"] == [0.0, 1.0, 0.25]


def test_non_finite_values_are_gaps_not_errors(alice_client, alice):
    run = trained_run(make_experiment(alice), "seed=1")
    points(run, "actor/grad_norm", {0: 1.0, 1: float("inf"), 2: float("nan"), 3: 2.0})
    body = get(alice_client, runs=str(run.pk), keys="actor/grad_norm", group_by="seed").json()
    assert body["series"][str(run.pk)]["actor/grad_norm"]["value"] == [1.0, None, None, 2.0]
    group = body["groups"][0]["series"]["actor/grad_norm"]
    assert group["step"] == [0, 3] and group["mean"] == [1.0, 2.0]
    assert not any(isinstance(v, float) and math.isnan(v) for v in group["mean"])


def test_runs_loaded_together_match_each_run_loaded_alone(db, client):
    """All runs' series come from the same few queries whatever the number of runs; the same answer as
    the run page's query for each run (short series, rollup-bucketed and point-bucketed ones alike)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from webapp.metrics.downsample import load_series

    owner = make_user("dora", "pw-dora-123")
    experiment = make_experiment(owner)
    runs = [trained_run(experiment, f"seed={s}", overrides={"seed": s}) for s in range(6)]
    for i, run in enumerate(runs):
        points(run, "train/success", {step: (i * step) % 7 for step in range(400)})
        points(run, "actor/grad_norm", {step: i + step for step in range(0, 400, 3)})
        points(run, "val/success", {step: i / 10 for step in range(0, 400, 40)})  # short: never bucketed
    client.force_login(owner)
    for max_points in (50, 3):  # 400 steps in 50 buckets: from the points; in 3: from the rollups
        queries = []
        for chosen in (runs[:2], runs):
            with CaptureQueriesContext(connection) as captured:
                ids = ",".join(str(r.pk) for r in chosen)
                body = client.get("/api/compare", {"runs": ids, "max_points": max_points, "bands": 1}).json()
            queries.append(len(captured.captured_queries))
        assert queries[0] == queries[1]
        for run in runs:
            alone = load_series(run.pk, CHART_KEYS, max_points=max_points)
            assert body["series"][str(run.pk)] == {key: s.as_json() for key, s in alone.items()}


def test_key_names_a_key_holding_a_comma(alice_client, grid_runs):
    half, _ = grid_runs
    points(half[0], "loss,total", {0: 1.5, 1: 1.25})
    body = get(alice_client, runs=str(half[0].pk), key="loss,total").json()
    assert list(body["series"][str(half[0].pk)]) == ["loss,total"]
    assert body["series"][str(half[0].pk)]["loss,total"]["value"] == [1.5, 1.25]


def test_clock_adds_each_runs_seconds_per_step_over_every_step(alice_client, alice):
    """The training-time axis: each run's own clock key (ours, or its trainer's), every step of it whatever
    range the series were asked for, a long one downsampled with each bucket's seconds."""
    from webapp.metrics.models import MetricPoint

    experiment = make_experiment(alice)
    ours, trl, none = (trained_run(experiment, f"seed={s}", overrides={"seed": s}) for s in (1, 2, 3))
    MetricPoint.write_batch(
        ours.pk, [(s, "time/step_s", 2.0 if s % 10 else 60.0) for s in range(2000)], latest_metrics=True
    )
    MetricPoint.write_batch(trl.pk, [(s, "step_time", 3.0) for s in range(0, 50, 5)], latest_metrics=True)
    for run in (ours, trl, none):
        points(run, "train/success", {s: 0.5 for s in range(50)})
    ids = f"{ours.pk},{trl.pk},{none.pk}"
    body = get(alice_client, runs=ids, keys="train/success", max_points=100, after=10, clock=1).json()
    assert set(body["clocks"]) == {str(ours.pk), str(trl.pk)}  # a run that logged no clock is left out
    long, short = body["clocks"][str(ours.pk)], body["clocks"][str(trl.pk)]
    assert long["key"] == "time/step_s" and long["downsampled"] and len(long["step"]) == 100
    # from step 0, though the series were asked for after step 10: steps 0-19, two of them 60 s
    assert long["step"][0] == 19 and long["sums"][0] == 2 * 60 + 18 * 2
    assert sum(long["sums"]) == pytest.approx(200 * 60 + 1800 * 2)
    assert short == {
        "key": "step_time",
        "step": list(range(0, 50, 5)),
        "value": [3.0] * 10,
        "downsampled": False,
    }
    assert "clocks" not in get(alice_client, runs=ids, keys="train/success").json()
    refused = get(alice_client, runs=ids, clock="yes")
    assert refused.status_code == 400 and refused.json()["errors"] == {"clock": "must be 0 or 1, got 'yes'"}
    # The clocks count towards the points a request may return: every run at 1,000 points is allowed with
    # every chart key, not with the clocks too.
    every = ",".join(str(i) for i in range(1, MAX_RUNS + 1))
    assert get(alice_client, runs=every, max_points=1000).status_code == 200
    over = get(alice_client, runs=every, max_points=1000, clock=1)
    assert over.status_code == 400 and "x 15 x 1000" in over.json()["error"]
