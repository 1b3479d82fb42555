"""What the Echo Trap detector found on a run, and who was told. Like healthchecks.io's flips and
notifications: events are rows, each notification is claimed atomically by its sender and keeps its
outcome (sent, or the error)."""

from django.db import models
from django.db.models import F
from django.utils import timezone


class DetectorEvent(models.Model):
    class Level(models.TextChoices):
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
