from django.apps import AppConfig


class MetricsConfig(AppConfig):
    name = "webapp.metrics"
    label = "metrics"
