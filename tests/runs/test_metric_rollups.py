"""Rollups keep whole-series charts cheap: they follow every write, and a chart read from them keeps the
spike, the last value and the gaps that a chart read from the points has."""

import math

import pytest

from tests.factories import make_run, make_user, streamed_run
from webapp.metrics.downsample import Steps, _bucketed_sql, key_stats, load_many, load_series
from webapp.metrics.models import ROLLUP_WIDTH, MetricPoint, MetricRollup


@pytest.fixture
def run(db):
    owner = make_user("rollup-owner", "pw-12345678")
    return streamed_run(owner, label="r")


def test_rollups_follow_every_write_including_overwrites(run):
    MetricPoint.upsert(run.pk, [(step, "loss", float(step)) for step in range(250)])
    rollups = {r.bucket: r for r in MetricRollup.objects.filter(run=run, key="loss")}
    assert sorted(rollups) == [0, 1, 2]
    assert (rollups[2].count, rollups[2].first_step, rollups[2].last_step) == (50, 200, 249)
    assert (rollups[1].low, rollups[1].high, rollups[1].last_value) == (100.0, 199.0, 199.0)

    MetricPoint.upsert(run.pk, [(150, "loss", 1e6), (151, "loss", float("nan"))])  # a recomputed step
    bucket = MetricRollup.objects.get(run=run, key="loss", bucket=1)
    assert (bucket.count, bucket.high, bucket.low) == (100, 1e6, 100.0)


def test_a_chart_from_rollups_keeps_the_spike_and_matches_the_point_reduction(run):
    steps = 200 * ROLLUP_WIDTH
    spike_step = 12_345
    values = [1e4 if step == spike_step else math.sin(step) for step in range(steps)]
    values[777] = float("nan")
    MetricPoint.upsert(run.pk, [(step, "actor/grad_norm", value) for step, value in enumerate(values)])

    chart = load_series(run.pk, ["actor/grad_norm"], max_points=100)["actor/grad_norm"].as_json()
    assert len(chart["step"]) == 100 and chart["downsampled"]
    assert max(chart["max"]) == 1e4
    assert chart["step"][-1] == steps - 1 and chart["value"][-1] == pytest.approx(math.sin(steps - 1))

    # Chart buckets of 2 rollups each line up exactly: the same answer as reducing every point.
    from_points = _bucketed_sql(key_stats([run.pk], ["actor/grad_norm"], Steps(after=-1)), Steps(), 100)
    assert chart == from_points[(run.pk, "actor/grad_norm")].as_json()


def test_many_runs_charts_from_rollups_match_the_point_reduction_with_gaps_and_non_finite_values(run):
    """load_many re-buckets every pair's rollups in one query: per pair, the same answer as bucketing the
    points, with NaN and infinities (at bucket ends too), a rollup of only NaN, missing steps and a second
    run whose series are shorter."""
    import random

    other = make_run(run.experiment.owner, experiment=run.experiment, label="r2", config={})
    rng = random.Random(3)
    for target, steps in ((run, 60 * ROLLUP_WIDTH), (other, 40 * ROLLUP_WIDTH)):
        for key in ("a", "b"):
            points = [
                (
                    step,
                    key,
                    rng.choice([math.nan, math.inf, -math.inf]) if rng.random() < 0.05 else rng.gauss(0, 1),
                )
                for step in range(steps)
                if not 1_000 <= step < 1_300  # a gap of three rollups
            ]
            points = [(s, k, math.nan if 2_000 <= s < 2_100 else v) for s, k, v in points]  # a rollup of NaN
            points[299] = (299, key, math.inf)  # the last point of the first chart bucket
            MetricPoint.upsert(target.pk, points)

    charts = load_many([run.pk, other.pk], ["a", "b", "missing"], max_points=20)
    for target in (run, other):
        for key in ("a", "b"):
            from_points = _bucketed_sql(key_stats([target.pk], [key], Steps(after=-1)), Steps(), 20)[
                (target.pk, key)
            ]
            assert charts[target.pk][key].as_json() == from_points.as_json()
        assert charts[target.pk]["missing"].as_json() == {"step": [], "value": [], "downsampled": False}
    assert charts[run.pk]["a"].as_json()["value"][0] is None  # the infinity at step 299


