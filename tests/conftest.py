"""Shared fixtures: real Celery worker subprocesses against the test database and the test broker."""

import contextlib
import os

import pytest

from tests.factories import make_user
from tests.helpers import SmtpInbox, WorkerProcess, as_function_predicate, serve_smtp

# Fixtures that make a test slow (a real process, a live server, the tiny model) or a browser test: such tests
# are marked here, so `./echolab test --fast` never depends on every module remembering its marks.
SLOW_FIXTURES = {"start_worker", "live_server", "tiny_model_dir", "page"}


def pytest_configure(config):
    """Passwords hash with MD5 first in this process: the production hasher (PBKDF2, a million rounds) takes
    ~0.35 s a password here, and most tests make a user or two (Django's own advice for test speed). The
    production hashers stay listed, so a hash made by a server or worker process still checks."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]


def pytest_collection_modifyitems(items):
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if "page" in used:
            item.add_marker(pytest.mark.browser)
        # a test that stops Postgres or Redis runs only in the slow tier, after the parallel part
        if used & SLOW_FIXTURES or item.get_closest_marker("stops_services"):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def start_worker(transactional_db, tmp_path):
    """start_worker("gpu,default", name="w1") -> a ready WorkerProcess; all are stopped afterwards."""
    started = []

    def start(queues="default,gpu", name=None, extra_args=(), **env):
        name = name or f"w{len(started)}"
        worker = WorkerProcess(queues, name, tmp_path / f"{name}.log", extra_args, **env)
        started.append(worker)
        return worker.wait_ready()

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture(autouse=True)
def forget_detection_throttle():
    """Run ids come back in every test's database: a run's last detection message belongs to its test."""
    from webapp.tracking.models import send_detection_soon

    send_detection_soon.planned.clear()


@pytest.fixture
def purge_broker():
    """Empty the test broker's queues so no message from an earlier test reaches this one's worker."""
    from worker.celery import app

    for queue in ("default", "gpu"):
        # the queue may not exist yet
        with app.connection_for_write() as conn, contextlib.suppress(Exception):
            conn.default_channel.queue_purge(queue)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """The tiny model, built once per session as `tiny` is everywhere; "tiny" resolves to it."""
    import torch

    from trainer import tiny_model

    root = os.environ.get("ECHOLAB_TEST_MODEL_ROOT")
    if not root and os.environ.get("PYTEST_XDIST_WORKER"):
        # the session's folder above every worker's own: one worker builds, the others wait for it
        root = str(tmp_path_factory.getbasetemp().parent / "models")
    root = root or str(tmp_path_factory.mktemp("models"))
    path = os.path.join(root, "tiny")
    old = os.environ.get("MODEL_ROOT")
    os.environ["MODEL_ROOT"] = root
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tiny_model.ensure(path, log=None)  # the same warm-start as the embedded default
    finally:
        torch.set_num_threads(threads)
    yield path
    if old is None:
        os.environ.pop("MODEL_ROOT", None)
    else:
        os.environ["MODEL_ROOT"] = old


@pytest.fixture
def alice(db):
    return make_user("alice")


@pytest.fixture
def bob(db):
    return make_user("bob")


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# Headless Debian chromium with no background traffic: the machine has no network to reach.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def page(live_server, transactional_db, monkeypatch):
    """A Playwright tab in Debian chromium, logged in to the live server as `page.user` (carol);
    `page.base` is the server's URL. The test fails on any JavaScript error the page raised and on anything
    the Content-Security-Policy blocked."""
    from django.conf import settings
    from django.db import connections
    from django.test import Client
    from playwright import sync_api

    # Playwright's sync API runs an event loop in this thread; the ORM calls here are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    user = make_user("carol", "pw-carol-123")
    client = Client()
    client.force_login(user)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        context.add_cookies(
            [
                {
                    "name": settings.SESSION_COOKIE_NAME,
                    "url": live_server.url,
                    "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                }
            ]
        )
        tab = context.new_page()
        tab.set_default_timeout(20_000)
        tab.user, tab.base = user, live_server.url
        errors = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        # Chromium reports what the Content-Security-Policy blocked on the console: a page that needs an
        # inline script or style the policy refuses fails its test.
        tab.on(
            "console",
            lambda message: "Content Security Policy" in message.text and errors.append(message.text),
        )
        tab.wait_for_function = as_function_predicate(tab.wait_for_function)
        yield tab
        browser.close()
        # The test's ORM calls ran while Playwright's loop held this thread, on a connection of their own
        # that nothing else closes: left open, it kept the test database from being dropped at the end.
        connections.close_all()
        assert errors == []


@pytest.fixture
def smtp_server():
    """A real SMTP server (aiosmtpd) on a free localhost port; .port, .envelopes, .messages (parsed)."""
    with serve_smtp(SmtpInbox()) as inbox:
        yield inbox


@pytest.fixture
def use_smtp(settings):
    """Point this process's Django email at an SMTP port."""

    def use(port):
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
        settings.EMAIL_TIMEOUT = 5

    return use
