"""Alert emails: one per notification (the alerted events of a run's step, with those gathered after it within
ALERT_GROUP_SECONDS, or the run's failure), from the subject/text/html templates in
templates/emails/; an event's email has a small chart of the signals around the event as an inline PNG.

`deliver(notification)` sends and raises on SMTP errors; claiming the notification, retrying and
recording the outcome belong to the Celery task (worker.tasks.send_notification). `send_test` sends the
test email an experiment's page asks for, there and then, so the page can say whether it went.
"""

import io
import math
from email.mime.image import MIMEImage

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string

from diagnostics.aliases import alias_of, renaming
from diagnostics.metrics import OUTCOME_KEYS, TRAIN_REWARD_STD_IN_GROUP
from diagnostics.rules import RULES
from webapp.metrics.models import MetricPoint

CHART_WINDOW = 50  # steps charted either side of the event


def deliver(notification) -> None:
    message = build_message(notification) if notification.event_id else failure_message(notification)
    message.send(fail_silently=False)


def send_test(experiment, sender) -> None:
    """A test email to the experiment's alert recipients, from the subject/text/html templates of
    templates/emails/test_*: is the mail server set up, do the addresses take mail? Raises on SMTP errors."""
    context = {
        "experiment": experiment,
        "recipients": experiment.recipients(),
        "sender": sender.get_username(),
        "experiment_url": f"{settings.SITE_URL}{experiment.get_absolute_url()}",
    }
    message = EmailMultiAlternatives(
        subject=" ".join(render_to_string("emails/test_subject.txt", context).split()),
        body=render_to_string("emails/test_body.txt", context),
        to=context["recipients"],
    )
    message.attach_alternative(render_to_string("emails/test_body.html", context), "text/html")
    message.send(fail_silently=False)


def destination() -> str:
    """Where deliver() hands an email, in words for the run page ("via smtp.example.com:587"), saying so
    when that is not an email at all: the embedded default (no EMAIL_URL) writes files under var/mail."""
    backend = settings.EMAIL_BACKEND.rsplit(".", 2)[-2] if settings.EMAIL_BACKEND.count(".") >= 2 else ""
    if backend == "smtp":
        return f"via {settings.EMAIL_HOST}:{settings.EMAIL_PORT}"
    if backend == "filebased":
        return f"to a file in {settings.EMAIL_FILE_PATH}, not emailed (EMAIL_URL is not an SMTP server)"
    if backend == "console":
        return "to the console of the process that sent it, not emailed (EMAIL_URL is console://)"
    return f"to {settings.EMAIL_BACKEND}, not emailed"


def build_message(notification) -> EmailMultiAlternatives:
    event = notification.event
    run = event.run
    events = notification.events
    chart_id = f"chart-{notification.pk or 0}-{event.pk}@echolab"
    beside = charted_beside_outcome(events)
    context = {
        "event": event,
        "events": [
            (told, signal_rows(told.signals), advice) for told, advice in zip(events, remedies(events, run))
        ],
        "reported": counted(events),
        "others": counted(events[1:], after=event),
        "run": run,
        "experiment": run.experiment,
        "run_url": f"{settings.SITE_URL}{run.get_absolute_url()}?step={event.step}",
        # A false alarm is looked at there before the experiment's settings change (the box opens at it).
        "try_settings_url": f"{settings.SITE_URL}{run.get_absolute_url()}#try-settings",
        # Said as the run stands when the email is written: a collapsed run that trains on wastes its worker.
        "still_training": run.status == run.Status.RUNNING and not run.experiment.imported,
        "chart_cid": chart_id,
        "charted": beside,
        "window": CHART_WINDOW,
        "group_seconds": settings.ALERT_GROUP_SECONDS,
        "logged_as": logged_as(events, run),
    }
    message = _message("event", context, notification)
    # multipart/related around the alternatives: mail clients then show the image inline (cid:)
    # instead of listing it as an attachment.
    message.mixed_subtype = "related"
    others = sorted({told.step for told in events[1:]} - {event.step})  # gathered from later steps
    image = MIMEImage(chart_png(run, event.step, beside, others=others), "png")
    image.add_header("Content-ID", f"<{chart_id}>")
    image.add_header("Content-Disposition", "inline", filename="chart.png")
    message.attach(image)
    return message