def _rebucketed_rollups(run_id, key, max_points):
    """A chart from the stored rollups, re-bucketed here: a rollup counts in the chart bucket of its last
    step; a bucket takes its last rollup's last point and the least and greatest finite values."""
    rollups = list(MetricRollup.objects.filter(run_id=run_id, key=key).order_by("bucket"))
    first, last = rollups[0].first_step, rollups[-1].last_step
    buckets = {}
    for rollup in rollups:
        buckets.setdefault((rollup.last_step - first) * max_points // (last - first + 1), []).append(rollup)
    chart = {"step": [], "value": [], "min": [], "max": [], "downsampled": True}
    for _, members in sorted(buckets.items()):
        lows = [r.low for r in members if r.low is not None]
        highs = [r.high for r in members if r.high is not None]
        value = members[-1].last_value
        chart["step"].append(members[-1].last_step)
        chart["value"].append(value if value is not None and math.isfinite(value) else None)
        chart["min"].append(min(lows, default=None))
        chart["max"].append(max(highs, default=None))
    return chart


@pytest.mark.parametrize("max_points", [7, 13])
def test_charts_from_rollups_in_buckets_that_do_not_line_up_with_them(run, max_points):
    """Chart buckets that cut through rollups (a rollup counts where its last step falls), a series that
    starts mid-rollup at step 550, and a chart bucket whose rollups hold only NaN (no band there)."""
    steps = range(550, 550 + 30 * ROLLUP_WIDTH)
    points = [(s, "k", math.nan if 1_000 <= s < 1_900 else math.sin(s / 7)) for s in steps]
    MetricPoint.upsert(run.pk, points)
    chart = load_many([run.pk], ["k"], max_points=max_points)[run.pk]["k"].as_json()
    assert chart == _rebucketed_rollups(run.pk, "k", max_points)
    assert None in chart["min"] and len(chart["step"]) == max_points


def test_a_batch_overlapping_stored_points_overwrites_them_and_appends_the_rest(run):
    MetricPoint.upsert(run.pk, [(step, "loss", 1.0) for step in range(10)])
    # Steps 5-9 exist: the plain INSERT fails on them and the batch is upserted as a whole.
    MetricPoint.upsert(run.pk, [(step, "loss", 2.0) for step in range(5, 15)] + [(0, "acc", 0.5)])
    stored = dict(MetricPoint.objects.filter(run=run, key="loss").values_list("step", "value"))
    assert stored == {**{step: 1.0 for step in range(5)}, **{step: 2.0 for step in range(5, 15)}}
    assert MetricPoint.objects.get(run=run, key="acc").value == 0.5
    assert MetricRollup.objects.get(run=run, key="loss", bucket=0).count == 15


def test_deleting_a_run_deletes_its_points_and_rollups(run):
    # The points table has no foreign key constraint in the database: Django's on_delete does this.
    MetricPoint.upsert(run.pk, [(step, "loss", 1.0) for step in range(5)])
    run.experiment.delete()
    assert not MetricPoint.objects.exists() and not MetricRollup.objects.exists()


def _summaries_from_points(run):
    """Each (key, bucket)'s rollup, computed here from the stored points."""
    buckets = {}
    for key, step, value in MetricPoint.objects.filter(run=run).values_list("key", "step", "value"):
        buckets.setdefault((key, step // ROLLUP_WIDTH), []).append((step, value))
    summaries = {}
    for where, points in buckets.items():
        finite = [value for _, value in points if value is not None and math.isfinite(value)]
        steps = [step for step, _ in points]
        summaries[where] = (
            len(points),
            min(steps),
            max(steps),
            repr(max(points)[1]),  # repr: NaN equals NaN
            min(finite, default=None),
            max(finite, default=None),
            round(math.fsum(finite), 9) if finite else None,  # rounded: summed in another order
        )
    return summaries


def _stored_rollups(run):
    return {
        (r.key, r.bucket): (
            *(r.count, r.first_step, r.last_step, repr(r.last_value), r.low, r.high),
            None if r.total is None else round(r.total, 9),
        )
        for r in MetricRollup.objects.filter(run=run)
    }


@pytest.mark.parametrize("in_transaction", [False, True])
def test_rollups_equal_a_summary_of_the_points_after_any_mix_of_appends_and_overwrites(
    transactional_db, in_transaction
):
    """Appended points merge into a bucket's summary; a bucket where a point is overwritten is summarised
    again. Random batches of both, with repeats inside a batch and values of every kind; written on their
    own (an append first, an upsert when a point exists) and within a caller's transaction (an upsert)."""
    import random

    from django.db import transaction

    from webapp.metrics import ingest

    owner = make_user("rollup-owner", "pw-12345678")
    run = streamed_run(owner, label="r")

    rng = random.Random(20)
    kinds = [lambda: rng.uniform(-5, 5), lambda: None, lambda: math.nan, lambda: math.inf, lambda: -math.inf]
    next_step = 0
    for _ in range(30):
        points, resend = [], rng.random() < 0.25  # a batch of earlier steps only: latest_metrics stay
        for _ in range(rng.randint(1, 60)):
            if next_step and (resend or rng.random() < 0.3):  # a step already written, perhaps in this batch
                step = rng.randrange(next_step)
            else:
                step, next_step = next_step, next_step + rng.randint(1, 40)
            points.append((step, rng.choice(["loss", "acc"]), rng.choice(kinds)()))
        if in_transaction:
            with transaction.atomic():
                ingest.write(run.pk, points)
        else:
            ingest.write(run.pk, points)
        assert _stored_rollups(run) == _summaries_from_points(run)
        run.refresh_from_db()
        newest = {}
        for key, value in MetricPoint.objects.filter(run=run).order_by("step").values_list("key", "value"):
            newest[key] = value if value is not None and math.isfinite(value) else None
        assert run.latest_metrics == newest


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_for_one_run_take_turns_and_keep_the_rollups_exact():
    """Each batch reads stored points (an overwritten bucket, the newest step) in a snapshot taken once it
    holds the run's row lock: batches sent at once, on their own connections, lose nothing."""
    import threading

    from django.db import connection

    from webapp.metrics import ingest

    owner = make_user("rollup-writer", "pw-12345678")
    run = streamed_run(owner, label="r")
    errors = []

    def writer(offset):
        try:
            for round_ in range(8):  # every writer overwrites the others' steps, bucket by bucket
                ingest.write(
                    run.pk,
                    [
                        (step, "loss", float(offset * 1000 + round_))
                        for step in range(round_ * 30, round_ * 30 + 60)
                    ],
                )
        except Exception as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert _stored_rollups(run) == _summaries_from_points(run)
    run.refresh_from_db()
    newest = MetricPoint.objects.filter(run=run).order_by("-step").values_list("value", flat=True)[0]
    assert run.latest_metrics == {"loss": newest}
