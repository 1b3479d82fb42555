"""Notification.create_for: which events email whom, and no flood from one rule on one run."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import make_experiment, make_run, make_user
from webapp.alerts.models import Notification
from webapp.experiments.models import Experiment


@pytest.fixture(autouse=True)
def every_email_at_once(settings):
    """Which events are told, not when: no run's alerts wait to be gathered (test_alert_grouping)."""
    settings.ALERT_GROUP_SECONDS = 0


def age(notification, seconds):
    created_at = timezone.now() - timedelta(seconds=seconds)
    Notification.objects.filter(pk=notification.pk).update(created_at=created_at)


def test_collapse_notifies_the_experiment_recipients(alert_event):
    notification = Notification.create_for([alert_event(alert_recipients="x@example.com ,y@example.com")])
    assert notification.recipients == ["x@example.com", "y@example.com"]
    assert notification.status == "pending"


def test_alert_settings_changed_while_a_run_trains_apply_to_its_next_event(alert_event):
    first = alert_event(level="warning", alert_recipients="first@example.com")
    assert Notification.create_for([first]) is None  # warnings are not emailed yet
    run = first.run  # as a worker holds it: loaded, with its experiment, when training started
    Experiment.objects.get(pk=run.experiment_id).set_alerts(["changed@example.com"], on_warnings=True)
    warning = Notification.create_for([alert_event(level="warning", rule="entropy_rise", run=run)])
    assert warning is not None and warning.recipients == ["changed@example.com"]


def test_owner_is_the_default_recipient(alert_event):
    assert Notification.create_for([alert_event()]).recipients == ["alice@example.com"]


def test_the_same_warning_on_the_same_run_is_cooled_down(alert_event, settings):
    settings.ALERT_COOLDOWN_SECONDS = 600
    first = alert_event(level="warning", rule="reward_std_drop", step=60, alert_on_warnings=True)
    sent = Notification.create_for([first])

    def again(step):
        return Notification.create_for(
            [alert_event(level="warning", rule="reward_std_drop", step=step, run=first.run)]
        )

    assert again(90) is None
    age(sent, 590)
    assert again(91) is None
    age(sent, 601)
    assert again(92) is not None
    assert Notification.objects.count() == 2


def test_a_relapse_is_told_however_soon_and_leads_its_email(alert_event, settings):
    settings.ALERT_COOLDOWN_SECONDS = 3600
    first = alert_event(step=58, alert_on_warnings=True)
    assert Notification.create_for([first]) is not None
    zero = alert_event(level="warning", rule="zero_std_groups", step=125, run=first.run)
    relapse = alert_event(step=125, run=first.run)
    assert Notification.create_for([relapse]) is None  # the first has not resolved: a recomputed step
    relapse.delete()
    first.run.events.create(
        step=100, level="resolved", rule="collapse", message="Resolved: success collapsed"
    )
    relapse = alert_event(step=125, run=first.run)
    notification = Notification.create_for([zero, relapse])
    assert notification is not None and notification.events == [relapse, zero]


def test_cooldown_is_per_run_and_per_rule(alert_event):
    first = alert_event(alert_on_warnings=True)
    assert Notification.create_for([first]) is not None
    other_rule = alert_event(level="warning", rule="grad_spike", run=first.run)
    assert Notification.create_for([other_rule]) is not None
    other_run = alert_event(label="seed 1", run=None)
    assert Notification.create_for([other_run]) is not None
    assert Notification.objects.count() == 3


def test_warnings_only_when_the_experiment_asks_and_never_resolved(alert_event):
    quiet = alert_event(level="warning", rule="reward_std_drop")
    assert Notification.create_for([quiet]) is None
    loud = alert_event(level="warning", rule="reward_std_drop", alert_on_warnings=True)
    assert Notification.create_for([loud]) is not None
    resolved = alert_event(level="resolved", rule="collapse", alert_on_warnings=True)
    assert Notification.create_for([resolved]) is None


def test_info_events_are_never_emailed(alert_event):
    spike = alert_event(level="info", rule="grad_spike", alert_on_warnings=True)
    assert Notification.create_for([spike]) is None
    assert spike.get_level_display() == "Info"


def test_nobody_to_tell_means_no_notification(db):
    owner = make_user("noemail", "pw-noemail-123", email="")
    run = make_run(owner, experiment=make_experiment(owner, "quiet"), label="seed 0", config={})
    event = run.events.create(step=5, level="collapse", rule="collapse", message="m")
    assert Notification.create_for([event]) is None


def test_one_step_is_one_notification_without_the_rules_cooling_down(alert_event, settings):
    settings.ALERT_COOLDOWN_SECONDS = 600
    first = alert_event(level="warning", rule="zero_std_groups", step=50, alert_on_warnings=True)
    assert Notification.create_for([first]) is not None
    run = first.run
    rules = ("entropy_rise", "reward_std_drop", "zero_std_groups")
    step = [alert_event(level="warning", rule=rule, step=61, run=run) for rule in rules]
    step.append(alert_event(level="info", rule="grad_spike", step=61, run=run))
    notification = Notification.create_for(step)
    assert notification.events == step[:2]  # zero_std_groups cooling down, info never told

    # a rule told as one of a step's others cools down too
    again = alert_event(level="warning", rule="reward_std_drop", step=70, run=run)
    assert Notification.create_for([again]) is None
    assert Notification.objects.count() == 2
