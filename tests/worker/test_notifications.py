"""Detector events become rows; collapses become emails, sent once through a real SMTP server."""

import time
from datetime import timedelta
from email import message_from_bytes, policy

import pytest
from django.utils import timezone

from tests.helpers import SmtpInbox, serve_smtp, wait_for
from webapp.alerts.models import DetectorEvent, Notification
from webapp.metrics.models import MetricPoint
from worker.detection import EchoTrapHook
from worker.tasks import send_notification

# Success flat for the 5 steps that set the run's start, a peak, and a fall at step 7; one evaluation is
# enough for these tests, and any peak and fall count (peak_sigmas 0: two steps make no statistics).
SUDDEN_COLLAPSE = {"collapse": {"min_steps": 1, "pending": 1, "smoothing": 0.0, "peak_sigmas": 0.0}}
SUCCESS = [0.1] * 5 + [0.9, 0.9, 0.1, 0.1]


@pytest.fixture
def collapsing_run(queued_run):
    run = queued_run({}, detector_overrides=SUDDEN_COLLAPSE, alert_recipients="a@example.com, b@example.com")
    run.claim("here", 1, "cpu")
    return run


def feed(hook, run, steps):
    for step in steps:
        hook.on_step(run, step, {"train/success": SUCCESS[step]})


def test_collapse_is_stored_once_and_announced_once(collapsing_run, purge_broker):
    hook = EchoTrapHook(collapsing_run)
    feed(hook, collapsing_run, range(len(SUCCESS)))
    event = DetectorEvent.objects.get(run=collapsing_run)
    assert (event.step, event.level, event.rule) == (7, "collapse", "collapse")
    assert "Success collapsed" in event.message
    notification = Notification.objects.get(event=event)
    assert notification.recipients == ["a@example.com", "b@example.com"]

    # A resumed attempt recomputes steps 7-8 after replaying the stored steps 0-6.
    MetricPoint.upsert(collapsing_run.pk, [(step, "train/success", x) for step, x in enumerate(SUCCESS)])
    resumed = EchoTrapHook(collapsing_run)
    feed(resumed, collapsing_run, range(7, 9))
    assert DetectorEvent.objects.filter(run=collapsing_run).count() == 1
    assert Notification.objects.count() == 1


def test_warnings_are_announced_only_when_asked(queued_run, purge_broker):
    overrides = {
        **SUDDEN_COLLAPSE,
        "collapse": {**SUDDEN_COLLAPSE["collapse"], "fraction": 0.0},
        "reward_std_drop": {"min_steps": 1, "pending": 1, "smoothing": 0.0},
    }
    for asked in (False, True):
        run = queued_run({}, detector_overrides=overrides, alert_on_warnings=asked, label=f"asked {asked}")
        hook = EchoTrapHook(run)
        for step, std in enumerate([0.5, 0.5, 0.1]):
            hook.on_step(run, step, {"train/reward_std_in_group": std, "train/success": 0.2})
        event = DetectorEvent.objects.get(run=run)
        assert (event.level, event.rule) == ("warning", "reward_std_drop")
        assert Notification.objects.filter(event=event).exists() == asked


def test_the_events_of_one_step_are_announced_in_one_notification(queued_run, purge_broker):
    unguarded = {"min_steps": 1, "pending": 1, "smoothing": 0.0, "success_sigmas": 0.0, "peak_sigmas": 0.0}
    overrides = {**SUDDEN_COLLAPSE, "reward_std_drop": unguarded}
    run = queued_run({}, detector_overrides=overrides, alert_on_warnings=True)
    hook = EchoTrapHook(run)
    for step, success in enumerate(SUCCESS):
        hook.on_step(
            run, step, {"train/success": success, "train/reward_std_in_group": 0.5 if step < 7 else 0.05}
        )
    assert sorted(DetectorEvent.objects.filter(run=run, step=7).values_list("rule", flat=True)) == [
        "collapse",
        "reward_std_drop",
    ]
    notification = Notification.objects.get()
    assert [(event.level, event.rule) for event in notification.events] == [
        ("collapse", "collapse"),
        ("warning", "reward_std_drop"),
    ]


def test_an_isolated_gradient_spike_is_stored_as_info_and_never_emailed(queued_run, purge_broker):
    run = queued_run({}, alert_on_warnings=True)
    hook = EchoTrapHook(run)
    for step, norm in enumerate([1.0, 1.1, 0.9, 1.0, 1.05, 1.0, 40.0, 1.0, 0.95, 1.1]):
        hook.on_step(run, step, {"actor/grad_norm": norm})
    event = DetectorEvent.objects.get(run=run)
    assert (event.step, event.level, event.rule) == (6, "info", "grad_spike")
    assert not Notification.objects.exists()


