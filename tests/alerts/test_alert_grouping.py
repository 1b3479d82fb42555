"""At most one alert email per run within ALERT_GROUP_SECONDS: the first goes at once, alerts that come
sooner after it wait together in one email sent when the time is up, and a collapse never waits, unless
one was emailed within that time."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.helpers import in_thread, other_connection, wait_until_finished_or_waiting_for_a_lock
from webapp.alerts.models import Notification


@pytest.fixture
def window(settings):
    settings.ALERT_GROUP_SECONDS = 300
    settings.ALERT_COOLDOWN_SECONDS = 3600
    return timedelta(seconds=300)


def warning(alert_event, run, rule, step):
    return alert_event(level="warning", rule=rule, step=step, run=run, message=f"{rule} fired: details")


def test_the_first_email_goes_at_once_the_next_waits_for_the_window(alert_event, window):
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    sent = Notification.create_for([first])
    assert sent.next_try_at is None and not sent.is_gathering

    later = Notification.create_for([warning(alert_event, first.run, "zero_std_groups", 21)])
    assert later.next_try_at == sent.created_at + window
    assert later.is_gathering and not later.claim()  # not before its time
    assert later.delivery_state().startswith("waiting until ")


def test_alerts_within_the_window_join_the_waiting_email(alert_event, window):
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    Notification.create_for([first])
    run = first.run
    waiting = Notification.create_for([warning(alert_event, run, "zero_std_groups", 21)])
    entropy = warning(alert_event, run, "entropy_rise", 23)
    assert Notification.create_for([entropy]) is None  # on its way already: nothing more to send
    waiting.refresh_from_db()
    assert [event.rule for event in waiting.events] == ["zero_std_groups", "entropy_rise"]
    assert Notification.objects.count() == 2


def test_a_collapse_never_waits_and_takes_the_waiting_alerts_with_it(alert_event, window):
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    Notification.create_for([first])
    run = first.run
    waiting = Notification.create_for([warning(alert_event, run, "zero_std_groups", 21)])
    collapse = alert_event(step=30, run=run)
    sent = Notification.create_for([collapse])
    assert sent == waiting and sent.next_try_at is None
    assert [event.rule for event in sent.events] == ["collapse", "zero_std_groups"]  # the collapse leads
    assert sent.claim()


def test_a_collapse_with_nothing_waiting_goes_at_once(alert_event, window):
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    Notification.create_for([first])
    collapse = Notification.create_for([alert_event(step=30, run=first.run)])
    assert collapse.next_try_at is None and Notification.objects.count() == 2


def test_relapses_within_the_window_of_a_collapse_email_wait_together(alert_event, window):
    """A backlog of steps judged at once (a script's history streamed in) may collapse, recover and collapse
    again in a second: one email at once, the relapses gathered into the next, not an email each."""
    run = alert_event(step=1, level="info", rule="grad_spike").run

    def collapse_after_recovery(step):
        run.events.create(step=step - 1, level="resolved", rule="collapse", message="Resolved")
        return alert_event(step=step, run=run)

    first = Notification.create_for([alert_event(step=30, run=run)])
    assert first.next_try_at is None
    relapse = Notification.create_for([collapse_after_recovery(60)])
    assert relapse.is_gathering and relapse.next_try_at == first.created_at + window
    assert relapse.delivery_state().endswith(
        "(the run's last collapse was emailed less than 5 minutes before)"
    )
    assert Notification.create_for([collapse_after_recovery(90)]) is None  # joins the waiting one
    relapse.refresh_from_db()
    assert [event.step for event in relapse.events] == [60, 90] and Notification.objects.count() == 2

    # A relapse once the window has passed is news again, and goes at once.
    long_ago = timezone.now() - window - timedelta(seconds=1)
    Notification.objects.update(created_at=long_ago, sent_at=long_ago, next_try_at=None, status="sent")
    assert Notification.create_for([collapse_after_recovery(120)]).next_try_at is None


def test_the_window_runs_from_when_the_last_email_was_sent(alert_event, window):
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    sent = Notification.create_for([first])
    long_ago = timezone.now() - window - timedelta(seconds=60)
    Notification.objects.filter(pk=sent.pk).update(created_at=long_ago, sent_at=long_ago)
    assert (
        Notification.create_for([warning(alert_event, first.run, "zero_std_groups", 40)]).next_try_at is None
    )

    # One created long ago, sent a moment ago (after retries through an outage), starts the next window,
    # though a later-made one went out long ago.
    Notification.objects.filter(pk=sent.pk).update(sent_at=timezone.now())
    Notification.objects.exclude(pk=sent.pk).update(
        created_at=long_ago + timedelta(seconds=1), sent_at=long_ago + timedelta(seconds=1)
    )
    later = Notification.create_for([warning(alert_event, first.run, "entropy_rise", 41)])
    assert later.is_gathering


def test_an_alert_never_joins_an_email_a_sender_has_claimed(transactional_db, alert_event, window):
    """A sender that claims the waiting email as a collapse comes sends it without the collapse: the
    collapse gets an email of its own, not a place in one already sent (found in review)."""
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    Notification.create_for([first])
    waiting = Notification.create_for([warning(alert_event, first.run, "zero_std_groups", 21)])
    collapse = alert_event(step=30, run=first.run)
    told = []
    with other_connection(autocommit=False) as sender, other_connection() as observer:
        sender.execute(
            "UPDATE alerts_notification SET status = 'sending', tries = 1 WHERE id = %s", [waiting.pk]
        )
        detection, errors = in_thread(lambda: told.append(Notification.create_for([collapse])))
        wait_until_finished_or_waiting_for_a_lock(detection, observer)
        sender.commit()  # the claim
    detection.join(20)
    assert errors == [] and told[0] is not None and told[0].pk != waiting.pk
    assert told[0].events == [collapse] and told[0].next_try_at is None
    waiting.refresh_from_db()
    assert [event.rule for event in waiting.events] == ["zero_std_groups"]


def test_runs_have_windows_of_their_own(alert_event, window):
    first = alert_event(level="warning", rule="reward_std_drop", alert_on_warnings=True)
    Notification.create_for([first])
    other_run = alert_event(level="warning", rule="zero_std_groups", label="seed 1", alert_on_warnings=True)
    assert Notification.create_for([other_run]).next_try_at is None


def test_a_window_of_zero_sends_every_alert_at_once(alert_event, settings):
    settings.ALERT_GROUP_SECONDS = 0
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    Notification.create_for([first])
    assert (
        Notification.create_for([warning(alert_event, first.run, "zero_std_groups", 21)]).next_try_at is None
    )


def test_the_run_page_says_an_email_waits_and_names_each_alerts_step(alice_client, alert_event, window):
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    Notification.create_for([first])
    Notification.create_for([warning(alert_event, first.run, "zero_std_groups", 21)])
    Notification.create_for([warning(alert_event, first.run, "entropy_rise", 23)])
    html = alice_client.get(f"/runs/{first.run.pk}/").content.decode()
    assert (
        "waiting until " in html
        and "to gather this run&#x27;s alerts into one email (a collapse sends it at once)" in html
    )
    assert "entropy_rise fired" in html and "at step 23" in html


def test_alerts_during_an_smtp_outage_join_the_email_being_retried(alert_event, window):
    """The mail server down: the run's email waits for its next try, and what comes meanwhile joins it, so
    that the outage ends in one email, not in an email per window sent at once, the oldest last (found live:
    three emails of one run within 5 s when SMTP came back)."""
    first = alert_event(level="warning", rule="reward_std_drop", step=20, alert_on_warnings=True)
    retried = Notification.create_for([first])
    assert retried.claim()
    assert retried.mark_failed("ConnectionRefusedError: [Errno 111] Connection refused") == 60
    run = first.run

    assert Notification.create_for([warning(alert_event, run, "zero_std_groups", 21)]) is None
    retried.refresh_from_db()
    assert [event.rule for event in retried.events] == ["reward_std_drop", "zero_std_groups"]
    assert retried.next_try_at is not None and not retried.claim()  # still at its retry's time

    collapse = alert_event(step=30, run=run)
    sent = Notification.create_for([collapse])
    assert sent == retried and sent.next_try_at is None  # a collapse is tried at once
    assert [event.rule for event in sent.events] == ["collapse", "reward_std_drop", "zero_std_groups"]
    assert Notification.objects.count() == 1 and sent.claim()
