"""A run that fails is emailed at once to its experiment's recipients: a worker's run whose trainer raised
or whose attempts ran out, and a run trained elsewhere whose MLflow client went quiet or said it failed.
Once per failure, through a real SMTP server."""

from datetime import timedelta
from email import message_from_bytes, policy

import pytest
from django.utils import timezone

from tests.factories import make_experiment, make_run
from tests.helpers import SmtpInbox, serve_smtp
from webapp.alerts.models import Notification
from webapp.experiments.models import Run
from webapp.tracking.models import ExternalExperiment, ExternalRun
from worker.tasks import send_notification

SITE = "https://echolab.example.com"


@pytest.fixture(autouse=True)
def site_url(settings):
    settings.SITE_URL = SITE


@pytest.fixture
def inbox(use_smtp):
    with serve_smtp(SmtpInbox()) as inbox:
        use_smtp(inbox.port)
        yield inbox


def delivered(notification, inbox):
    """Send it as the worker does; the email as the SMTP server got it."""
    assert send_notification.apply(args=[notification.pk]).get() == "sent"
    [envelope] = inbox.envelopes
    inbox.envelopes.clear()
    return envelope, message_from_bytes(envelope.content.replace(b"\r\n", b"\n"), policy=policy.default)


def running_run(owner, **experiment_fields):
    experiment = make_experiment(owner, name="Bandit lr sweep", **experiment_fields)
    run = make_run(owner, experiment=experiment, label="seed 3")
    assert run.claim("gpu-host", 123, "cpu")
    Run.objects.filter(pk=run.pk).update(step=41, total_steps=200)
    run.refresh_from_db()
    return run


def test_a_run_whose_trainer_raised_is_emailed_once_with_why_and_how_to_go_on(alice, inbox):
    run = running_run(alice, alert_recipients="a@example.com, b@example.com")
    assert run.finish(Run.Status.FAILED, error="RuntimeError: CUDA out of memory\nTried to allocate 2 GiB")
    assert not run.finish(Run.Status.FAILED, error="again")  # no longer running: no second failure

    [notification] = Notification.objects.filter(run=run)
    assert notification.event is None and notification.failure_step == 41
    envelope, email = delivered(notification, inbox)
    assert sorted(envelope.rcpt_tos) == ["a@example.com", "b@example.com"]
    assert email["Subject"] == "[EchoLab] failed: Bandit lr sweep / seed 3 at step 41"
    text = email.get_body(("plain",)).get_content()
    assert 'Run "seed 3" of experiment "Bandit lr sweep" failed at step 41 of 200:' in text
    assert "RuntimeError: CUDA out of memory\nTried to allocate 2 GiB" in text
    assert "Resume on its page goes on from its last checkpoint" in text
    assert f"{SITE}/runs/{run.pk}/?step=41" in text
    html = email.get_body(("html",)).get_content()
    assert "CUDA out of memory" in html and f'href="{SITE}/runs/{run.pk}/?step=41"' in html


def test_completed_and_stopped_runs_are_not_emailed(alice):
    for status in (Run.Status.COMPLETED, Run.Status.STOPPED):
        run = running_run(alice, alert_recipients="a@example.com")
        assert run.finish(status)
    assert not Notification.objects.exists()


def test_nobody_to_tell_sends_nothing(alice):
    alice.email = ""
    alice.save()
    run = running_run(alice)
    assert run.finish(Run.Status.FAILED, error="boom")
    assert not Notification.objects.exists()


def test_a_run_whose_attempts_ran_out_is_emailed_with_each_attempts_end(alice, inbox):
    run = running_run(alice, alert_recipients="a@example.com")
    assert run.give_up("worker lost: no heartbeat from gpu-host (pid 123)")
    [notification] = Notification.objects.filter(run=run)
    text = delivered(notification, inbox)[1].get_body(("plain",)).get_content()
    assert "gave up after 1 attempt:\nattempt 1 on gpu-host: worker lost: no heartbeat" in text


def mlflow_run(owner, experiment_name="grpo on trl") -> ExternalRun:
    owner.email = "me@example.com"
    owner.save()
    experiment = ExternalExperiment.create(owner, experiment_name)
    external = ExternalRun.start(experiment, "trl-seed1", {}, "me", timezone.now())
    external.log([("reward", 0.5, step, None) for step in range(8)], {}, {})
    return ExternalRun.objects.select_related("run").get(pk=external.pk)


def test_an_mlflow_run_gone_quiet_is_emailed_once_and_again_only_after_it_came_back(alice, inbox, settings):
    external = mlflow_run(alice)
    Run.objects.filter(pk=external.run_id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    external.refresh_from_db()
    assert external.mark_lost(settings.MLFLOW_LOST_AFTER)
    assert not external.mark_lost(settings.MLFLOW_LOST_AFTER)  # failed already
    [notification] = Notification.objects.all()
    envelope, email = delivered(notification, inbox)
    assert envelope.rcpt_tos == ["me@example.com"]
    assert email["Subject"] == "[EchoLab] failed: grpo on trl / trl-seed1 at step 7"
    text = email.get_body(("plain",)).get_content()
    assert "lost: nothing arrived from the MLflow client since" in text
    resumes = "If its script still runs, its next logging call for the run (mlflow, or EchoLab's metrics API)"
    assert resumes in text
    assert "Resume on its page" not in text

    # It logs again (running), then is lost again: news again.
    external.log([("reward", 0.4, 8, None)], {}, {})
    assert Run.objects.get(pk=external.run_id).status == Run.Status.RUNNING
    Run.objects.filter(pk=external.run_id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    external.refresh_from_db()
    assert external.mark_lost(settings.MLFLOW_LOST_AFTER)
    assert Notification.objects.count() == 2
    # Its client ends it as failed after all: it was told already.
    external.update("FAILED", None, "")
    assert Notification.objects.count() == 2


def test_an_mlflow_run_its_client_ends_as_failed_is_emailed_and_a_finished_one_is_not(alice, inbox):
    external = mlflow_run(alice)
    external.update("FINISHED", None, "")
    assert not Notification.objects.exists()
    other = mlflow_run(alice, experiment_name="another")
    other.update("FAILED", None, "")
    [notification] = Notification.objects.all()
    text = delivered(notification, inbox)[1].get_body(("plain",)).get_content()
    assert "failed (the client says)" in text and "run its script again to go on" in text


def test_the_run_page_lists_the_failure_email(alice_client, alice):
    run = running_run(alice, alert_recipients="a@example.com")
    run.finish(Run.Status.FAILED, error="ValueError: rollout produced no tokens")
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert "Alert emails" in page
    assert "Run failed: ValueError: rollout produced no tokens" in page and "a@example.com" in page
