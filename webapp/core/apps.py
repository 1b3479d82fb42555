from django.apps import AppConfig
from django.db.backends.signals import connection_created


class CoreConfig(AppConfig):
    name = "webapp.core"
    label = "core"

    def ready(self):
        from webapp.core import natural_sort

        connection_created.connect(natural_sort.register, dispatch_uid="natural_sort")