def failure_message(notification) -> EmailMultiAlternatives:
    """The email that a run failed: why (its error as it was then), where, and what brings it back."""
    run = notification.run
    external = getattr(run, "mlflow", None)
    context = {
        "run": run,
        "experiment": run.experiment,
        "failure": notification.failure,
        "step": notification.failure_step,
        "run_url": f"{settings.SITE_URL}{run.get_absolute_url()}?step={notification.failure_step}",
        # What brings it back: a run of ours resumes from its checkpoint; one trained elsewhere, from its
        # script (a lost MLflow run resumes when its client logs again).
        "trained_elsewhere": run.experiment.imported,
        "lost": external is not None and notification.failure.startswith(external.LOST),
    }
    return _message("failure", context, notification)


def _message(template: str, context: dict, notification) -> EmailMultiAlternatives:
    """An email from templates/emails/<template>_subject.txt, _body.txt and _body.html."""
    message = EmailMultiAlternatives(
        subject=" ".join(render_to_string(f"emails/{template}_subject.txt", context).split()),
        body=render_to_string(f"emails/{template}_body.txt", context),
        to=notification.recipients,
        headers={"Message-ID": notification.message_id},
    )
    message.attach_alternative(render_to_string(f"emails/{template}_body.html", context), "text/html")
    return message


def logged_as(events: list, run) -> list[tuple[str, str]]:
    """(our key, the name the run logged it under) for each of our keys the events name that a run trained
    elsewhere logged under another trainer's name (a veRL user reads `train/reward_mean` and logged
    `critic/score/mean`); [] for others."""
    external = getattr(run, "mlflow", None)  # the MLflow client's run, whose names it keeps
    names = external.logged_as if external is not None else {}
    said = " ".join(f"{event.message} {event.signals}" for event in events)
    return [(ours, theirs) for ours, theirs in sorted(names.items()) if ours != theirs and ours in said]


def remedies(events: list, run) -> list[str]:
    """What to try against what each event's rule saw (diagnostics.rules.Rule.remedy), each said once in
    an email; "" for a rule this server no longer has (an event recorded by an older version), and for a
    run trained elsewhere, whose trainer has none of the config keys they name."""
    said, out = set(), []
    for event in events:
        rule = RULES.get(event.rule)
        advice = rule.remedy if rule and not run.experiment.imported else ""
        out.append("" if advice in said else advice)
        said.add(advice)
    return out


def counted(events: list, after=None) -> str:
    """The events in words, by level in order: "a collapse and 2 warnings", "3 warnings"; told `after` the
    event an email leads with, those of its level are "more": "one more warning", "2 more warnings"."""
    counts: dict[str, int] = {}
    for event in events:
        counts[event.level] = counts.get(event.level, 0) + 1
    words = []
    for level, n in counts.items():
        more = after is not None and level == after.level
        words.append(
            (f"one more {level}" if more else f"a {level}") if n == 1 else f"{n}{' more' * more} {level}s"
        )
    return " and ".join(words)


def signal_rows(signals: dict) -> list[tuple[str, str]]:
    return [(name, _format(value)) for name, value in (signals or {}).items()]


