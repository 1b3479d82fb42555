"""Metric series, sample trajectories. Sized for runs of 100k steps x 50 keys: one narrow row per
point, written in bulk and upserted on (run, key, step) so a retried or recomputed step overwrites."""

from django.db import models


class MetricPoint(models.Model):
    run = models.ForeignKey("experiments.Run", on_delete=models.CASCADE, related_name="metric_points")
    key = models.CharField(max_length=100)
    step = models.IntegerField()
    # NaN and +-inf are kept (Postgres floats hold them); charts draw them as gaps.
    value = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key", "step"], name="metric_point_unique")]

    def __str__(self):
        return f"{self.key}@{self.step}={self.value}"

    @classmethod
    def upsert(cls, run_id: int, points: list[tuple[int, str, float]]) -> int:
        """Write (step, key, value) points; an existing (run, key, step) is overwritten."""
        rows = [cls(run_id=run_id, step=step, key=key, value=None if value is None else float(value)) for step, key, value in points]
        cls.objects.bulk_create(
            rows, batch_size=2000, update_conflicts=True,
            unique_fields=["run", "key", "step"], update_fields=["value"],
        )
        return len(rows)


class Sample(models.Model):
    """One sampled trajectory at a step, as the trainer reports it (turns, think, answer, rewards)."""

    run = models.ForeignKey("experiments.Run", on_delete=models.CASCADE, related_name="samples")
    step = models.IntegerField()
    index = models.IntegerField()
    data = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "step", "index"], name="sample_unique")]
        ordering = ["step", "index"]
