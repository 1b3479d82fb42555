"""Rollups keep whole-series charts cheap: they follow every write, and a chart read from them keeps the
spike, the last value and the gaps that a chart read from the points has."""

import math

import pytest

from tests.factories import make_experiment, make_run, make_user
from webapp.metrics.downsample import _bucketed_sql, key_stats, load_series
from webapp.metrics.models import ROLLUP_WIDTH, MetricPoint, MetricRollup


@pytest.fixture
def run(db):
    owner = make_user("rollup-owner", "pw-12345678")
    return make_run(owner, experiment=make_experiment(owner, "e"), label="r", config={})


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
    from_points = _bucketed_sql(key_stats([run.pk], ["actor/grad_norm"], after=-1), None, 100)
    assert chart == from_points[(run.pk, "actor/grad_norm")].as_json()


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
