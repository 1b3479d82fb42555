"""Settings come from the environment; a malformed value stops start-up with one line naming it."""

import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT


def manage(*args, **env):
    base = {"PATH": "/usr/bin:/bin", "ECHOLAB_VAR": env.pop("var"), "HOME": "/tmp"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "variable, value, expected",
    [
        ("DATABASE_URL", "postgres//nohost", "DATABASE_URL: expected a URL"),
        ("DATABASE_URL", "mysql://u@h/db", "DATABASE_URL: unsupported scheme 'mysql'"),
        ("DATABASE_URL", "postgres://u@localhost:99999/db", "DATABASE_URL: the port"),
        ("DATABASE_URL", "postgres://u@localhost:5432/", "DATABASE_URL: no database name"),
        ("CELERY_BROKER_URL", "redis:/localhost", "CELERY_BROKER_URL: expected a URL"),
        (
            "CELERY_BROKER_URL",
            "redis://localhost:6379/abc",
            "CELERY_BROKER_URL: redis database must be a number",
        ),
        ("EMAIL_URL", "smtp://", "EMAIL_URL: no host"),
        ("EMAIL_URL", "pigeon://coop", "EMAIL_URL: unsupported scheme 'pigeon'"),
        ("DEBUG", "maybe", "DEBUG: expected true/false"),
        # read by the workers' training children: a worker took runs and lost each one
        ("ECHOLAB_THREADS", "four", "ECHOLAB_THREADS: expected an integer, got 'four'"),
        # a password needing percent-encoding: said, and not written to the logs
        (
            "EMAIL_URL",
            "smtp+tls://alerts:pa#ss/w?rd@smtp.example.org:587",
            "EMAIL_URL: the port in 'smtp+tls://alerts:***@smtp.example.org:587' is not a number in 0-65535 "
            "(characters # / ? @ : in a password are written percent-encoded: %23 %2F %3F %40 %3A)",
        ),
        (
            "DATABASE_URL",
            "postgres://u:secret@localhost:5432/",
            "no database name in 'postgres://u:***@localhost",
        ),
        (
            "EMAIL_URL",
            "alerts:S3cret@smtp.example.org:587",
            "expected a URL like smtp://..., got 'alerts:***@smtp",
        ),
    ],
)
def test_malformed_variable_stops_startup_with_one_line(tmp_path, variable, value, expected):
    result = manage("check", var=str(tmp_path), **{variable: value})
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


def test_defaults_need_no_server(tmp_path):
    result = manage("check", var=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "secret_key").exists(), "SECRET_KEY is generated once and kept under var/"
    key = (tmp_path / "secret_key").read_text()
    manage("check", var=str(tmp_path))
    assert (tmp_path / "secret_key").read_text() == key


def test_check_deploy_passes_with_production_values(tmp_path):
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        var=str(tmp_path),
        SECRET_KEY="x" * 30 + "production-like-secret-key-of-sufficient-length",
        SITE_URL="https://echolab.example.org",
        ALLOWED_HOSTS="echolab.example.org",
        DATABASE_URL="postgres://echolab:pw@db.example.org:5432/echolab",
        CELERY_BROKER_URL="redis://redis.example.org:6379/0",
        EMAIL_URL="smtp+tls://alerts:pw@smtp.example.org:587",
    )
    assert result.returncode == 0, result.stdout + result.stderr
