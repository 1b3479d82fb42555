"""The experiment list counts runs as the experiment page shows them: archived runs are left out of the
status counts, progress and status filter, and counted apart."""

from webapp.experiments.models import Experiment, Run
from webapp.experiments.specs import ExperimentSpec


def test_archived_runs_are_counted_apart_and_do_not_match_a_status_filter(alice, alice_client):
    experiment = Experiment.create_with_runs(
        alice,
        ExperimentSpec(
            name="three seeds", env={"name": "frozenlake", "params": {}}, steps=5, seeds=[1, 2, 3]
        ),
    )
    first, second, third = experiment.runs.order_by("pk")
    Run.objects.filter(pk=first.pk).update(status="failed", step=5, total_steps=5)
    Run.objects.filter(pk__in=[second.pk, third.pk]).update(step=0, total_steps=5)
    first.refresh_from_db()
    first.archive()

    listed = alice_client.get("/").context["page"].object_list[0]
    assert (listed.runs_failed, listed.runs_queued, listed.runs_archived, listed.run_count) == (0, 2, 1, 2)
    assert (listed.steps_done, listed.steps_total) == (0, 10)
    assert list(alice_client.get("/?status=failed").context["page"].object_list) == []
    assert list(alice_client.get("/?status=queued").context["page"].object_list) == [experiment]
