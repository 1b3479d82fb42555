"""The whole loop, live: a real gpu worker trains the tiny model into a collapse, the detector stores the
collapse event, and a real default-queue worker emails it once to a real SMTP server."""

from email import message_from_bytes, policy

import pytest

from tests.factories import tiny_config
from tests.helpers import wait_for
from webapp.alerts.models import DetectorEvent, Notification
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint

pytestmark = pytest.mark.slow

# A learning rate far above the tiny model's stable range breaks its replies after one update, so
# success drops to 0 at step 1. The collapse rule is made quick to judge (few steps), not lenient; the
# peak is the untrained model's own success, so any peak counts (peak_sigmas 0).
COLLAPSING = {"optim": {"actor_lr": 0.05}}
QUICK_COLLAPSE = {
    "collapse": {"min_steps": 1, "pending": 2, "smoothing": 0.0, "min_peak": 0.05, "peak_sigmas": 0.0}
}


def test_a_collapsing_run_stores_the_event_and_emails_it_once(
    queued_run, start_gpu_worker, start_worker, tiny_model_dir, smtp_server
):
    inbox = smtp_server
    config = tiny_config(tiny_model_dir, steps=5)
    config["optim"].update(COLLAPSING["optim"])
    config["rollout"].update({"env_groups": 4, "group_size": 4, "max_new_tokens": 48})
    config["optim"].update({"mini_batch_size": 16, "micro_batch_size": 16})
    run = queued_run(config, detector_overrides=QUICK_COLLAPSE, alert_recipients="alerts@example.com")
    start_gpu_worker("gpu0")
    start_worker(
        "default",
        name="mailer",
        EMAIL_URL=f"smtp://127.0.0.1:{inbox.port}",
        SITE_URL="https://echolab.example.com",
    )

    assert run.enqueue()
    finished = wait_for(
        lambda: (r := Run.objects.get(pk=run.pk)).is_finished and r, timeout=240, message="the run to finish"
    )
    assert finished.status == "completed", finished.error

    success = dict(MetricPoint.objects.filter(run=run, key="train/success").values_list("step", "value"))
    assert success[0] > 0 and max(success[step] for step in range(2, 5)) == 0, success
    [event] = DetectorEvent.objects.filter(run=run, level="collapse")
    assert event.rule == "collapse" and 1 <= event.step <= 4
    assert event.signals

    notification = wait_for(
        lambda: Notification.objects.filter(event=event, status="sent").first(),
        timeout=90,
        message="the alert email to be sent",
    )
    assert notification.recipients == ["alerts@example.com"]
    [message] = inbox.envelopes
    email = message_from_bytes(message.content, policy=policy.default)
    assert email["Subject"] == f"[EchoLab] Success collapsed on {finished}"
    text = email.get_body(("plain",)).get_content()
    assert f"https://echolab.example.com/runs/{run.pk}/?step={event.step}" in text
    images = [part for part in email.walk() if part.get_content_type() == "image/png"]
    assert len(images) == 1 and images[0].get_content()[:8] == b"\x89PNG\r\n\x1a\n"