def _format(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def charted_beside_outcome(events: list) -> str:
    """The metric the email's chart draws beside the outcome: the first one an event judged that is not an
    outcome (the warning's own signal: entropy, format validity, thinking length), else the in-group
    reward std, the paper's earliest sign."""
    judged = (event.signals.get("metric") for event in events if isinstance(event.signals, dict))
    return next(
        (key for key in judged if isinstance(key, str) and key not in OUTCOME_KEYS), TRAIN_REWARD_STD_IN_GROUP
    )


def chart_series(
    run, step: int, beside: str = TRAIN_REWARD_STD_IN_GROUP, window: int = CHART_WINDOW
) -> dict[str, list[tuple[int, float]]]:
    """{key: [(step, value)]} for the outcome key the run logs (the first of OUTCOME_KEYS, as the detector
    picks it) and `beside`, within `window` steps of `step`; NaN, infinities and nulls become NaN, which
    matplotlib draws as a gap. A key the run did not log there is left out. Keys are as stored: EchoLab's
    metrics API keeps other trainers' names (TRL's reward), which the detector reads as ours."""
    near = MetricPoint.objects.filter(run=run, step__range=(step - window, step + window))
    # ours -> as stored, for the keys wanted (the detector's renaming: our own name wins over an alias)
    named = {ours: key for key, ours in renaming(near.values_list("key", flat=True).distinct()).items()}
    stored = {named[key]: key for key in (*OUTCOME_KEYS, beside) if key in named}
    rows = near.filter(key__in=stored).order_by("step").values_list("key", "step", "value")
    found: dict[str, list[tuple[int, float]]] = {}
    for key, at, value in rows:
        finite = value is not None and math.isfinite(value)
        found.setdefault(stored[key], []).append((at, value if finite else math.nan))
    outcome = next((key for key in OUTCOME_KEYS if key in found), None)
    return {named[key]: found[key] for key in (outcome, beside) if key in found}


def chart_png(
    run, step: int, beside: str = TRAIN_REWARD_STD_IN_GROUP, window: int = CHART_WINDOW, others=()
) -> bytes:
    buffer = io.BytesIO()
    chart_figure(run, step, beside, window, others).savefig(buffer, format="png")
    return buffer.getvalue()


def chart_figure(
    run, step: int, beside: str = TRAIN_REWARD_STD_IN_GROUP, window: int = CHART_WINDOW, others=()
):
    """The outcome and `beside` within `window` steps of `step` (a dashed line), and the steps of the
    email's other alerts (`others`, dotted) where they fall in that window."""
    # The object-oriented API with the Agg canvas: no pyplot global state, safe in a worker thread.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    series = chart_series(run, step, beside, window)
    figure = Figure(figsize=(6, 2.4), dpi=100)
    FigureCanvasAgg(figure)
    outcome_axis = figure.add_subplot()
    axes = [outcome_axis]
    lines = []
    for key, values in series.items():
        # the beside metric (under our name or the one the run logged it by) on its own scale, on the
        # right; no empty right axis when it was not logged
        if (alias_of(key) or key) == beside:
            axis, color = outcome_axis.twinx(), "tab:orange"
            axes.append(axis)
        else:
            axis, color = outcome_axis, "tab:blue"
        steps, points = zip(*values)
        lines += axis.plot(steps, points, color=color, linewidth=1.5, label=key)
        axis.set_ylabel(key.split("/")[-1], color=color, fontsize=8)
    outcome_axis.axvline(step, color="tab:red", linestyle="--", linewidth=1)
    for other in others:
        if abs(other - step) <= window:
            outcome_axis.axvline(other, color="tab:red", linestyle=":", linewidth=1)
    # Up to `window` steps either side, but no further than the run has got: an alert usually fires at
    # the newest step, and a short run's few steps would fill a sliver of a 100-step axis.
    left = max(0, step - window)
    right = max([step] + [at for values in series.values() for at, _ in values])
    outcome_axis.set_xlim(left, right + max(1, (right - left) // 20))
    outcome_axis.set_xlabel("step", fontsize=8)
    if lines:
        outcome_axis.legend(lines, [line.get_label() for line in lines], fontsize=7, loc="lower left")
    else:
        outcome_axis.text(
            0.5,
            0.5,
            "no metrics logged near this step",
            ha="center",
            va="center",
            transform=outcome_axis.transAxes,
            fontsize=9,
            color="gray",
        )
    for axis in axes:
        axis.tick_params(labelsize=7)
    figure.tight_layout()
    return figure
