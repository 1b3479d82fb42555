"""The alert email: subject, text and html from the templates, a link to the run at the event's step,
the signals, and the chart as an inline PNG that the html references by Content-ID."""

import email
import email.policy
import io
import math

import pytest
from PIL import Image

from tests.alerts.conftest import EVENT_STEP
from tests.helpers import free_port
from webapp.alerts import emails
from webapp.alerts.models import Notification
from webapp.metrics.models import MetricPoint

SITE = "https://echolab.example.com"


@pytest.fixture(autouse=True)
def site_url(settings):
    settings.SITE_URL = SITE


def parsed(notification):
    raw = emails.build_message(notification).message().as_bytes()
    return email.message_from_bytes(raw, policy=email.policy.default)


def parts(message):
    return {part.get_content_type(): part for part in message.walk() if not part.is_multipart()}


def assert_png(data: bytes, size=(600, 240)):
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG" and image.size == size
    image.verify()


def test_email_names_run_event_signals_and_links_to_the_step(alert_event):
    event = alert_event(alert_recipients="a@example.com, b@example.com")
    notification = Notification.create_for([event])
    message = parsed(notification)
    run = event.run

    assert message["Subject"] == "[EchoLab] Success collapsed on FrozenLake PPO / seed 0"
    assert message["To"] == "a@example.com, b@example.com"
    link = f"{SITE}/runs/{run.pk}/?step={EVENT_STEP}"
    found = parts(message)
    text = found["text/plain"].get_content()
    assert link in text
    assert '"seed 0" of experiment "FrozenLake PPO"' in text
    assert f"collapse at step {EVENT_STEP}:" in text and event.message in text
    assert "  ratio: 0.375\n" in text and "  value: 0.3\n" in text and "  missing: —\n" in text
    # what to do: the rule's remedy, and that the run goes on training unless stopped
    from diagnostics.rules import Collapse

    assert f"What to try: {Collapse.remedy}\n" in text and "the starpo-s preset" in Collapse.remedy
    assert "The run is still training (step 120 of 200); stop it on its page if it cannot recover." in text

    # and where a false alarm is looked at: the run page's box of other detector settings, opened
    try_settings = f"{SITE}/runs/{run.pk}/#try-settings"
    assert "A false alarm? What other detector settings would have reported on this run" in text
    assert try_settings in text

    html = found["text/html"].get_content()
    assert f'href="{link}"' in html and f'href="{try_settings}"' in html
    assert "<strong>What to try:</strong> Training on rarely brings a collapsed run back" in html
    assert "The run is still training (step 120 of 200): stop it" in html
    run.status = run.Status.COMPLETED  # ended by the time the email is written: nothing to stop
    run.save()
    assert "still training" not in parts(parsed(notification))["text/plain"].get_content()
    assert "<td" in html and "since_step" in html and ">56<" in html
    cid = found["image/png"]["Content-ID"].strip("<>")
    assert f'src="cid:{cid}"' in html
    assert_png(found["image/png"].get_content())


def test_an_mlflow_runs_email_says_the_names_it_logged_our_keys_under(alice, settings):
    """A veRL user read "smoothed train/reward_mean 0.28" about a run that logged critic/score/mean."""
    from django.utils import timezone

    from tests.factories import make_event
    from webapp.tracking.models import ExternalExperiment, ExternalRun

    experiment = ExternalExperiment.create(alice, "verl")
    external = ExternalRun.start(experiment, "ppo", {}, "alice", timezone.now())
    external.log([("critic/score/mean", 0.5, 0, None), ("actor/entropy", 1.0, 0, None)], {}, {})
    event = make_event(
        external.run,
        30,
        "collapse",
        "collapse",
        message="smoothed train/reward_mean 0.28 is 31% of its peak 0.9",
    )
    found = parts(parsed(Notification.create_for([event])))
    text = found["text/plain"].get_content()
    assert "The names above are EchoLab's: this run logged train/reward_mean as critic/score/mean.\n" in text
    assert (
        "<code>train/reward_mean</code> as <code>critic/score/mean</code>" in found["text/html"].get_content()
    )


def test_email_is_related_multipart_with_an_inline_image(alert_event):
    message = parsed(Notification.create_for([alert_event()]))
    assert message.get_content_type() == "multipart/related"
    alternative, image = message.get_payload()
    assert alternative.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in alternative.get_payload()] == ["text/plain", "text/html"]
    assert image.get_content_disposition() == "inline"


