"""GET /api/runs/<id>/metrics: spike-preserving downsampling, incremental polling, gaps for NaN/inf."""

import math
import random

import numpy as np
import pytest

from tests.factories import insert_series
from webapp.experiments.models import Run
from webapp.metrics.downsample import Steps, _bucketed_sql, bucket_numpy, key_stats
from webapp.metrics.models import MetricPoint

URL = "/api/runs/{}/metrics"


def test_single_step_spike_survives_100k_steps_at_1000_points(alice_client, run):
    insert_series(run, "actor/grad_norm", 100_000, "1.0 + 0.01 * sin(s)")
    MetricPoint.upsert(run.pk, [(54_321, "actor/grad_norm", 1e4)])

    body = alice_client.get(URL.format(run.pk), {"keys": "actor/grad_norm", "max_points": 1000}).json()
    series = body["series"]["actor/grad_norm"]

    assert series["downsampled"] is True
    assert len(series["step"]) == len(series["value"]) == len(series["min"]) == len(series["max"]) == 1000
    assert max(series["max"]) == 1e4
    spike_bucket = series["max"].index(1e4)
    assert series["step"][spike_bucket - 1] < 54_321 <= series["step"][spike_bucket]
    assert min(series["min"]) == pytest.approx(0.99, abs=1e-3)
    # The line is each bucket's last point: the final step is the run's last step.
    assert series["step"][-1] == 99_999
    assert series["value"][-1] == pytest.approx(1.0 + 0.01 * math.sin(99_999))
    assert series["step"] == sorted(series["step"])


def test_short_series_come_back_whole_without_band(alice_client, run):
    MetricPoint.upsert(
        run.pk, [(0, "train/success", 0.1), (1, "train/success", 0.2), (3, "train/success", 0.5)]
    )
    body = alice_client.get(URL.format(run.pk), {"keys": "train/success,val/success"}).json()
    assert body["series"]["train/success"] == {
        "step": [0, 1, 3],
        "value": [0.1, 0.2, 0.5],
        "downsampled": False,
    }
    assert body["series"]["val/success"] == {"step": [], "value": [], "downsampled": False}


def test_sql_bucketing_matches_the_numpy_reference(run):
    rng = random.Random(7)
    steps = sorted(rng.sample(range(50_000), 5_000))
    values = [
        rng.choice([None, math.nan, math.inf, -math.inf]) if rng.random() < 0.05 else rng.gauss(0, 1)
        for _ in steps
    ]
    MetricPoint.upsert(run.pk, [(s, "k", v) for s, v in zip(steps, values)])

    # Bucketing the points themselves (whole-series charts coarser than the rollups use those instead:
    # tests/runs/test_metric_rollups.py).
    from_sql = _bucketed_sql(key_stats([run.pk], ["k"], Steps(after=-1)), Steps(), 300)[
        (run.pk, "k")
    ].as_json()
    reference = bucket_numpy(steps, [math.nan if v is None else v for v in values], 300).as_json()

    assert from_sql == reference
    assert len(from_sql["step"]) <= 300


def test_bucket_of_only_non_finite_values_has_null_band():
    series = bucket_numpy([0, 1, 2, 3], [math.nan, math.inf, 1.0, 2.0], 2).as_json()
    assert series == {
        "step": [1, 3],
        "value": [None, 2.0],
        "min": [None, 1.0],
        "max": [None, 2.0],
        "downsampled": True,
    }


def test_after_returns_only_newer_points_and_run_progress(alice_client, run):
    MetricPoint.upsert(run.pk, [(step, "train/success", step / 10) for step in range(10)])
    body = alice_client.get(URL.format(run.pk), {"keys": "train/success", "after": 6}).json()
    assert body["series"]["train/success"]["step"] == [7, 8, 9]
    assert body["series"]["train/success"]["value"] == [0.7, 0.8, 0.9]
    assert body["run"] == {
        "id": run.pk,
        "status": "running",
        "finished": False,
        "step": 10,
        "total_steps": 100,
        "progress_percent": 10,
        "eta_seconds": 42.0,
        "error": "",
        "host": "",
        "device": "",
        "attempt": 0,
        "rewrites": 0,
        "stop_requested": False,
        "key_count": 0,
    }
    assert alice_client.get(URL.format(run.pk), {"keys": "train/success", "after": 9}).json()["series"] == {
        "train/success": {"step": [], "value": [], "downsampled": False}
    }


