"""TRL's GRPOTrainer with report_to="mlflow", pointed at EchoLab: its metrics stream in while it trains, and
a real worker runs the Echo Trap detector over them under our names and emails the alert."""

import pytest
from django.utils import timezone

from tests.helpers import wait_for
from webapp.alerts.models import DetectorEvent, Notification
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint
from webapp.tracking.models import ExternalExperiment, ExternalRun

STEPS = 4
# Every group gets the same reward, so TRL logs frac_reward_zero_std = 1 each step; with these overrides
# the zero_std_groups rule fires on the first step it judges.
OVERRIDES = {"zero_std_groups": {"threshold": 0.5, "min_rise": 0.0, "pending": 1, "smoothing": 0.0}}


def constant_reward(completions, **_):
    return [1.0 for _ in completions]


@pytest.mark.timeout(600)
def test_grpo_trainer_streams_into_echolab_and_the_detector_judges_it(
    mlflow_alice, alice, start_worker, smtp_server, tiny_model_dir, tmp_path, monkeypatch
):
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    mlflow = mlflow_alice
    start_worker("default", name="detector", EMAIL_URL=f"smtp://127.0.0.1:{smtp_server.port}")
    experiment = ExternalExperiment.create(alice, "trl grpo").experiment
    Experiment.objects.filter(pk=experiment.pk).update(detector_overrides=OVERRIDES, alert_on_warnings=True)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "trl grpo")  # how transformers' MLflowCallback picks it

    class WatchEchoLab(TrainerCallback):
        """After each log call (MLflowCallback's runs first, and sends in the background: mlflow's async
        logging), training waits here until the step is in EchoLab, and notes what EchoLab holds."""

        def __init__(self):
            self.seen = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            if "reward" not in (logs or {}):
                return
            run = ExternalRun.objects.get(run_uuid=mlflow.active_run().info.run_id).run
            keys = wait_for(
                lambda: set(
                    MetricPoint.objects.filter(run=run, step=state.global_step).values_list("key", flat=True)
                ),
                timeout=30,
                message=f"step {state.global_step} in EchoLab",
            )
            self.seen.append((state.global_step, Run.objects.get(pk=run.pk).status, keys))

    watch = WatchEchoLab()
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=STEPS,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        logging_steps=1,
        report_to="mlflow",
        run_name="grpo tiny",
        save_strategy="no",
        use_cpu=True,
        seed=0,
    )
    dataset = Dataset.from_dict({"prompt": ["go left", "go right", "push the box", "find the goal"] * 4})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = GRPOTrainer(
            model=tiny_model_dir,
            reward_funcs=constant_reward,
            args=args,
            train_dataset=dataset,
            callbacks=[watch],
        )
        trainer.train()
    finally:
        torch.set_num_threads(threads)

    # Live: every logging step was in EchoLab, under our names, while the run was still running.
    assert [step for step, _, _ in watch.seen] == list(range(1, STEPS + 1))
    for step, status, keys in watch.seen:
        assert status == Run.Status.RUNNING
        assert {
            "train/reward_mean",
            "reward_std",  # TRL's is over the whole batch: not our in-group std, kept under its own name
            "train/frac_zero_std_groups",
            "actor/entropy",
            "actor/grad_norm",
            "response/tokens_mean",
        } <= keys, (step, keys)
    run = Run.objects.get(experiment=experiment)
    assert run.status == Run.Status.COMPLETED and run.label == "grpo tiny" and run.step >= STEPS
    assert run.config["num_generations"] == "4" and run.config["max_completion_length"] == "8"

    # The detector read TRL's frac_reward_zero_std as ours, and the alert went out by email.
    event = wait_for(
        lambda: DetectorEvent.objects.filter(run=run, rule="zero_std_groups").first(),
        timeout=60,
        message="the worker to judge the run",
    )
    assert event.step == 1 and event.signals["metric"] == "train/frac_zero_std_groups"
    wait_for(
        lambda: Notification.objects.filter(event=event, status=Notification.Status.SENT).exists(),
        timeout=60,
        message="the alert email",
    )
    assert any(
        "warning: Zero-std groups rose on trl grpo" in message["Subject"] for message in smtp_server.messages
    )
    wait_for(
        lambda: ExternalRun.objects.get(pk=run.pk).detected_through == run.step,
        timeout=60,
        message="the last step to be judged once the run ended",
    )
    assert run.finished_at <= timezone.now()
