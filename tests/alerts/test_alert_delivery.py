"""No lost alert: a sender killed mid-send has its email sent again (same Message-ID); failed sends are
retried over hours with exponential backoff, at a next_try_at the sweeper respects; the run page shows
each alert email's delivery state."""

import asyncio
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.helpers import SmtpInbox, free_port, serve_smtp, wait_for
from webapp.alerts.models import Notification
from worker.sweeper import sweep_runs
from worker.tasks import send_notification

SITE = "https://echolab.example.com"


class HangingInbox(SmtpInbox):
    """Receives the whole message, then never answers: the sender is stuck mid-send."""

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append(envelope)
        await asyncio.sleep(3600)
        return "250 OK"


@pytest.fixture
def hanging_smtp_server():
    with serve_smtp(HangingInbox()) as inbox:
        yield inbox


def age(notification, **fields_seconds_ago):
    Notification.objects.filter(pk=notification.pk).update(
        **{name: timezone.now() - timedelta(seconds=seconds) for name, seconds in fields_seconds_ago.items()}
    )


@pytest.mark.slow
def test_a_sender_killed_mid_send_is_retried_with_the_same_message_id(
    alert_event, hanging_smtp_server, smtp_server, start_worker, purge_broker, settings
):
    settings.SITE_URL = SITE
    stuck = start_worker(
        "default", name="stuck", EMAIL_URL=f"smtp://127.0.0.1:{hanging_smtp_server.port}", SITE_URL=SITE
    )
    notification = Notification.create_for([alert_event()])
    send_notification.delay(notification.pk)
    wait_for(lambda: hanging_smtp_server.envelopes, timeout=90, message="the message to reach SMTP")
    stuck.kill()
    notification.refresh_from_db()
    assert notification.status == "sending"

    sweep_runs()  # not yet: the sender may only be slow
    assert Notification.objects.get(pk=notification.pk).status == "sending"
    age(notification, claimed_at=settings.NOTIFY_SENDING_TIMEOUT + 1)
    assert sweep_runs()["notifications"] == 1
    notification.refresh_from_db()
    assert notification.status == "pending" and "sender stopped answering" in notification.error

    start_worker("default", name="mailer", EMAIL_URL=f"smtp://127.0.0.1:{smtp_server.port}", SITE_URL=SITE)
    wait_for(
        lambda: Notification.objects.get(pk=notification.pk).status == "sent",
        timeout=90,
        message="the email to be sent again",
    )
    [first] = hanging_smtp_server.messages
    [second] = smtp_server.messages
    assert first["Message-ID"] == second["Message-ID"] == notification.message_id
    assert notification.message_id == f"<echolab-notification-{notification.pk}@echolab.example.com>"
    assert Notification.objects.get(pk=notification.pk).tries == 2


def test_retries_span_hours_with_exponential_backoff(settings):
    settings.NOTIFY_RETRY_FIRST, settings.NOTIFY_RETRY_MAX_DELAY = 60, 3600
    settings.NOTIFY_RETRY_FOR = 12 * 3600
    delays = Notification.retry_delays()
    assert delays[:7] == [60, 120, 240, 480, 960, 1920, 3600]
    assert set(delays[6:]) == {3600}
    assert 11 * 3600 < sum(delays) <= 12 * 3600


def test_a_failed_try_sets_next_try_at_and_the_sweeper_waits_for_it(
    alert_event, purge_broker, settings, use_smtp
):
    settings.RUN_RESEND_AFTER = 120
    use_smtp(free_port())  # nothing listens: connection refused
    notification = Notification.create_for([alert_event()])
    notification.claim()
    notification.mark_failed("ConnectionRefusedError: [Errno 111] Connection refused")
    notification.refresh_from_db()
    assert notification.status == "pending"
    first = Notification.retry_delays()[0]
    assert abs((notification.next_try_at - timezone.now()).total_seconds() - first) < 5

    age(notification, created_at=3 * 3600)  # old, but its next try is still ahead
    assert sweep_runs()["notifications"] == 0
    age(notification, next_try_at=60)  # due, and its own retry message may still be on its way
    assert sweep_runs()["notifications"] == 0
    age(notification, next_try_at=121)  # overdue: its retry message is lost
    assert sweep_runs()["notifications"] == 1


def test_the_second_failure_waits_twice_as_long(alert_event, settings):
    notification = Notification.create_for([alert_event()])
    waits = []
    for _ in range(3):
        assert notification.claim()
        waits.append(notification.mark_failed("SMTPServerDisconnected: gone"))
        age(notification, next_try_at=0)  # its time comes
    assert waits == Notification.retry_delays()[:3] == [60, 120, 240]


def test_a_retry_delivered_twice_waits_for_its_time(alert_event):
    """A tester sent one failed email's message three more times: each tried at once and started a retry
    chain of its own, spending the retries' 12 hours in minutes."""
    notification = Notification.create_for([alert_event()])
    assert notification.claim()
    notification.mark_failed("SMTPServerDisconnected: gone")  # the next try in 60 s
    assert not notification.claim()  # a second message for the retry, early
    assert (notification.status, notification.tries) == ("pending", 1)
    age(notification, next_try_at=-5)  # due in 5 s by this clock: another machine's may be ahead
    assert notification.claim() and notification.tries == 2


