from django.db import models


class WorkerPing(models.Model):
    """A worker answered a ping through the broker: proves web -> broker -> worker -> database."""

    nonce = models.CharField(max_length=64, unique=True)
    hostname = models.CharField(max_length=255)
    queue = models.CharField(max_length=32)
    answered_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.hostname} answered {self.nonce}"
