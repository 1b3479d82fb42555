"""Users, runs with a collapse event and metrics around it, and a real SMTP server (aiosmtpd)."""

import email
import email.policy
import math

import pytest
from aiosmtpd.controller import Controller

from tests.helpers import free_port
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint

EVENT_STEP = 60


class Inbox:
    """Stores every message the SMTP server accepts, parsed."""

    def __init__(self):
        self.envelopes = []

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append(envelope)
        return "250 OK"

    @property
    def messages(self):
        return [
            email.message_from_bytes(envelope.content, policy=email.policy.default)
            for envelope in self.envelopes
        ]


@pytest.fixture
def smtp_server():
    """A real SMTP server on a free localhost port; .port, .envelopes, .messages."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    inbox.port = controller.port
    yield inbox
    controller.stop()


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


@pytest.fixture
def make_run(alice):
    """make_run(**experiment_fields) -> a running run with success and in-group std for steps 0-119:
    success peaks near the event step and falls after it."""

    def make(label="seed 0", **experiment_fields):
        experiment_fields.setdefault("name", "FrozenLake PPO")
        experiment = Experiment.objects.create(owner=alice, config={}, **experiment_fields)
        run = Run.objects.create(
            experiment=experiment,
            label=label,
            config={},
            status=Run.Status.RUNNING,
            step=120,
            total_steps=200,
        )
        points = []
        for step in range(120):
            success = 0.8 if step < EVENT_STEP else 0.8 * math.exp(-(step - EVENT_STEP) / 10)
            std = 0.4 / (1 + step / 20)
            points += [(step, "train/success", success), (step, "train/reward_std_in_group", std)]
        MetricPoint.upsert(run.pk, points)
        MetricPoint.upsert(run.pk, [(EVENT_STEP + 1, "train/success", math.nan)])  # a gap, not an error
        return run

    return make


@pytest.fixture
def make_event(make_run):
    """make_event(level="collapse", rule="collapse", step=EVENT_STEP, run=None, **experiment_fields)."""

    def make(level="collapse", rule="collapse", step=EVENT_STEP, run=None, **experiment_fields):
        run = run or make_run(**experiment_fields)
        return DetectorEvent.objects.create(
            run=run,
            step=step,
            level=level,
            rule=rule,
            message="Success collapsed: train/success 0.3 is 38% of its peak 0.8",
            signals={
                "metric": "train/success",
                "value": 0.30000001,
                "peak": 0.8,
                "ratio": 0.375,
                "since_step": step - 4,
                "missing": None,
            },
        )

    return make
