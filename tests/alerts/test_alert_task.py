"""worker.tasks.send_notification, the real task: through a real worker process to a real SMTP server.
One email per notification however often the task is delivered; SMTP down: retried, then failed."""

from django.utils import timezone

from tests.alerts.conftest import EVENT_STEP
from tests.helpers import free_port, wait_for
from webapp.alerts.models import Notification
from worker.tasks import send_notification

SITE = "https://echolab.example.com"


def test_worker_sends_one_email_even_when_the_task_comes_twice(
    alert_event, smtp_server, start_worker, purge_broker
):
    worker = start_worker(
        "default", name="mailer", EMAIL_URL=f"smtp://127.0.0.1:{smtp_server.port}", SITE_URL=SITE
    )
    event = alert_event(alert_recipients="a@example.com, b@example.com")
    notification = Notification.create_for([event])

    send_notification.delay(notification.pk)
    send_notification.delay(notification.pk)  # a duplicated message (a broker redelivery, the sweeper)
    wait_for(lambda: worker.output().count("succeeded in") >= 2, timeout=90, message="both tasks to finish")

    notification.refresh_from_db()
    assert (notification.status, notification.tries, notification.error) == ("sent", 1, "")
    assert notification.sent_at is not None
    assert "'nothing to do'" in worker.output()
    [message] = smtp_server.messages
    assert sorted(smtp_server.envelopes[0].rcpt_tos) == ["a@example.com", "b@example.com"]
    assert message["Subject"] == "[EchoLab] Success collapsed on FrozenLake PPO / seed 0"
    text = message.get_body(("plain",)).get_content()
    assert f"{SITE}/runs/{event.run_id}/?step={EVENT_STEP}" in text
    [image] = [part for part in message.walk() if part.get_content_type() == "image/png"]
    assert image.get_content().startswith(b"\x89PNG\r\n\x1a\n")


def test_smtp_down_is_retried_then_recorded_as_failed(alert_event, start_worker, purge_broker, settings):
    closed = free_port()
    worker = start_worker("default", name="mailer", EMAIL_URL=f"smtp://127.0.0.1:{closed}")
    event = alert_event()
    run_before = type(event.run).objects.values().get(pk=event.run_id)
    notification = Notification.create_for([event])

    # The worker's first try fails and schedules a retry with backoff; the error is kept meanwhile.
    send_notification.delay(notification.pk)
    wait_for(lambda: "Retry in" in worker.output(), timeout=90, message="the worker to schedule a retry")
    notification.refresh_from_db()
    assert (notification.status, notification.tries) == ("pending", 1)
    assert "Connection refused" in notification.error
    worker.stop()  # its scheduled retry would wait 30 s and more: the remaining tries run here, at once

    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", closed, 5
    for _ in range(len(Notification.retry_delays())):  # the remaining retries, each as its time comes
        Notification.objects.filter(pk=notification.pk).update(next_try_at=timezone.now())
        send_notification.apply(args=[notification.pk])  # eager: its own retry runs at once, early: refused

    notification.refresh_from_db()
    assert notification.status == "failed"
    assert notification.tries == 1 + len(Notification.retry_delays())
    assert "ConnectionRefusedError" in notification.error
    assert type(event.run).objects.values().get(pk=event.run_id) == run_before  # the run is unaffected


def test_an_email_goes_to_the_recipients_saved_when_it_is_sent(alert_event, smtp_server, use_smtp):
    """Recipients changed while an email waited (for its run's window, or retried through an SMTP outage):
    the removed address gets none of it, the added one does (found live: an address removed from the
    alert settings still got the run's email when the mail server came back)."""
    use_smtp(smtp_server.port)
    event = alert_event(alert_recipients="old@example.com, kept@example.com")
    notification = Notification.create_for([event])
    assert notification.recipients == ["old@example.com", "kept@example.com"]
    experiment = event.run.experiment
    experiment.alert_recipients = "kept@example.com, new@example.com"
    experiment.save(update_fields=["alert_recipients"])

    assert send_notification.apply(args=[notification.pk]).get() == "sent"
    assert sorted(smtp_server.envelopes[0].rcpt_tos) == ["kept@example.com", "new@example.com"]
    [message] = smtp_server.messages
    assert message["To"] == "kept@example.com, new@example.com"
    notification.refresh_from_db()
    assert notification.recipients == ["kept@example.com", "new@example.com"]  # the run page says so


def test_warnings_turned_off_while_an_email_waited_are_not_sent(alert_event, smtp_server, use_smtp, settings):
    """Warnings unticked in the alert settings while the run's email waited for its window: a collapse
    goes without them, an email of warnings alone not at all (found live: a waiting warning email still came
    after warnings were turned off)."""
    settings.ALERT_GROUP_SECONDS, settings.ALERT_COOLDOWN_SECONDS = 300, 3600
    use_smtp(smtp_server.port)
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    run = first.run
    sent = Notification.create_for([first])
    sent.claim()
    sent.mark_sent("via test")
    warnings_only = Notification.create_for(
        [alert_event(level="warning", rule="zero_std_groups", step=21, run=run, message="Zero-std: x")]
    )
    other = alert_event(level="warning", rule="entropy_rise", step=22, label="seed 1", alert_on_warnings=True)
    other_sent = Notification.create_for([other])
    other_sent.claim()
    other_sent.mark_sent("via test")
    waiting = [
        alert_event(level="warning", rule="zero_std_groups", step=23, run=other.run, message="Zero: x")
    ]
    Notification.create_for(waiting)
    with_collapse = Notification.create_for([alert_event(step=30, run=other.run)])
    assert [event.level for event in with_collapse.events] == ["collapse", "warning"]
    type(run.experiment).objects.update(alert_on_warnings=False)
    Notification.objects.update(next_try_at=None)  # their windows are up

    assert send_notification.apply(args=[warnings_only.pk]).get().startswith("nothing to tell")
    assert not Notification.objects.filter(pk=warnings_only.pk).exists()
    assert smtp_server.envelopes == []
    assert send_notification.apply(args=[with_collapse.pk]).get() == "sent"
    [message] = smtp_server.messages
    assert message["Subject"] == "[EchoLab] Success collapsed on FrozenLake PPO / seed 1"
    assert "zero_std_groups" not in message.get_body(("plain",)).get_content()
