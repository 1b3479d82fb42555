from django.contrib import admin

from webapp.experiments.models import Experiment, Run


class RunInline(admin.TabularInline):
    model = Run
    fields = ("label", "status", "step", "total_steps", "attempt", "host")
    readonly_fields = fields
    extra = 0
    show_change_link = True


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "preset", "created_at")
    list_filter = ("preset", "imported")
    search_fields = ("name", "owner__username")
    inlines = [RunInline]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "experiment", "label", "status", "step", "total_steps", "host", "heartbeat_at")
    list_filter = ("status",)
    search_fields = ("label", "experiment__name", "host")
    list_select_related = ("experiment",)
