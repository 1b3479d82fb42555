"""GET /api/runs/<id>/events and /samples."""

from webapp.alerts.models import DetectorEvent
from webapp.metrics.models import Sample


def test_events_list_in_step_order(alice_client, run):
    DetectorEvent.objects.create(
        run=run,
        step=30,
        level="collapse",
        rule="entropy_drop",
        message="entropy fell",
        signals={"entropy": 0.01},
    )
    DetectorEvent.objects.create(
        run=run, step=12, level="warning", rule="grad_spike", message="spike", signals={"grad_norm": 80.0}
    )
    body = alice_client.get(f"/api/runs/{run.pk}/events").json()
    assert [(e["step"], e["level"], e["rule"], e["message"], e["signals"]) for e in body["events"]] == [
        (12, "warning", "grad_spike", "spike", {"grad_norm": 80.0}),
        (30, "collapse", "entropy_drop", "entropy fell", {"entropy": 0.01}),
    ]
    assert body["run"]["status"] == "running"


def test_samples_at_a_step_and_the_steps_that_have_samples(alice_client, run):
    for step in (0, 10, 20):
        for index in range(2):
            Sample.objects.create(run=run, step=step, index=index, data={"reward": step + index})
    body = alice_client.get(f"/api/runs/{run.pk}/samples", {"step": 10}).json()
    assert body["steps"] == [0, 10, 20] and body["step"] == 10
    assert body["samples"] == [{"index": 0, "data": {"reward": 10}}, {"index": 1, "data": {"reward": 11}}]
    latest = alice_client.get(f"/api/runs/{run.pk}/samples").json()
    assert latest["step"] == 20 and [s["data"]["reward"] for s in latest["samples"]] == [20, 21]


def test_samples_bad_step_is_400(alice_client, run):
    response = alice_client.get(f"/api/runs/{run.pk}/samples", {"step": "last"})
    assert response.status_code == 400 and response.json()["error"].startswith("step: must be an integer")


def test_other_users_and_anonymous_get_nothing(client, bob_client, run):
    DetectorEvent.objects.create(run=run, step=1, level="warning", rule="r", message="m")
    for path in ("events", "samples", "metrics"):
        assert bob_client.get(f"/api/runs/{run.pk}/{path}").status_code == 404
    bob_client.logout()
    assert client.get(f"/api/runs/{run.pk}/events").status_code == 401
    assert bob_client.get("/api/runs/999999/events").status_code == 401
