from django.contrib import admin

from webapp.metrics.models import MetricPoint, Sample


@admin.register(MetricPoint)
class MetricPointAdmin(admin.ModelAdmin):
    list_display = ["run", "key", "step", "value"]
    list_filter = ["key"]
    search_fields = ["key"]
    raw_id_fields = ["run"]
    # Millions of rows: counting them for the paginator would take longer than the page.
    show_full_result_count = False


@admin.register(Sample)
class SampleAdmin(admin.ModelAdmin):
    list_display = ["run", "step", "index"]
    raw_id_fields = ["run"]
    show_full_result_count = False
