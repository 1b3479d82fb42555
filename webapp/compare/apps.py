from django.apps import AppConfig


class CompareConfig(AppConfig):
    name = "webapp.compare"
    label = "compare"