def test_a_finished_run_has_no_eta_whatever_its_row_kept(alice_client, run):
    # A run that finished before finish() cleared the column kept its last attempt's ETA
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, eta_seconds=3095.8)
    assert (
        alice_client.get(URL.format(run.pk), {"keys": "train/success"}).json()["run"]["eta_seconds"] is None
    )
    assert alice_client.get(f"/api/runs/{run.pk}").json()["eta_seconds"] is None
    assert "ETA" not in alice_client.get(f"/runs/{run.pk}/").content.decode().split('id="run-eta"')[1][:40]


def test_after_applies_before_downsampling(alice_client, run):
    insert_series(run, "k", 5_000, "s")
    series = alice_client.get(URL.format(run.pk), {"keys": "k", "after": 3_999, "max_points": 100}).json()[
        "series"
    ]["k"]
    assert series["downsampled"] and min(series["min"]) == 4_000 and series["step"][-1] == 4_999


def test_a_downsampled_clock_says_the_seconds_each_bucket_took(alice_client, run):
    """Every tenth step took 60 s, the others 2 s: 20,000 steps are 156,000 s, which the buckets' last
    values (each a 2 s step) would tell as 40,000."""
    insert_series(run, "time/step_s", 20_000, "CASE WHEN mod(s, 10) = 5 THEN 60.0 ELSE 2.0 END")
    insert_series(run, "other", 20_000, "1.0")
    MetricPoint.upsert(run.pk, [(7, "time/step_s", math.nan)])  # an unknown step time counts nothing
    body = alice_client.get(URL.format(run.pk), {"keys": "time/step_s,other", "max_points": 1000}).json()
    clock = body["series"]["time/step_s"]
    assert clock["downsampled"] and len(clock["sums"]) == len(clock["step"]) == 1000
    assert sum(clock["sums"]) == pytest.approx(2_000 * 60 + 18_000 * 2 - 2)
    assert clock["sums"][0] == pytest.approx(2 * 60 + 17 * 2)  # steps 0..19: 5 and 15 slow, 7 unknown
    assert "sums" not in body["series"]["other"]  # only the run's clock
    later = alice_client.get(
        URL.format(run.pk), {"keys": "time/step_s", "after": 9_999, "max_points": 100}
    ).json()["series"]["time/step_s"]
    assert sum(later["sums"]) == pytest.approx(1_000 * 60 + 9_000 * 2)
    short = alice_client.get(URL.format(run.pk), {"keys": "time/step_s", "after": 19_989}).json()
    assert "sums" not in short["series"]["time/step_s"]  # ten points, each its own


def test_a_clock_whose_seconds_overflow_a_float_says_null_as_its_schema_does(alice_client, run):
    """A fuzzer's time/step_s of 1e308 every 10 steps: the bucket's seconds are beyond a float's range."""
    from webapp.core import openapi

    MetricPoint.upsert(run.pk, [(step, "time/step_s", 1e308) for step in range(0, 30, 10)])
    clock = alice_client.get(URL.format(run.pk), {"keys": "time/step_s", "max_points": 2}).json()["series"][
        "time/step_s"
    ]
    assert clock["downsampled"] and None in clock["sums"]
    sums = openapi.document()["components"]["schemas"]["Series"]["properties"]["sums"]
    assert sums["items"]["type"] == ["number", "null"]


def test_a_zoomed_range_is_downsampled_over_its_own_steps(alice_client, run):
    """A chart zoomed to 100 of 20,000 steps asks for them alone: every point, not 5 buckets' last ones."""
    insert_series(run, "k", 20_000, "s")
    MetricPoint.upsert(run.pk, [(12_345, "k", 1e6)])
    body = alice_client.get(URL.format(run.pk), {"keys": "k", "after": 12_299, "through": 12_400}).json()
    series = body["series"]["k"]
    assert (body["after"], body["through"]) == (12_299, 12_400) and not series["downsampled"]
    assert series["step"] == list(range(12_300, 12_401)) and series["value"][45] == 1e6
    wide = alice_client.get(URL.format(run.pk), {"keys": "k", "through": 9_999, "max_points": 100}).json()
    s = wide["series"]["k"]
    assert s["downsampled"] and s["step"][-1] == 9_999 and len(s["step"]) == 100
    refused = alice_client.get(URL.format(run.pk), {"keys": "k", "after": 50, "through": 50})
    assert refused.status_code == 400 and "through" in refused.json()["errors"]


