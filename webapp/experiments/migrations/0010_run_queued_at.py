import django.utils.timezone
from django.db import migrations, models
from django.db.models.functions import Coalesce


def place_existing_runs(apps, schema_editor):
    """Runs queued before the field keep the order they were shown in: by when their message was sent."""
    Run = apps.get_model("experiments", "Run")
    Run.objects.update(queued_at=Coalesce("enqueued_at", "created_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0009_run_resumed_at_attempt"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="queued_at",
            field=models.DateTimeField(
                default=django.utils.timezone.now,
                help_text="Its place in the queue: when it was created or resumed. A run requeued because its "
                "worker went keeps it, and so does one whose message is sent again.",
            ),
        ),
        migrations.RunPython(place_existing_runs, migrations.RunPython.noop),
    ]
