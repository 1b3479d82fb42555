"""What the Echo Trap detector found on a run, and who was told. Like healthchecks.io's flips and
notifications: events are rows, each notification is claimed atomically by its sender and keeps its
outcome (sent, or the error)."""

from datetime import timedelta

from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Max, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from webapp.core.jsonsafe import jsonb_safe
from webapp.core.templatetags.echolab import spoken_seconds

# How far the clocks of the machines sharing the database may disagree about when a retry is due.
RETRY_CLOCK_SLACK = timedelta(seconds=10)


class DetectorEvent(models.Model):
    class Level(models.TextChoices):
        INFO = "info"  # a marker on the chart (an isolated gradient spike), never emailed
        WARNING = "warning"
        COLLAPSE = "collapse"
        RESOLVED = "resolved"

    run = models.ForeignKey("experiments.Run", on_delete=models.CASCADE, related_name="events")
    step = models.IntegerField()
    level = models.CharField(max_length=16, choices=Level.choices)
    rule = models.CharField(max_length=64)
    message = models.TextField()
    signals = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["step", "id"]
        # A recomputed step (after a resume) re-detects the same event: keep one.
        constraints = [models.UniqueConstraint(fields=["run", "step", "rule", "level"], name="event_unique")]

    def __str__(self):
        return f"{self.level} {self.rule} at step {self.step}"

    @property
    def headline(self) -> str:
        """What happened, in words ("Success collapsed"): a message is "<headline>: <details>" (a resolved
        event's headline is "Resolved"; those are never emailed)."""
        headline, colon, _ = self.message.partition(": ")
        return headline if colon else self.rule

    @classmethod
    def record(cls, run, found: dict) -> tuple["DetectorEvent", bool]:
        """Store an event as diagnostics.Detector reports it ({step, level, rule, message, signals}), once:
        the same (run, step, rule, level) again (a replayed or recomputed step) returns the stored row and
        False. The one way events are written, with record_all: live training, MLflow-logged runs and imports."""
        return cls.objects.get_or_create(
            run=run,
            step=found["step"],
            rule=found["rule"],
            level=found["level"],
            defaults={"message": found["message"], "signals": jsonb_safe(found.get("signals", {}))},
        )

    @classmethod
    def record_all(cls, run, found: list[dict]) -> None:
        """Store every event of a replay at once (an imported run's), as record() stores each: one row per
        (run, step, rule, level), the first kept. One INSERT: record() per event (a savepoint and up to four
        queries each) took 16 s of a 27 s import whose file made 2,396 events."""
        cls.objects.bulk_create(
            [
                cls(
                    run=run,
                    step=event["step"],
                    rule=event["rule"],
                    level=event["level"],
                    message=event["message"],
                    signals=jsonb_safe(event.get("signals", {})),
                )
                for event in found
            ],
            batch_size=1000,
            ignore_conflicts=True,
        )


