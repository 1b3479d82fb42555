"""The compare summary on the embedded SQLite database (`./echolab run` with no DATABASE_URL): SQLite
stores NaN as NULL, which once made the finite-value filter drop every row."""

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
