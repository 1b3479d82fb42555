"""Fixtures for the worker tests: a tiny model built once per session, runs with tiny configs, and gpu
workers started as the operations guide says (concurrency 1, prefetch 1, one run per child)."""

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth import get_user_model

from tests.helpers import free_port
from webapp.experiments.models import Experiment, Run


def tiny_config(model_dir, steps=4, **schedule) -> dict:
    """A config whose steps take about a second on one CPU core; a checkpoint after every step. No
    template-collapse measurement: these tests count every step's points as steps x keys, and the
    periodic collapse/* keys are tested in tests/trainer/test_collapse.py."""
    from trainer.config import TrainConfig

    return TrainConfig.preset(
        "grpo",
        model={"name": str(model_dir)},
        rollout={"env_groups": 2, "group_size": 2, "max_new_tokens": 8, "max_turns": 1, "val_seeds": 2},
        optim={"mini_batch_size": 4, "micro_batch_size": 4},
        schedule={
            "steps": steps,
            "val_every": 0,
            "checkpoint_every": 1,
            "keep_checkpoints": 2,
            "samples_per_step": 2,
            **schedule,
        },
        diagnostics={"collapse_every": 0},
    ).to_dict()


@pytest.fixture
def checkpoint_root(settings, tmp_path):
    settings.CHECKPOINT_ROOT = tmp_path / "checkpoints"
    return settings.CHECKPOINT_ROOT


@pytest.fixture
def make_run(transactional_db):
    """make_run(config, **experiment_fields) -> a queued Run (not sent)."""
    owner = get_user_model().objects.create_user("owner", "owner@example.com", "pw-owner-123")

    def make(config, label="seed 0", **experiment_fields):
        experiment_fields.setdefault("name", "exp")
        experiment = Experiment.objects.create(owner=owner, config=config, seeds=[0], **experiment_fields)
        return Run.objects.create(experiment=experiment, label=label, config=config)

    return make


@pytest.fixture
def start_gpu_worker(start_worker, checkpoint_root, purge_broker):
    """A gpu worker as docs/OPERATIONS.md starts one, on one CPU thread, with the test checkpoint root."""

    def start(name="gpu0", **env):
        return start_worker(
            "gpu",
            name=name,
            extra_args=("--max-tasks-per-child", "1"),
            ECHOLAB_THREADS=1,
            CHECKPOINT_ROOT=checkpoint_root,
            **env,
        )

    return start


class Inbox:
    def __init__(self, reply=None):
        self.messages, self.reply = [], reply

    async def handle_DATA(self, server, session, envelope):
        if self.reply:
            return self.reply
        self.messages.append(envelope)
        return "250 OK"


@pytest.fixture
def smtp_server(settings):
    """smtp_server(reply=None) -> an Inbox served on a real SMTP port that this process sends to."""
    controllers = []

    def start(reply=None):
        inbox = Inbox(reply)
        controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
        controller.start()
        controllers.append(controller)
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
        inbox.port = controller.port
        return inbox

    yield start
    for controller in controllers:
        controller.stop()
