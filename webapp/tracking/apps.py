from django.apps import AppConfig


class TrackingConfig(AppConfig):
    name = "webapp.tracking"
    label = "tracking"
