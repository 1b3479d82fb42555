"""A notification names its run (an email that a run failed has no detector event), and may tell a
failure instead of events."""

import django.db.models.deletion
from django.db import migrations, models


def runs_of_events(apps, schema_editor):
    Notification = apps.get_model("alerts", "Notification")
    DetectorEvent = apps.get_model("alerts", "DetectorEvent")
    Notification.objects.update(
        run_id=models.Subquery(
            DetectorEvent.objects.filter(pk=models.OuterRef("event_id")).values("run_id")[:1]
        )
    )


def failures_dropped(apps, schema_editor):
    apps.get_model("alerts", "Notification").objects.filter(event__isnull=True).delete()


class Migration(migrations.Migration):
    # Rows written and a foreign key altered in one transaction: Postgres refuses ("pending trigger
    # events") going back. Each step commits on its own.
    atomic = False

    dependencies = [
        ("alerts", "0006_notification_delivered_via"),
        ("experiments", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="run",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="notifications",
                to="experiments.run",
            ),
        ),
        migrations.RunPython(runs_of_events, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="notification",
            name="run",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="notifications",
                to="experiments.run",
            ),
        ),
        migrations.AlterField(
            model_name="notification",
            name="event",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="notifications",
                to="alerts.detectorevent",
            ),
        ),
        # Back: the emails of failures go first (an event is required again).
        migrations.RunPython(migrations.RunPython.noop, failures_dropped),
        migrations.AddField(
            model_name="notification",
            name="failure",
            field=models.TextField(blank=True, help_text="Why the run failed, as its error said then."),
        ),
        migrations.AddField(
            model_name="notification",
            name="failure_step",
            field=models.IntegerField(blank=True, help_text="The run's step when it failed.", null=True),
        ),
        migrations.AddConstraint(
            model_name="notification",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("event__isnull", False), ("failure_step__isnull", False), _connector="OR"
                ),
                name="notification_tells",
            ),
        ),
    ]
