from django.db import migrations, models

# Each stored bucket's total, from its points (as MetricRollup.refresh sums them); other databases keep
# no rollups.
_FILL_TOTALS = """
UPDATE metrics_metricrollup r SET total = s.total
FROM (SELECT run_id, key, step / 100 AS bucket, sum(LEAST(GREATEST(value, -1e300), 1e300)) AS total
      FROM metrics_metricpoint WHERE value NOT IN ('NaN', 'Infinity', '-Infinity')
      GROUP BY run_id, key, step / 100) s
WHERE r.run_id = s.run_id AND r.key = s.key AND r.bucket = s.bucket
"""


def fill_totals(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_FILL_TOTALS)


class Migration(migrations.Migration):
    dependencies = [
        ("metrics", "0006_metric_points_logged_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="metricrollup",
            name="total",
            field=models.FloatField(
                help_text="sum of its finite values, each within ±1e300; null when the bucket has none",
                null=True,
            ),
        ),
        migrations.RunPython(fill_totals, migrations.RunPython.noop),
    ]
