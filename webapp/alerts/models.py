"""What the Echo Trap detector found on a run, and who was told. Like healthchecks.io's flips and
notifications: events are rows, each notification is claimed atomically by its sender and keeps its
outcome (sent, or the error)."""

from datetime import timedelta

from django.conf import settings
from django.db import models, transaction
from django.db.models import F
from django.utils import timezone


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


class Notification(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"

    event = models.ForeignKey(DetectorEvent, on_delete=models.CASCADE, related_name="notifications")
    recipients = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    tries = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    @classmethod
    def create_for_event(cls, event: DetectorEvent) -> "Notification | None":
        """The notification a new event deserves, or None: a level the experiment is not alerted on
        (info and resolved never; warnings only with alert_on_warnings), nobody to tell, or the same rule
        already notified on this run within ALERT_COOLDOWN_SECONDS (a flapping rule must not flood)."""
        experiment = event.run.experiment
        alerted = {DetectorEvent.Level.COLLAPSE}
        if experiment.alert_on_warnings:
            alerted.add(DetectorEvent.Level.WARNING)
        recipients = experiment.recipients()
        if event.level not in alerted or not recipients:
            return None
        with transaction.atomic():
            # The run's row lock serialises two senders checking the same run's cooldown at once.
            type(event.run).objects.select_for_update().filter(pk=event.run_id).first()
            since = timezone.now() - timedelta(seconds=settings.ALERT_COOLDOWN_SECONDS)
            recent = cls.objects.filter(event__run_id=event.run_id, event__rule=event.rule, created_at__gte=since)
            if recent.exists():
                return None
            return cls.objects.create(event=event, recipients=recipients)

    def deliver(self) -> None:
        """Email the event to the recipients now; raises on SMTP errors (the task retries).
        Claiming and recording the outcome are the caller's: see worker.tasks.send_notification."""
        from webapp.alerts import emails

        emails.deliver(self)

    def claim(self) -> bool:
        """pending -> sending for exactly one sender: a task delivered twice sends one email."""
        claimed = Notification.objects.filter(pk=self.pk, status=self.Status.PENDING).update(
            status=self.Status.SENDING, tries=F("tries") + 1
        )
        self.refresh_from_db()
        return claimed == 1

    def mark_sent(self):
        Notification.objects.filter(pk=self.pk).update(status=self.Status.SENT, sent_at=timezone.now(), error="")

    def mark_failed(self, error: str, final: bool):
        """Record the error; a non-final failure goes back to pending for the next retry."""
        status = self.Status.FAILED if final else self.Status.PENDING
        Notification.objects.filter(pk=self.pk).update(status=status, error=error)
