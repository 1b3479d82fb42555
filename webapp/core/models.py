import socket

from django.db import models
from django.utils import timezone

from worker import queues


class WorkerPing(models.Model):
    """A worker answered a ping through the broker: proves web -> broker -> worker -> database."""

    nonce = models.CharField(max_length=64, unique=True)
    hostname = models.CharField(max_length=255)
    queue = models.CharField(max_length=32)
    answered_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.hostname} answered {self.nonce}"

    # The row the sweeper keeps fresh each time it runs: beat -> broker -> a default worker -> database.
    SWEEPER = "sweeper"

    @classmethod
    def sweeper_ran(cls) -> None:
        fresh = {"answered_at": timezone.now(), "hostname": socket.gethostname(), "queue": queues.DEFAULT}
        if not cls.objects.filter(nonce=cls.SWEEPER).update(**fresh):
            cls.objects.get_or_create(nonce=cls.SWEEPER, defaults=fresh)
