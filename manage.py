#!/usr/bin/env python
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    from webapp.environment import EnvironmentConfigError

    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(sys.argv)
    except EnvironmentConfigError as error:
        sys.exit(f"echolab: configuration error: {error}")


if __name__ == "__main__":
    main()