class Notification(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"

    # One email for the alerted events of a step of a run, and of the steps after it within
    # ALERT_GROUP_SECONDS: `event` is what it leads with (a collapse before warnings), `also` the others.
    # Or, without events, the email that says the run failed (`failure`, at `failure_step`).
    run = models.ForeignKey("experiments.Run", on_delete=models.CASCADE, related_name="notifications")
    event = models.ForeignKey(
        DetectorEvent, on_delete=models.CASCADE, related_name="notifications", null=True, blank=True
    )
    failure = models.TextField(blank=True, help_text="Why the run failed, as its error said then.")
    failure_step = models.IntegerField(null=True, blank=True, help_text="The run's step when it failed.")
    also = models.ManyToManyField(DetectorEvent, related_name="grouped_notifications", blank=True)
    recipients = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    tries = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    delivered_via = models.CharField(
        max_length=300, blank=True, help_text="Where the sender handed it (emails.destination()), once sent."
    )
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="When the current sender claimed it.")
    next_try_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Not sent before: a failed send's next try, or when a gathering email's wait ends.",
    )

    class Meta:
        indexes = [models.Index(fields=["status", "next_try_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(event__isnull=False) | Q(failure_step__isnull=False), name="notification_tells"
            )
        ]

    @staticmethod
    def retry_delays() -> list[int]:
        """Seconds to wait after each failed try: NOTIFY_RETRY_FIRST, doubling up to NOTIFY_RETRY_MAX_DELAY,
        for as many tries as fit in NOTIFY_RETRY_FOR (an SMTP outage of hours is waited out)."""
        delays, delay, total = [], settings.NOTIFY_RETRY_FIRST, 0
        while total + delay <= settings.NOTIFY_RETRY_FOR:
            delays.append(delay)
            total += delay
            delay = min(delay * 2, settings.NOTIFY_RETRY_MAX_DELAY)
        return delays

    @property
    def message_id(self) -> str:
        """The same on every try, so that a duplicate (a sender killed after SMTP accepted the mail) is
        recognisable as one by mail clients and by people."""
        from urllib.parse import urlsplit

        return f"<echolab-notification-{self.pk}@{urlsplit(settings.SITE_URL).hostname or 'localhost'}>"

    @staticmethod
    def alerted_levels(experiment) -> set[str]:
        """The event levels an experiment's alert emails tell: collapses, and warnings when asked for."""
        alerted = {DetectorEvent.Level.COLLAPSE}
        if experiment.alert_on_warnings:
            alerted.add(DetectorEvent.Level.WARNING)
        return alerted

    @classmethod
    def alerted_nobody(cls, run) -> bool:
        """The run has events its experiment alerts on, and nobody to email them to (an account without an
        email and no recipients named): the run page says so, where it would list the emails."""
        experiment = run.experiment
        return (
            not experiment.from_file
            and not experiment.recipients()
            and run.events.filter(level__in=cls.alerted_levels(experiment)).exists()
        )

    @classmethod
    def create_for(cls, events: list[DetectorEvent]) -> "Notification | None":
        """The notification the events of one step of a run deserve (a new one, or the run's waiting one
        they join), or None. An event is told when
        the experiment is alerted on its level (info and resolved never; warnings only with
        alert_on_warnings) and, for a warning, its rule was not notified on this run within
        ALERT_COOLDOWN_SECONDS (a flapping rule must not flood). A collapse is told however soon after the
        last unless that one has not resolved since (success back for `recovery` evaluations): a relapse is
        the news the product exists for, a step recomputed after a resume is not. Nobody to tell, nothing
        sent. The email leads with the most severe event (a collapse, then the warnings in the detector's
        order) and tells the others with it: the three warnings that often fire on one step are one email,
        and so are a run's alerts within ALERT_GROUP_SECONDS (_send_or_gather; None when they joined an
        email already on its way)."""
        if not events:
            return None
        run = events[0].run
        experiment = run.experiment
        # The settings as they are now: a worker's run (and its experiment) was loaded when training
        # started, and the alert settings may have changed since.
        experiment.refresh_from_db(fields=["alert_recipients", "alert_on_warnings"])
        alerted = cls.alerted_levels(experiment)
        recipients = experiment.recipients()
        told = [event for event in events if event.level in alerted]
        if not told or not recipients:
            return None
        with transaction.atomic():
            # The run's row lock serialises two senders checking the same run's cooldown at once.
            type(run).objects.select_for_update(no_key=True).filter(pk=run.pk).first()
            since = timezone.now() - timedelta(seconds=settings.ALERT_COOLDOWN_SECONDS)
            recent = cls.objects.filter(run_id=run.pk, event__isnull=False, created_at__gte=since)
            cooling = {
                rule for rules in recent.values_list("event__rule", "also__rule") for rule in rules if rule
            }
            told = [
                event
                for event in told
                if (
                    not cls._told_since_resolved(event)
                    if event.level == DetectorEvent.Level.COLLAPSE
                    else event.rule not in cooling
                )
            ]
            if not told:
                return None
            return cls._send_or_gather(run, told, recipients)

    @classmethod
    def _send_or_gather(cls, run, told: list[DetectorEvent], recipients: list[str]) -> "Notification | None":
        """At most one email per run within ALERT_GROUP_SECONDS (Alertmanager's group_interval): an event
        that comes sooner after the run's last email joins the email that waits for that time to pass (a
        new one, due then, if none waits). A collapse does not wait: it leads the waiting email, which is
        sent now; unless the run had a collapse emailed within that time, so that a run flapping between
        collapse and recovery (a backlog of steps judged at once, as when a script's history is streamed
        in) is one email per window, not one per relapse. Returns the notification to send (at its
        next_try_at when set), or None when the events joined one already on its way."""
        now = timezone.now()
        window = timedelta(seconds=settings.ALERT_GROUP_SECONDS)
        collapse = any(event.level == DetectorEvent.Level.COLLAPSE for event in told)
        urgent = collapse and not cls._collapse_emailed_since(run, now - window)
        # Its row locked (claim() updates it): a sender that claims it first has it sent without these
        # events, and the query, checked again once the lock is free, then finds no email waiting.
        # An email being retried (the mail server down) waits too: what comes meanwhile joins it, so that
        # an outage ends in one email per run, not in one per window of it sent at once, out of order.
        waiting = (
            cls.objects.select_for_update(of=("self",))
            .filter(run_id=run.pk, event__isnull=False, status=cls.Status.PENDING)
            .filter(Q(tries=0, next_try_at__gt=now) | Q(tries__gt=0, next_try_at__isnull=False))
            .order_by("pk")
            .first()
        )
        if waiting is not None:
            events = [*waiting.events, *told]
            waiting.event = cls._lead(events)
            waiting.recipients = recipients  # the settings as they are now, as for a new one
            # a collapse is tried at once, a retried email too (its next try then follows that one's failure)
            waiting.next_try_at = None if urgent else waiting.next_try_at
            waiting.save(update_fields=["event", "recipients", "next_try_at"])
            waiting.also.set([event for event in events if event != waiting.event])
            return waiting if urgent else None
        # The last email: the latest sent, or made (one still on its way), of the run's.
        last = cls.objects.filter(run_id=run.pk, event__isnull=False).aggregate(
            at=Max(Coalesce("sent_at", "created_at"))
        )["at"]
        wait_until = None if last is None or urgent else last + window
        lead = cls._lead(told)
        notification = cls.objects.create(
            run=run,
            event=lead,
            recipients=recipients,
            next_try_at=wait_until if wait_until and wait_until > now else None,
        )
        notification.also.set([event for event in told if event != lead])
        return notification

    @classmethod
    def _collapse_emailed_since(cls, run, since) -> bool:
        """Whether an email of the run's made or sent since then tells a collapse (leading it, or among its
        others)."""
        collapse = DetectorEvent.Level.COLLAPSE
        return (
            cls.objects.filter(run_id=run.pk)
            .filter(Q(created_at__gte=since) | Q(sent_at__gte=since))
            .filter(Q(event__level=collapse) | Q(also__level=collapse))
            .exists()
        )

    @staticmethod
    def _lead(events: list[DetectorEvent]) -> DetectorEvent:
        """What an email leads with: the first collapse, else the first event."""
        return next((event for event in events if event.level == DetectorEvent.Level.COLLAPSE), events[0])

    @classmethod
    def _told_since_resolved(cls, collapse: DetectorEvent) -> bool:
        """Whether an earlier collapse of the same rule, after its last resolve, was emailed already: a run
        that recomputes steps past its last checkpoint (a resume) may call the same collapse again at
        another step, and that is no relapse."""
        resolved = DetectorEvent.objects.filter(
            run_id=collapse.run_id,
            rule=collapse.rule,
            level=DetectorEvent.Level.RESOLVED,
            step__lt=collapse.step,
        ).aggregate(step=Max("step"))["step"]
        earlier = DetectorEvent.objects.filter(
            run_id=collapse.run_id,
            rule=collapse.rule,
            level=DetectorEvent.Level.COLLAPSE,
            step__gt=-1 if resolved is None else resolved,
        ).exclude(pk=collapse.pk)
        return cls.objects.filter(Q(event__in=earlier) | Q(also__in=earlier)).exists()

    @classmethod
    def tell_failure(cls, run) -> "Notification | None":
        """When a run has just become failed (its trainer raised, its worker was lost once too often, its
        MLflow client went quiet or said so): an email to the experiment's recipients, sent by a worker
        once the transaction commits. Not gathered with the detector's alerts nor held back by them: a
        failed run is the news at once. Nobody to tell (or an imported run), nothing."""
        experiment = run.experiment
        experiment.refresh_from_db(fields=["alert_recipients"])  # the settings as they are now
        recipients = [] if experiment.from_file else experiment.recipients()
        if not recipients:
            return None
        notification = cls.objects.create(
            run=run, failure=run.error or "failed", failure_step=run.step, recipients=recipients
        )
        transaction.on_commit(lambda: send_later(notification.pk))
        return notification

    @property
    def step(self) -> int:
        """The step the email is about: its lead event's, or where the run failed."""
        return self.event.step if self.event is not None else self.failure_step

    @property
    def events(self) -> list[DetectorEvent]:
        """Every event this email tells, the one it leads with first, then in the order they were found
        ([] for a failure's email)."""
        if self.event is None:
            return []
        return [
            self.event,
            *sorted(self.also.all(), key=lambda event: event.pk),
        ]  # all(): prefetched on pages

    @property
    def is_gathering(self) -> bool:
        """Waiting, unsent and never tried, for its run's ALERT_GROUP_SECONDS to pass."""
        return (
            self.status == self.Status.PENDING
            and self.tries == 0
            and self.next_try_at is not None
            and self.next_try_at > timezone.now()
        )

    def take_current_settings(self) -> bool:
        """The experiment's alert settings as they are when the email goes, not when it was made (it may
        have waited for its run's window, or been retried through an SMTP outage): an address removed from
        the recipients gets none of it, one added does (nobody left to tell, an account without an email
        and no recipients, keeps those it was made for); with warnings no longer asked for, it tells its
        collapses alone, and an email of warnings alone is dropped (deleted: nothing was sent). False when
        dropped."""
        experiment = self.run.experiment
        experiment.refresh_from_db(fields=["alert_recipients", "alert_on_warnings"])
        current = [] if experiment.from_file else experiment.recipients()
        if current and current != self.recipients:
            Notification.objects.filter(pk=self.pk).update(recipients=current)
            self.recipients = current
        if self.event_id is None:  # a failed run's email: always told
            return True
        events = self.events
        told = [event for event in events if event.level in self.alerted_levels(experiment)]
        if len(told) == len(events):
            return True
        if not told:
            self.delete()
            return False
        self.event = self._lead(told)
        Notification.objects.filter(pk=self.pk).update(event=self.event)
        self.also.set([event for event in told if event != self.event])
        return True

    def deliver(self) -> None:
        """Email the event to the recipients now; raises on SMTP errors (the task retries).
        Claiming and recording the outcome are the caller's: see worker.tasks.send_notification."""
        from webapp.alerts import emails

        emails.deliver(self)

    def claim(self) -> bool:
        """pending -> sending for exactly one sender: a task delivered twice sends one email. An email
        gathering its run's alerts is not sent before its time (a message that comes early is sent again
        for then); nor is a retry, give or take RETRY_CLOCK_SLACK (its message is its task's countdown, set
        by another machine's clock: a second message for it, a duplicate delivery, would try it at once and
        start a second chain of retries; the sweeper re-sends a retry whose message was lost)."""
        now = timezone.now()
        early = Q(tries=0, next_try_at__gt=now) | Q(tries__gt=0, next_try_at__gt=now + RETRY_CLOCK_SLACK)
        claimed = (
            Notification.objects.filter(pk=self.pk, status=self.Status.PENDING)
            .exclude(early)
            .update(
                status=self.Status.SENDING,
                tries=F("tries") + 1,
                claimed_at=timezone.now(),
                next_try_at=None,
            )
        )
        self.refresh_from_db()
        return claimed == 1

    def mark_sent(self, via: str):
        via = via[
            : self._meta.get_field("delivered_via").max_length
        ]  # a long EMAIL_FILE_PATH must not fail it
        Notification.objects.filter(pk=self.pk).update(
            status=self.Status.SENT, sent_at=timezone.now(), error="", next_try_at=None, delivered_via=via
        )

    def mark_failed(self, error: str) -> int | None:
        """Record a failed try: back to pending with next_try_at set, and the seconds until then; or, after
        the last of retry_delays(), failed for good (None)."""
        delays = self.retry_delays()
        if self.tries > len(delays):
            Notification.objects.filter(pk=self.pk).update(
                status=self.Status.FAILED, error=error, next_try_at=None
            )
            return None
        delay = delays[self.tries - 1]
        Notification.objects.filter(pk=self.pk).update(
            status=self.Status.PENDING, error=error, next_try_at=timezone.now() + timedelta(seconds=delay)
        )
        return delay

    @classmethod
    def release_stuck(cls) -> list[int]:
        """Notifications whose sender vanished mid-send (SIGKILL, machine lost): `sending` for longer than
        NOTIFY_SENDING_TIMEOUT goes back to pending, to be sent again (at least once; same Message-ID)."""
        stale = timezone.now() - timedelta(seconds=settings.NOTIFY_SENDING_TIMEOUT)
        released, tries = [], 1 + len(cls.retry_delays())
        for notification in cls.objects.filter(status=cls.Status.SENDING, claimed_at__lt=stale):
            since = f"{notification.claimed_at:%Y-%m-%d %H:%M:%S} UTC"
            lost = f"the sender stopped answering after {since} (killed?)"
            final = notification.tries >= tries
            if (
                cls.objects.filter(
                    pk=notification.pk, status=cls.Status.SENDING, claimed_at=notification.claimed_at
                ).update(
                    status=cls.Status.FAILED if final else cls.Status.PENDING,
                    next_try_at=None if final else timezone.now(),
                    error=lost if final else f"{lost}; sending again",
                )
                and not final
            ):
                released.append(notification.pk)
        return released

    @classmethod
    def due(cls, lost_after: int):
        """Pending notifications whose message may be lost: never retried and older than `lost_after`
        seconds, or past their next_try_at by that much (a retry's message sits in its worker until then)."""
        since = timezone.now() - timedelta(seconds=lost_after)
        return cls.objects.filter(status=cls.Status.PENDING).filter(
            models.Q(next_try_at__isnull=True, created_at__lt=since) | models.Q(next_try_at__lt=since)
        )

    def delivery_state(self) -> str:
        """What the run page says about this email."""
        if self.status == self.Status.SENT:
            return f"sent {self.sent_at:%Y-%m-%d %H:%M} UTC" + (
                f" {self.delivered_via}" if self.delivered_via else ""
            )
        if self.status == self.Status.FAILED:
            return f"failed after {self.tries} tries: {self.error}"
        if self.status == self.Status.SENDING:
            return "sending"
        if self.is_gathering:
            until = f"waiting until {self.next_try_at:%Y-%m-%d %H:%M:%S} UTC to gather this run's alerts into one email"
            if any(event.level == DetectorEvent.Level.COLLAPSE for event in self.events):
                window = spoken_seconds(settings.ALERT_GROUP_SECONDS)
                return f"{until} (the run's last collapse was emailed less than {window} before)"
            return f"{until} (a collapse sends it at once)"
        if self.next_try_at:
            return f"retrying until it is sent; next try {self.next_try_at:%Y-%m-%d %H:%M} UTC ({self.error})"
        return "queued"


def send_later(notification_id: int, at=None) -> bool:
    """Queue the email, to be sent at `at` (a datetime; None: now); with the broker down it stays pending
    and the sweeper sends it later."""
    from worker import queues

    return queues.send(queues.SEND_NOTIFICATION, [notification_id], queues.DEFAULT, eta=at)