def test_html_escapes_names_and_the_subject_does_not(alert_event):
    event = alert_event(name="<b>R&D</b> run")
    message = parsed(Notification.create_for([event]))
    assert message["Subject"] == "[EchoLab] Success collapsed on <b>R&D</b> run / seed 0"
    assert "&lt;b&gt;R&amp;D&lt;/b&gt; run" in parts(message)["text/html"].get_content()


def test_a_right_to_left_name_cannot_reorder_the_lines_around_it(alert_event):
    message = parsed(Notification.create_for([alert_event(name="\u202eevil\u202c run")]))
    # each name isolated on its own: the override in the experiment's name cannot flip the "/" and the run
    assert (
        message["Subject"].strip()
        == "[EchoLab] Success collapsed on \u2068\u202eevil\u202c run\u2069 / seed 0"
    )
    text = parts(message)["text/plain"].get_content()
    assert 'on run "seed 0" of experiment "\u2068\u202eevil\u202c run\u2069".' in text
    assert "<bdi>\u202eevil\u202c run</bdi>" in parts(message)["text/html"].get_content()


def test_chart_shows_success_and_std_within_the_window_with_gaps(collapsing_run):
    run = collapsing_run()
    series = emails.chart_series(run, EVENT_STEP)
    assert list(series) == ["train/success", "train/reward_std_in_group"]
    success = dict(series["train/success"])
    window = emails.CHART_WINDOW
    assert (min(success), max(success)) == (EVENT_STEP - window, EVENT_STEP + window)
    assert math.isnan(success[EVENT_STEP + 1])  # NaN at that step: drawn as a gap
    assert success[EVENT_STEP] == 0.8


def test_chart_finds_the_keys_of_a_run_stored_under_another_trainers_names(collapsing_run):
    # EchoLab's metrics API stores keys as sent: a TRL run's mean reward as `reward`, its zero-std groups as
    # frac_reward_zero_std. The detector reads them as ours, and its events name ours; the email's chart
    # looked for our names only and drew "no metrics logged near this step".
    run = collapsing_run()
    MetricPoint.objects.filter(run=run).delete()
    MetricPoint.upsert(run.pk, [(step, "reward", 0.5) for step in range(0, 120, 10)])
    MetricPoint.upsert(run.pk, [(step, "frac_reward_zero_std", 0.9) for step in range(0, 120, 10)])
    series = emails.chart_series(run, EVENT_STEP, "train/frac_zero_std_groups")
    assert list(series) == ["reward", "frac_reward_zero_std"]
    assert dict(series["reward"])[EVENT_STEP - EVENT_STEP % 10] == 0.5
    assert_png(emails.chart_png(run, EVENT_STEP, "train/frac_zero_std_groups"))


def test_chart_falls_back_to_mean_reward_and_draws_an_empty_window(collapsing_run):
    run = collapsing_run()
    MetricPoint.objects.filter(run=run, key="train/success").delete()
    MetricPoint.upsert(run.pk, [(step, "train/reward_mean", 0.5) for step in range(0, 120, 5)])
    assert list(emails.chart_series(run, EVENT_STEP)) == ["train/reward_mean", "train/reward_std_in_group"]
    assert emails.chart_series(run, 5000) == {}
    assert_png(emails.chart_png(run, 5000))


def test_deliver_sends_one_message_through_smtp(alert_event, smtp_server, use_smtp):
    use_smtp(smtp_server.port)
    event = alert_event(alert_recipients="a@example.com, b@example.com")
    Notification.create_for([event]).deliver()
    [envelope] = smtp_server.envelopes
    assert sorted(envelope.rcpt_tos) == ["a@example.com", "b@example.com"]
    [message] = smtp_server.messages
    assert message["Subject"].startswith("[EchoLab] Success collapsed")
    assert_png(parts(message)["image/png"].get_content())


def test_deliver_raises_when_smtp_is_down(alert_event, use_smtp):
    use_smtp(free_port())  # nothing listens there
    notification = Notification.create_for([alert_event()])
    with pytest.raises(OSError):
        notification.deliver()


@pytest.mark.parametrize(
    "logged, step, xlim",
    [
        (range(13), 12, (0, 13)),  # a short run alerted at its newest step: its 13 steps fill the axis
        (range(200), 120, (70, 175)),  # the window either side of the event, then a margin
        (range(100, 131), 130, (80, 132)),  # the newest step of a long run: the window before it
    ],
)
def test_chart_axis_spans_the_steps_logged_near_the_event(collapsing_run, logged, step, xlim):
    run = collapsing_run()
    MetricPoint.objects.filter(run=run).delete()
    MetricPoint.upsert(run.pk, [(at, "train/success", 0.5) for at in logged])
    assert emails.chart_figure(run, step).axes[0].get_xlim() == xlim