def test_the_run_page_shows_each_alert_emails_delivery_state(alice_client, alert_event):
    sent = Notification.create_for([alert_event(rule="collapse")])
    sent.claim()
    sent.mark_sent("via smtp.example.com:587")
    run = sent.event.run
    retrying = Notification.objects.create(
        run=run,
        event=alert_event(
            level="warning", rule="grad_unstable", step=70, run=run, message="Gradient norm stayed high: 9"
        ),
        recipients=["x@example.com"],
    )
    retrying.claim()
    retrying.mark_failed("SMTPServerDisconnected: Connection unexpectedly closed")
    failed = Notification.objects.create(
        run=run,
        event=alert_event(rule="entropy_drop", step=80, run=run),
        recipients=["y@example.com"],
        status="failed",
        tries=18,
        error="SMTPRecipientsRefused: y@example.com",
    )

    html = alice_client.get(run.get_absolute_url()).content.decode()
    section = html[html.index('id="alert-delivery"') :]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", section[: section.index("</section>")]))
    sent.refresh_from_db()
    retrying.refresh_from_db()
    # Each alert in words, its step a link to the run at that step.
    sent_at = f"{sent.sent_at:%Y-%m-%d %H:%M} UTC"
    assert f"collapse Success collapsed alice@example.com sent {sent_at} via smtp.example.com:587" in text
    assert '<a href="?step=70">70</a>' in section
    next_try = f"{retrying.next_try_at:%Y-%m-%d %H:%M} UTC"
    assert (
        f"warning Gradient norm stayed high x@example.com retrying until it is sent; next try {next_try}"
        " (SMTPServerDisconnected: Connection unexpectedly closed)"
    ) in text
    assert (
        "Success collapsed y@example.com failed after 18 tries: SMTPRecipientsRefused: y@example.com" in text
    )
    assert failed.pk


@pytest.mark.parametrize(
    ("email_url", "said"),
    [
        ("", "to a file in {var}, not emailed (EMAIL_URL is not an SMTP server)"),
        ("console://", "to the console of the process that sent it, not emailed (EMAIL_URL is console://)"),
        ("smtp+tls://u:p@mail.example.com", "via mail.example.com:587"),
    ],
)
def test_an_email_that_never_left_the_machine_says_so(
    alice_client, alert_event, settings, tmp_path, monkeypatch, email_url, said
):
    """The embedded default (no EMAIL_URL) writes emails as files: the run page must not say "sent" alone
    (a tester believed their alert had been emailed)."""
    from webapp import environment
    from webapp.alerts import emails
    from worker.tasks import send_notification

    monkeypatch.setenv("EMAIL_URL", email_url)
    monkeypatch.setenv("ECHOLAB_VAR", str(tmp_path))
    for name, value in environment.email().items():
        setattr(settings, name, value)
    said = said.format(var=tmp_path / "mail")
    if email_url.startswith("smtp"):  # no server here: what a worker records once the server takes it
        assert emails.destination() == said
        return
    notification = Notification.create_for([alert_event()])
    assert send_notification.apply(args=[notification.pk]).get() == "sent"
    notification.refresh_from_db()
    assert notification.delivery_state() == f"sent {notification.sent_at:%Y-%m-%d %H:%M} UTC {said}"
    html = alice_client.get(notification.event.run.get_absolute_url()).content.decode()
    assert said.replace("'", "&#x27;") in html


def test_a_run_without_alert_emails_shows_no_delivery_section(alice_client, alert_event):
    run = alert_event().run
    assert 'id="alert-delivery"' not in alice_client.get(run.get_absolute_url()).content.decode()


def test_a_run_whose_alerts_went_to_nobody_says_so_where_its_emails_would_be(
    alice, alice_client, alert_event
):
    """A tester's account had no email: the experiment page said "alerts to nobody", the collapsed run's
    page nothing at all."""
    alice.email = ""
    alice.save()
    warned = alert_event(level="warning", rule="reward_std_drop")
    html = alice_client.get(warned.run.get_absolute_url()).content.decode()
    assert 'id="alert-delivery"' not in html  # warnings are not alerted on by default: nothing missed
    collapsed = alert_event()
    html = alice_client.get(collapsed.run.get_absolute_url()).content.decode()
    assert "None sent: this run's experiment alerts nobody (your account has no email)." in html
    assert Notification.create_for([collapsed]) is None  # as the note says

    alice.email = "alice@example.com"
    alice.save()
    assert 'id="alert-delivery"' not in alice_client.get(collapsed.run.get_absolute_url()).content.decode()


def test_the_run_pages_alert_emails_refresh_as_a_part_while_they_may_change(alice_client, alert_event):
    event = alert_event(rule="collapse")  # of a running run
    run = event.run
    url = run.get_absolute_url()
    part = alice_client.get(url, {"part": "alerts"}).content.decode()
    assert "<html" not in part and 'data-live-part="alerts"' in part and " data-live>" in part
    assert "Alert emails" not in part  # none yet: the part waits, empty

    notification = Notification.create_for([event])
    part = alice_client.get(url, {"part": "alerts"}).content.decode()
    assert "Alert emails" in part and notification.delivery_state() in part and " data-live>" in part

    run.status = run.Status.COMPLETED
    run.save()
    assert " data-live>" in alice_client.get(url, {"part": "alerts"}).content.decode()  # still pending
    notification.claim()
    notification.mark_sent("via smtp.example.com:587")
    done = alice_client.get(url, {"part": "alerts"}).content.decode()
    assert "data-live" not in done.replace('data-live-part="alerts"', "").replace("data-live-url", "")
    answer = alice_client.get(url, {"part": "charts"})
    assert answer.status_code == 400 and b"part: 'charts' is not a choice (alerts)" in answer.content
    assert answer["Content-Type"].startswith("text/plain")  # what was asked for is not echoed as HTML
