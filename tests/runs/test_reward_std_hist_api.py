"""/api/runs/<id>/reward-std-hist: the stored per-group stds binned per step, owner only."""

from tests.factories import make_run
from webapp.metrics.api import histogram_strip
from webapp.metrics.models import StepRecord


def test_every_value_lands_in_one_bin_and_the_largest_in_the_last():
    strip = histogram_strip([(0, [0.0, 0.0, 1.0]), (1, [0.5, None, float("nan"), 2.0])], bins=4)
    assert strip["steps"] == [0, 1]
    assert strip["bin_edges"] == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert strip["counts"] == [[2, 0, 1, 0], [0, 1, 0, 1]]  # non-finite left out


def test_a_run_whose_stds_are_all_zero_still_gets_bins():
    strip = histogram_strip([(3, [0.0, 0.0])], bins=2)
    assert strip["bin_edges"] == [0.0, 0.5, 1.0] and strip["counts"] == [[2, 0]]


def test_api_bins_the_runs_records_and_hides_other_users_runs(alice, alice_client, bob):
    run = make_run(alice)
    for step in (2, 0, 1):
        StepRecord.objects.create(run=run, step=step, key="train/reward_std_hist", values=[0.1 * step, 0.3])
    body = alice_client.get(f"/api/runs/{run.pk}/reward-std-hist").json()
    assert body["key"] == "train/reward_std_hist" and body["steps"] == [0, 1, 2]
    assert [sum(row) for row in body["counts"]] == [2, 2, 2]
    other = make_run(bob)
    assert alice_client.get(f"/api/runs/{other.pk}/reward-std-hist").status_code == 404