STD_DROPPED = "In-group reward std dropped: smoothed train/reward_std_in_group 0.1 is 25% of its peak 0.4"


def test_a_subject_says_what_happened_in_words_and_a_warning_is_marked_so(alert_event):
    warning = alert_event(
        level="warning", rule="reward_std_drop", message=STD_DROPPED, alert_on_warnings=True
    )
    warning = parsed(Notification.create_for([warning]))
    assert warning["Subject"] == "[EchoLab] warning: In-group reward std dropped on FrozenLake PPO / seed 0"


def test_the_events_of_one_step_are_one_email_led_by_the_collapse(alert_event):
    std = alert_event(level="warning", rule="reward_std_drop", message=STD_DROPPED, alert_on_warnings=True)
    zero = alert_event(
        level="warning",
        rule="zero_std_groups",
        message="Zero-std groups rose: 87% of groups have zero reward std",
        run=std.run,
    )
    collapse = alert_event(run=std.run)
    notification = Notification.create_for([std, zero, collapse])
    assert notification.events == [collapse, std, zero]

    message = parsed(notification)
    assert message["Subject"] == "[EchoLab] Success collapsed on FrozenLake PPO / seed 0 (and 2 warnings)"
    text = parts(message)["text/plain"].get_content()
    assert 'reported a collapse and 2 warnings on run "seed 0"' in text
    for event in (collapse, std, zero):
        assert f"{event.rule} at step {EVENT_STEP}:\n{event.message}\n" in text
    assert (
        text.index("collapse at step") < text.index("reward_std_drop at step") < text.index("zero_std_groups")
    )
    html = parts(message)["text/html"].get_content()
    assert html.count("<h2") == 3 and html.count("cid:") == 1


def test_each_remedy_is_said_once_and_none_to_a_run_trained_elsewhere(alert_event):
    first = alert_event(level="warning", rule="entropy_erratic", alert_on_warnings=True)
    second = alert_event(level="warning", rule="entropy_erratic", run=first.run, step=first.step + 1)
    text = parts(parsed(Notification.create_for([first, second])))["text/plain"].get_content()
    assert text.count("What to try: ") == 1 and text.count("entropy_erratic at step") == 2
    elsewhere = alert_event(level="collapse", rule="collapse", imported=True)
    text = parts(parsed(Notification.create_for([elsewhere])))["text/plain"].get_content()
    assert "What to try" not in text  # its trainer has none of the keys a remedy names


def test_warnings_alone_say_how_many_more(alert_event):
    std = alert_event(level="warning", rule="reward_std_drop", message=STD_DROPPED, alert_on_warnings=True)
    zero = alert_event(
        level="warning", rule="zero_std_groups", message="Zero-std groups rose: 90%", run=std.run
    )
    two = parsed(Notification.create_for([std, zero]))
    assert two["Subject"] == (
        "[EchoLab] warning: In-group reward std dropped on FrozenLake PPO / seed 0 (and one more warning)"
    )
    assert "reported 2 warnings on run" in parts(two)["text/plain"].get_content()


def test_the_chart_draws_the_metric_the_alert_judged_and_no_empty_axis(alert_event):
    entropy = alert_event(
        level="warning",
        rule="entropy_rise",
        message="Entropy rose after declining: 1.4",
        alert_on_warnings=True,
    )
    entropy.signals = {"metric": "actor/entropy", "value": 1.4}
    entropy.save()
    run = entropy.run
    MetricPoint.upsert(run.pk, [(step, "actor/entropy", 1.0 + step / 100) for step in range(0, 120, 2)])
    notification = Notification.create_for([entropy])
    assert emails.charted_beside_outcome(notification.events) == "actor/entropy"
    figure = emails.chart_figure(run, EVENT_STEP, "actor/entropy")
    assert [axis.get_ylabel() for axis in figure.axes] == ["success", "entropy"]
    assert "mean reward) and actor/entropy within" in parts(parsed(notification))["text/html"].get_content()

    # The steps of an email's other alerts are marked too, dotted, where they fall in the window.
    marked = emails.chart_figure(run, EVENT_STEP, others=[EVENT_STEP - 30, EVENT_STEP + 500])
    lines = [
        (line.get_xdata()[0], line.get_linestyle())
        for line in marked.axes[0].lines
        if line.get_label().startswith("_")
    ]
    assert lines == [(EVENT_STEP, "--"), (EVENT_STEP - 30, ":")]

    MetricPoint.objects.filter(run=run, key="train/reward_std_in_group").delete()
    alone = emails.chart_figure(run, EVENT_STEP)  # a collapse beside a std the run did not log
    assert [axis.get_ylabel() for axis in alone.axes] == ["success"]
