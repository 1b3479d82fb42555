"""The worker puts a run's model name through the web's resolver again before it loads anything, and loads
a hub id from the hub, never from a same-named folder in its working directory."""

import pytest

from tests.factories import tiny_config
from webapp.experiments.models import Run
from worker.training import train_run


@pytest.fixture
def worker_settings(settings, tmp_path, tiny_model_dir, checkpoint_root, monkeypatch):
    from pathlib import Path

    settings.MODEL_ROOT = Path(tiny_model_dir).parent
    settings.TRAIN_THREADS = 1  # ECHOLAB_THREADS, read at start
    # No network here: a hub id cannot load, and says so at once. huggingface_hub reads the variable when
    # it is first imported, which an earlier test may have done, so its constant is set too (without it
    # the load waits out the hub's connection retries: ~45 s of the suite).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)


@pytest.mark.parametrize("name", ["/etc", "../../etc", "{checkpoints}"])
def test_a_config_written_around_the_resolver_fails_before_loading(
    queued_run, worker_settings, tiny_model_dir, checkpoint_root, name
):
    (checkpoint_root / "1").mkdir(parents=True)
    config = tiny_config(tiny_model_dir, steps=1)
    config["model"]["name"] = name.format(checkpoints=checkpoint_root / "1")
    run = queued_run(config)
    train_run(run.pk)
    run = Run.objects.get(pk=run.pk)
    assert run.status == "failed"
    assert run.error.startswith("invalid config: model.name: there is no model folder")


def test_a_hub_id_is_not_loaded_from_the_working_directory(
    queued_run, worker_settings, tiny_model_dir, tmp_path, monkeypatch
):
    (tmp_path / "cwd" / "someorg").mkdir(parents=True)
    (tmp_path / "cwd" / "someorg" / "model").symlink_to(tiny_model_dir)
    monkeypatch.chdir(tmp_path / "cwd")
    config = tiny_config(tiny_model_dir, steps=1)
    config["model"]["name"] = "someorg/model"
    run = queued_run(config)
    train_run(run.pk)
    run = Run.objects.get(pk=run.pk)
    assert run.status == "failed", "trained the folder in the working directory"
    assert "someorg/model" in run.error
