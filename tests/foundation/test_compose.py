"""docker-compose.yml cannot be run here (no Docker engine), so its shape is checked instead."""

import shlex

import yaml

from tests.helpers import REPO_ROOT

compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
services = compose["services"]


def command_of(service) -> list[str]:
    """The service's command as words; a `sh -c "..."` as the words of its script."""
    command = services[service]["command"]
    words = shlex.split(command) if isinstance(command, str) else command
    return shlex.split(words[2]) if words[:2] == ["sh", "-c"] else words


def test_services_present():
    assert set(services) >= {"postgres", "redis", "web", "worker-gpu", "worker", "beat"}


def test_app_services_share_database_and_broker():
    for name in ("web", "worker-gpu", "worker", "beat"):
        service = services[name]
        env = service["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"].startswith("redis://redis:6379")
        assert {"postgres", "redis"} <= set(service["depends_on"])


def test_postgres_keeps_its_data_in_a_volume():
    assert any(v.endswith(":/var/lib/postgresql/data") for v in services["postgres"]["volumes"])
    assert "pgdata" in compose["volumes"]


def test_web_migrates_then_runs_gunicorn_with_whitenoise_static():
    command = " ".join(command_of("web"))
    assert (
        command.index("migrate")
        < command.index("collectstatic")
        < command.index("exec gunicorn -c python:webapp.core.gunicorn_conf webapp.wsgi")
    )
    from django.conf import settings

    assert "whitenoise.middleware.WhiteNoiseMiddleware" in settings.MIDDLEWARE


def test_gpu_worker_takes_one_run_at_a_time_on_a_reserved_gpu():
    command = command_of("worker-gpu")
    assert command[command.index("-Q") + 1] == "gpu"
    assert command[command.index("--concurrency") + 1] == "1"
    assert command[command.index("--prefetch-multiplier") + 1] == "1"
    assert "--max-tasks-per-child" in command
    devices = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]


def test_workers_and_beat_wait_for_the_schema_then_celery_takes_the_containers_signals():
    # On an upgrade they started beside the web container's `migrate` and trained against the old schema;
    # `exec` makes celery the process `docker compose stop` signals (it tells a training child).
    for name in ("worker-gpu", "worker", "beat"):
        command = " ".join(command_of(name))
        assert command.startswith("python manage.py wait_for_schema && exec celery -A worker.celery "), name


def test_default_worker_and_beat():
    assert command_of("worker")[command_of("worker").index("-Q") + 1] == "default"
    assert "beat" in command_of("beat")


def test_images_build_from_the_dockerfile():
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert "requirements.txt" in dockerfile
    for name in ("web", "worker-gpu", "worker", "beat"):
        assert services[name]["image"] == "echolab" or "build" in services[name]
