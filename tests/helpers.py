"""Helpers for tests that drive real processes."""

import contextlib
import email
import email.policy
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
from aiosmtpd.controller import Controller
from django.conf import settings
from django.db import connection

REPO_ROOT = Path(__file__).resolve().parent.parent


def subprocess_env(**extra) -> dict:
    """The environment for a child process that must see the test database (not the dev one)."""
    db = connection.settings_dict
    env = dict(os.environ)
    if db["ENGINE"].endswith("postgresql"):
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        env["DATABASE_URL"] = (
            f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        )
    else:
        env["DATABASE_URL"] = f"sqlite:///{db['NAME']}"
    env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    env["PYTHONUNBUFFERED"] = "1"
    env.update({key: str(value) for key, value in extra.items()})
    return env


def on_sqlite(tmp_path: Path, script: str) -> str:
    """Migrate a fresh embedded SQLite database (`./echolab run` without DATABASE_URL) in tmp_path, run
    `script` in `manage.py shell` against it, and return what it printed."""
    env = {
        key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "CELERY_BROKER_URL")
    }
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'echolab.sqlite3'}", ECHOLAB_VAR=str(tmp_path))
    for command in (["migrate", "-v", "0"], ["shell", "-c", script]):
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


class WorkerProcess:
    """A real `celery worker` child process; stopped (or killed) by the fixture."""

    def __init__(self, queues: str, name: str, log_path: Path, extra_args=(), **env):
        self.log_path = log_path
        self.log = open(log_path, "w")
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "worker.celery",
            "worker",
            "-Q",
            queues,
            "-n",
            f"{name}@%h",
            "--concurrency",
            "1",
            "--prefetch-multiplier",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
            *extra_args,
        ]
        self.process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=subprocess_env(**env),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text()

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "ready." in self.output():
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.output()}")
            time.sleep(0.2)
        raise TimeoutError(f"worker not ready after {timeout}s:\n{self.output()}")

    def kill(self, sig=signal.SIGKILL):
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
        self.process.wait(timeout=30)

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


def wait_for(predicate, timeout=60, interval=0.2, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {message}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def postgres_cluster(action: str, *options: str) -> None:
    """Stop or start the local Postgres cluster (the newest installed version's `main`), as an operator would.
    A start finding the cluster already up (another process brought it back) is not an error."""
    version = sorted(os.listdir("/etc/postgresql"), key=lambda name: [int(part) for part in name.split(".")])[
        -1
    ]
    done = subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action, *options],
        capture_output=True,
        text=True,
    )
    if done.returncode and not (action == "start" and "already running" in done.stdout + done.stderr):
        raise RuntimeError(f"pg_ctlcluster {action} failed: {done.stdout}{done.stderr}")


FUNCTION_SOURCE = re.compile(r"\s*(async\s+)?(function\b|\([^)]*\)\s*=>|[\w$]+\s*=>)")


def as_function_predicate(wait_for_function):
    """Playwright runs a predicate given as an expression with eval() inside the page, which the page's
    script-src 'self' forbids; given as a function it travels over the DevTools protocol, which the policy
    does not govern. Tests keep writing expressions."""

    def wait(expression, *args, **kwargs):
        if not FUNCTION_SOURCE.match(expression):
            expression = f"() => ({expression})"
        return wait_for_function(expression, *args, **kwargs)

    return wait


class SmtpInbox:
    """An aiosmtpd handler that keeps every message it accepts, or answers every one with `reply`."""

    def __init__(self, reply=None):
        self.envelopes, self.reply = [], reply

    async def handle_DATA(self, server, session, envelope):
        if self.reply:
            return self.reply
        self.envelopes.append(envelope)
        return "250 OK"

    @property
    def messages(self):
        return [
            email.message_from_bytes(envelope.content, policy=email.policy.default)
            for envelope in self.envelopes
        ]


@contextlib.contextmanager
def serve_smtp(inbox):
    """A real SMTP server for `inbox` on a free localhost port, kept as inbox.port."""
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    inbox.port = controller.port
    try:
        yield inbox
    finally:
        controller.stop(no_assert=True)


def answer_next_dialog(page, accept: bool) -> list[str]:
    """Answer the page's next dialog (a confirm()) with OK or Cancel; the list gets the question it asked."""
    questions: list[str] = []

    def answer(dialog):
        questions.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", answer)
    return questions


def post_with_token(client, owner, url: str, body):
    """POST `body` as JSON to an API URL with a new API token of `owner`'s, as a script would."""
    from webapp.accounts.models import ApiToken

    _, token = ApiToken.issue(owner, "tests")
    return client.post(
        url, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


# Threads on connections of their own, for tests of what concurrent transactions do to each other.
def in_thread(work) -> tuple[threading.Thread, list]:
    """Run `work` on its own database connection; the list gets its exception, if any."""
    errors = []

    def target():
        try:
            work()
        except Exception as error:  # noqa: BLE001 - handed to the test, which asserts there is none
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, errors


def other_connection(autocommit: bool = True) -> psycopg.Connection:
    """A connection to the test database beside Django's. Autocommit: pg_stat_activity is read afresh
    by each statement; without, what it locks stays locked until it commits or rolls back."""
    database = connection.settings_dict
    return psycopg.connect(
        dbname=database["NAME"],
        user=database["USER"],
        host=database["HOST"],
        port=database["PORT"],
        autocommit=autocommit,
    )


def wait_until_finished_or_waiting_for_a_lock(thread: threading.Thread, observer: psycopg.Connection):
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    deadline = time.monotonic() + 20
    while thread.is_alive() and not observer.execute(waiting).fetchone()[0]:
        assert time.monotonic() < deadline, "neither finished nor waiting for a lock"
        time.sleep(0.05)
