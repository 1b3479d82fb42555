from django.db import migrations, models
from django.db.models import Value
from django.db.models.functions import Coalesce
from django.utils import timezone


def place_existing_runs(apps, schema_editor):
    """Runs queued before the field keep the order they were shown in: by when their message was sent, a
    run never sent last (the other runs' places do not matter: one resumed gets a new one)."""
    Run = apps.get_model("experiments", "Run")
    Run.objects.filter(status="queued").update(queued_at=Coalesce("enqueued_at", Value(timezone.now())))


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0009_run_resumed_at_attempt"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="queued_at",
            field=models.DateTimeField(
                default=timezone.now,
                help_text="Its place in the queue: when it was created or resumed. A run requeued because its "
                "worker went keeps it, and so does one whose message is sent again.",
            ),
        ),
        migrations.RunPython(place_existing_runs, migrations.RunPython.noop),
    ]
