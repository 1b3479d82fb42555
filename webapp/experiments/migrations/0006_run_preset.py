from django.db import migrations, models


def fill_presets(apps, schema_editor):
    """A run's preset: a grid over `preset` names it in the run's label, else the experiment's."""
    Run = apps.get_model("experiments", "Run")
    for run in Run.objects.select_related("experiment").iterator():
        preset = run.experiment.preset
        for token in run.label.split():
            name, _, value = token.partition("=")
            if name == "preset":
                preset = value
        if preset:
            Run.objects.filter(pk=run.pk).update(preset=preset)


class Migration(migrations.Migration):
    dependencies = [("experiments", "0005_experiment_import_sha256")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="preset",
            field=models.CharField(blank=True, max_length=40),
        ),
        migrations.RunPython(fill_presets, migrations.RunPython.noop),
    ]
