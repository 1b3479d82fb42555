"""Pages on the embedded SQLite database (`./echolab run` with no DATABASE_URL), which keeps no rollups and
stores NaN as NULL (which once made the compare summary's finite-value filter drop every row)."""

import json

import pytest

from tests.helpers import on_sqlite

SCRIPT = """
import json, math
from django.contrib.auth import get_user_model
from webapp.compare import aggregates
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint
user = get_user_model().objects.create_user("dora", "dora@example.com", "pw-dora-123")
experiment = Experiment.objects.create(owner=user, name="sqlite", config={})
run = Run.objects.create(experiment=experiment, label="seed=1", config={}, status=Run.Status.COMPLETED)
MetricPoint.upsert(run.pk, [(0, "train/success", 0.25), (1, "train/success", 0.75),
                            (2, "train/success", math.nan), (3, "train/success", math.inf),
                            (0, "val/success", 0.5), (2, "val/success", math.nan)])
row = aggregates.summaries([run])[run.pk]
print("SUMMARY " + json.dumps({key: row[key] for key in ("final_success", "best_success", "val_success")}))
"""


@pytest.mark.slow
def test_summary_success_columns_skip_nan_and_inf_on_sqlite(tmp_path):
    printed = on_sqlite(tmp_path, SCRIPT)
    line = next(line for line in printed.splitlines() if line.startswith("SUMMARY "))
    assert json.loads(line.removeprefix("SUMMARY ")) == {
        "final_success": 0.75,
        "best_success": 0.75,
        "val_success": 0.5,
    }


STEP_LINK = """
from django.contrib.auth import get_user_model
from django.test import Client
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint
user = get_user_model().objects.create_user("dora", "dora@example.com", "pw-dora-123")
experiment = Experiment.objects.create(owner=user, name="sqlite", config={})
run = Run.objects.create(experiment=experiment, label="seed=1", config={}, status=Run.Status.COMPLETED,
                         step=25, total_steps=25)
MetricPoint.upsert(run.pk, [(step, "train/success", 0.5) for step in range(25)])
client = Client()
client.force_login(user)
for step in (11, 40):
    html = client.get(f"/runs/{run.pk}/", {"step": step}, HTTP_HOST="localhost").content.decode()
    print("STEP", step, '"cursor": %d' % step in html, "this run ends at step 24, got 40" in html)
"""


@pytest.mark.slow
def test_a_finished_runs_step_link_opens_at_that_step_on_sqlite(tmp_path):
    # The link in every alert email: SQLite keeps no rollups, so the run's last step is read from its points.
    printed = on_sqlite(tmp_path, STEP_LINK)
    assert [line for line in printed.splitlines() if line.startswith("STEP ")] == [
        "STEP 11 True False",
        "STEP 40 False True",
    ]


REWRITES = """
from django.contrib.auth import get_user_model
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint
user = get_user_model().objects.create_user("erin", "erin@example.com", "pw-erin-123")
run = Run.objects.create(experiment=Experiment.objects.create(owner=user, name="e", config={}), label="s", config={})
counts = []
for points in ([(0, "a", 1.0), (1, "a", 1.0)], [(2, "a", 1.0), (0, "b", 1.0)], [(1, "a", 2.0)], [(1, "b", 1.0)]):
    MetricPoint.upsert(run.pk, points)
    counts.append(Run.objects.get(pk=run.pk).rewrites)
print("REWRITES", counts)
"""


@pytest.mark.slow
def test_a_step_written_again_counts_as_a_rewrite_on_sqlite_too(tmp_path):
    """A resumed run logs its steps again: the run page refetches its series when `rewrites` grows."""
    printed = on_sqlite(tmp_path, REWRITES)
    # new steps, a new key: none; step 1 of "a" again: one; "b" beyond its newest: none
    assert "REWRITES [0, 0, 1, 1]" in printed


CLOCK = """
import math
from django.contrib.auth import get_user_model
from webapp.experiments.models import Experiment, Run
from webapp.metrics.downsample import Steps, clock_sums, load_clocks, load_series
from webapp.metrics.models import MetricPoint
user = get_user_model().objects.create_user("finn", "finn@example.com", "pw-finn-123")
run = Run.objects.create(experiment=Experiment.objects.create(owner=user, name="f", config={}), label="s", config={})
MetricPoint.upsert(run.pk, [(s, "time/step_s", 60.0 if s % 10 == 5 else (math.nan if s == 7 else 2.0))
                            for s in range(2_000)])
series = load_series(run.pk, ["time/step_s"], max_points=100)["time/step_s"]
sums = clock_sums(run.pk, "time/step_s", series, Steps())
print("CLOCK", len(sums), sum(sums), sums[0])
# The compare page's clocks of several runs, read the way SQLite can
other = Run.objects.create(experiment=run.experiment, label="t", config={})
MetricPoint.upsert(other.pk, [(s, "time/step_s", 3.0) for s in range(500)])
clocks = load_clocks({run.pk: "time/step_s", other.pk: "time/step_s"}, 100)
print("CLOCKS", sum(clocks[run.pk].sums), sum(clocks[other.pk].sums))
"""


@pytest.mark.slow
def test_a_downsampled_clock_sums_each_buckets_seconds_on_sqlite_too(tmp_path):
    printed = on_sqlite(tmp_path, CLOCK)
    # 200 steps of 60 s, 1,799 of 2 s (step 7 unknown); the first bucket, steps 0-19: 2 x 60 + 17 x 2
    assert "CLOCK 100 15598.0 154.0" in printed
    assert "CLOCKS 15598.0 1500.0" in printed
