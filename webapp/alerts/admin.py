from django.contrib import admin

from webapp.alerts.models import DetectorEvent, Notification


@admin.register(DetectorEvent)
class DetectorEventAdmin(admin.ModelAdmin):
    list_display = ("run", "step", "level", "rule", "created_at")
    list_filter = ("level", "rule")
    search_fields = ("rule", "message", "run__experiment__name")
    raw_id_fields = ("run",)


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("run", "event", "failure_step", "status", "tries", "created_at", "sent_at")
    list_filter = ("status",)
    raw_id_fields = ("run", "event")