def test_nan_and_infinity_come_back_as_null(alice_client, run):
    MetricPoint.upsert(
        run.pk,
        [
            (0, "k", 1.0),
            (1, "k", math.nan),
            (2, "k", math.inf),
            (3, "k", -math.inf),
            (4, "k", None),
            (5, "k", 2.0),
        ],
    )
    response = alice_client.get(URL.format(run.pk), {"keys": "k"})
    assert b"NaN" not in response.content and b"Infinity" not in response.content
    assert response.json()["series"]["k"]["value"] == [1.0, None, None, None, None, 2.0]

    insert_series(run, "spiky", 2_000, "CASE WHEN mod(s, 7) = 0 THEN 'NaN'::float8 ELSE s END")
    series = alice_client.get(URL.format(run.pk), {"keys": "spiky", "max_points": 10}).json()["series"][
        "spiky"
    ]
    assert series["max"][-1] == 1_999 and None not in series["min"]


def test_keys_default_to_the_runs_latest_metrics(alice_client, run):
    run.latest_metrics = {"b": 1.0, "a": 2.0}
    run.save()
    MetricPoint.upsert(run.pk, [(0, "a", 2.0)])
    assert list(alice_client.get(URL.format(run.pk)).json()["series"]) == ["a", "b"]


def test_a_run_with_more_keys_than_a_request_takes_is_told_to_name_them(alice_client, run):
    run.latest_metrics = {f"k{i}": 1.0 for i in range(150)}
    run.save()
    answer = alice_client.get(URL.format(run.pk))
    assert answer.status_code == 400
    assert answer.json()["errors"]["keys"].startswith("name the keys: there are 150")
    assert list(alice_client.get(URL.format(run.pk), {"keys": "k3,k140"}).json()["series"]) == ["k3", "k140"]


def test_key_names_a_key_exactly_as_logged_even_with_a_comma_or_spaces(alice_client, run):
    MetricPoint.upsert(run.pk, [(0, "loss,total", 1.5), (0, " padded ", 2.5), (0, "loss", 9.0)])
    query = {"key": ["loss,total", " padded "], "keys": "loss"}
    series = alice_client.get(URL.format(run.pk), query).json()["series"]
    assert list(series) == ["loss,total", " padded ", "loss"]
    assert [series[key]["value"] for key in series] == [[1.5], [2.5], [9.0]]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"key": ""}, "key: must not be empty"),
        (
            {"key": [f"k{i}" for i in range(60)], "keys": ",".join(f"j{i}" for i in range(41))},
            "keys: at most 100",
        ),
        ({"key": "x" * 251}, "key: each key is at most 250"),
        ({"max_points": "lots"}, "max_points: must be an integer"),
        ({"max_points": "1"}, "max_points: must be between 2"),
        ({"after": "-5"}, "after: must be between -1"),
        ({"keys": ",".join(f"k{i}" for i in range(101))}, "keys: at most 100"),
        ({"keys": "x" * 251}, "keys: each key is at most 250"),
    ],
)
def test_bad_query_parameters_are_400_naming_the_parameter(alice_client, run, params, message):
    response = alice_client.get(URL.format(run.pk), params)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)


def test_numpy_reduction_keeps_extremes_of_every_bucket():
    values = np.random.default_rng(1).normal(size=10_000)
    series = bucket_numpy(np.arange(10_000), values, 100)
    assert max(series.max) == values.max() and min(series.min) == values.min()
    assert len(series.step) == 100


@pytest.mark.parametrize("params", [{"keys": ""}, {"keys": ",, ,"}])
def test_keys_given_but_naming_none_is_a_400(alice_client, run, params):
    response = alice_client.get(URL.format(run.pk), params)
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["keys"]


@pytest.mark.parametrize("text", ["1_0", "\u0663", "+", "1e3", "9" * 20])
def test_integer_parameters_are_ascii_digits(alice_client, run, text):
    response = alice_client.get(URL.format(run.pk), {"max_points": text})
    assert response.status_code == 400
    assert response.json()["error"].startswith("max_points: must be an integer")