def test_bad_overrides_are_refused_naming_the_rule_parameter(queued_run):
    run = queued_run({}, detector_overrides={"collapse": {"pending": 0}})
    with pytest.raises(ValueError, match="collapse.pending"):
        EchoTrapHook(run)


def test_notification_email_sent_by_a_worker_process(
    collapsing_run, smtp_server, use_smtp, start_worker, purge_broker
):
    inbox = smtp_server
    use_smtp(inbox.port)
    start_worker(
        "default",
        name="mailer",
        EMAIL_URL=f"smtp://127.0.0.1:{inbox.port}",
        SITE_URL="https://echolab.example.com",
    )
    feed(EchoTrapHook(collapsing_run), collapsing_run, range(len(SUCCESS)))  # sends the task through Redis

    notification = wait_for(
        lambda: Notification.objects.filter(status="sent").first(),
        timeout=60,
        message="the notification to be sent",
    )
    assert notification.tries == 1 and notification.delivered_via == f"via 127.0.0.1:{inbox.port}"
    [message] = inbox.envelopes
    assert sorted(message.rcpt_tos) == ["a@example.com", "b@example.com"]
    email = message_from_bytes(message.content, policy=policy.default)
    assert email["Subject"] == f"[EchoLab] Success collapsed on {collapsing_run}"
    text = email.get_body(("plain",)).get_content()
    assert f"https://echolab.example.com/runs/{collapsing_run.pk}/" in text

    send_notification.apply(args=[notification.pk])  # delivered again: nothing more is sent
    assert len(inbox.envelopes) == 1


def test_a_runs_alerts_soon_after_its_last_email_come_together_when_the_window_ends(
    queued_run, smtp_server, start_worker, purge_broker, settings
):
    settings.ALERT_GROUP_SECONDS = 4
    run = queued_run({}, alert_on_warnings=True, alert_recipients="a@example.com")
    start_worker(
        "default", name="mailer", EMAIL_URL=f"smtp://127.0.0.1:{smtp_server.port}", ALERT_GROUP_SECONDS="4"
    )
    hook = EchoTrapHook(run)

    def warn(step, rule):
        hook.store(
            run, [{"step": step, "level": "warning", "rule": rule, "message": f"{rule} fired: at {step}"}]
        )

    warn(20, "reward_std_drop")
    wait_for(lambda: len(smtp_server.envelopes) == 1, timeout=60, message="the first email, at once")
    warn(21, "zero_std_groups")
    warn(22, "entropy_rise")
    first, gathered = Notification.objects.order_by("pk")
    assert gathered.next_try_at == first.sent_at + timedelta(seconds=4)  # 4 s after the last email
    gathered = wait_for(
        lambda: Notification.objects.filter(pk=gathered.pk, status="sent").first(),
        timeout=60,
        message="the gathered email",
    )
    assert gathered.sent_at >= first.sent_at + timedelta(seconds=4)  # not before its time
    email = message_from_bytes(smtp_server.envelopes[1].content, policy=policy.default)
    assert email["Subject"] == f"[EchoLab] warning: zero_std_groups fired on {run} (and one more warning)"
    text = email.get_body(("plain",)).get_content()
    assert "zero_std_groups at step 21:" in text and "entropy_rise at step 22:" in text
    assert "within 4 s of its last email" in " ".join(text.split())
    time.sleep(1)
    assert len(smtp_server.envelopes) == 2


def test_smtp_errors_are_retried_then_recorded(collapsing_run, use_smtp, purge_broker):
    with serve_smtp(SmtpInbox(reply="451 4.3.0 mailbox busy, try later")) as inbox:
        use_smtp(inbox.port)
        feed(EchoTrapHook(collapsing_run), collapsing_run, range(len(SUCCESS)))
        notification = Notification.objects.get()

        for _ in range(1 + len(Notification.retry_delays())):
            # eager: a retry runs at once, early, and is refused; its countdown passes here
            send_notification.apply(args=[notification.pk])
            Notification.objects.filter(pk=notification.pk).update(next_try_at=timezone.now())

        notification.refresh_from_db()
        assert notification.status == "failed"
        assert notification.tries == 1 + len(Notification.retry_delays())  # the first try and every retry
        assert "mailbox busy" in notification.error
        assert inbox.envelopes == []
