from pathlib import Path

from django.apps import AppConfig
from django.conf import settings


class ExperimentsConfig(AppConfig):
    name = "webapp.experiments"
    label = "experiments"

    def ready(self):
        from envs.sokoban.env import LevelFiles

        # A form or API call names a Sokoban level set: only a file in LEVELS_ROOT is read.
        LevelFiles.root = Path(settings.LEVELS_ROOT).resolve()
