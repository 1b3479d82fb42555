"""The real `mlflow` client, unchanged, against EchoLab's MLflow endpoint on a live server."""

import math
import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.factories import make_experiment, make_run
from tests.tracking.conftest import point_mlflow_at
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint
from webapp.tracking.models import ExternalExperiment, ExternalRun


def points(run_id: str) -> dict[tuple[int, str], float]:
    run = ExternalRun.objects.get(run_uuid=run_id)
    return {
        (step, key): value
        for step, key, value in MetricPoint.objects.filter(run_id=run.pk).values_list("step", "key", "value")
    }


def echolab_run(run_id: str) -> Run:
    return ExternalRun.objects.select_related("run__experiment").get(run_uuid=run_id).run


def error_of(excinfo) -> tuple[str, int]:
    return excinfo.value.error_code, excinfo.value.get_http_status_code()


def test_a_training_script_logs_a_run_that_echolab_shows_as_its_own(mlflow_alice, alice, client):
    mlflow = mlflow_alice
    experiment = mlflow.set_experiment("sokoban grpo")
    assert mlflow.set_experiment("sokoban grpo").experiment_id == experiment.experiment_id  # get-by-name
    with mlflow.start_run(run_name="lr 1e-6", tags={"team": "rl"}) as active:
        assert echolab_run(active.info.run_id).status == Run.Status.RUNNING
        # A script that also uses EchoLab's own API learns the run's id from its tags.
        tags = mlflow.get_run(active.info.run_id).data.tags
        assert tags["echolab.run_id"] == str(echolab_run(active.info.run_id).pk)
        assert tags["echolab.run_url"].endswith(f"/runs/{tags['echolab.run_id']}/")
        mlflow.log_param("learning_rate", 1e-6)
        mlflow.log_params({"num_generations": 8, "beta": "0.0"})
        mlflow.log_metric("reward", 0.25, step=1)  # TRL's name
        mlflow.log_metrics({"reward": 0.5, "entropy": 1.5, "my/custom": 7}, step=2)
        mlflow.MlflowClient().log_batch(
            active.info.run_id,
            metrics=[
                mlflow.entities.Metric("frac_reward_zero_std", 0.1, 0, 3),
                mlflow.entities.Metric("train/success", 1.0, 0, 3),
            ],
        )
        mlflow.set_tag("stage", "warmup")
        mlflow.set_tags({"stage": "main", "host": "node7"})
    run = echolab_run(active.info.run_id)

    # An imported experiment of alice's with one completed run, its params as its config.
    assert run.experiment.owner == alice and run.experiment.imported and run.experiment.name == "sokoban grpo"
    assert run.status == Run.Status.COMPLETED and run.finished_at is not None and run.label == "lr 1e-6"
    assert run.config == {"learning_rate": "1e-06", "num_generations": "8", "beta": "0.0"}
    assert run.step == 3
    # Metric keys under our names, so the charts and the detector find them.
    assert points(active.info.run_id) == {
        (1, "train/reward_mean"): 0.25,
        (2, "train/reward_mean"): 0.5,
        (2, "actor/entropy"): 1.5,
        (2, "my/custom"): 7.0,
        (3, "train/frac_zero_std_groups"): 0.1,
        (3, "train/success"): 1.0,
    }

    # The client reads back what it wrote.
    got = mlflow.get_run(active.info.run_id)
    assert got.info.status == "FINISHED" and got.info.run_name == "lr 1e-6"
    assert got.info.experiment_id == experiment.experiment_id
    assert got.data.params == {"learning_rate": "1e-06", "num_generations": "8", "beta": "0.0"}
    # under the names it logged, as from MLflow's own server
    assert got.data.metrics == {
        "reward": 0.5,
        "entropy": 1.5,
        "my/custom": 7.0,
        "frac_reward_zero_std": 0.1,
        "train/success": 1.0,
    }
    assert {key: got.data.tags[key] for key in ("stage", "team", "host")} == {
        "stage": "main",
        "team": "rl",
        "host": "node7",
    }
    history = mlflow.MlflowClient().get_metric_history(active.info.run_id, "reward")  # asked by TRL's name
    assert [(metric.step, metric.value) for metric in history] == [(1, 0.25), (2, 0.5)]

    # The run page shows it with its config, and it exports like any run.
    client.force_login(alice)
    page = client.get(run.get_absolute_url())
    assert page.status_code == 200 and b"num_generations" in page.content and b"lr 1e-6" in page.content
    exported = client.get(reverse("api_run_export", args=[run.pk]) + "?format=jsonl")
    assert b'"train/reward_mean": 0.5' in b"".join(exported.streaming_content)


def test_run_statuses_come_from_the_client(mlflow_alice):
    mlflow = mlflow_alice
    mlflow.set_experiment("statuses")
    statuses = {}
    for status in ("FINISHED", "FAILED", "KILLED"):
        run = mlflow.start_run()
        mlflow.end_run(status)
        statuses[status] = echolab_run(run.info.run_id).status
        assert mlflow.get_run(run.info.run_id).info.status == status
    assert statuses == {
        "FINISHED": Run.Status.COMPLETED,
        "FAILED": Run.Status.FAILED,
        "KILLED": Run.Status.STOPPED,
    }


def test_a_run_with_no_experiment_goes_to_the_users_default_experiment(mlflow_alice, alice):
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        mlflow.log_metric("loss", 1.0, step=0)
    default = ExternalExperiment.objects.get(owner=alice, name="Default")
    assert run.info.experiment_id == default.mlflow_id == "0"  # as MLflow's server answers
    assert mlflow.get_experiment("0").name == "Default"
    assert mlflow.get_experiment_by_name("Default").experiment_id == "0"
    assert mlflow.get_run(run.info.run_id).info.artifact_uri.startswith("mlflow-artifacts:/0/")
    assert [r.info.run_id for r in mlflow.MlflowClient().search_runs(["0"])] == [run.info.run_id]


def test_search_sees_only_the_callers_experiments_and_runs(mlflow_alice, bob):
    mlflow = mlflow_alice
    bob_experiment = ExternalExperiment.create(bob, "shared name")
    alice_experiment = mlflow.set_experiment("shared name")  # the same name is another experiment
    assert alice_experiment.experiment_id != bob_experiment.mlflow_id
    for name in ("a", "b", "c"):
        with mlflow.start_run(run_name=name):
            if name != "c":
                mlflow.log_params({"name": name, "actor/lr-max": f"1e-{name}"})
    client = mlflow.MlflowClient()
    assert [e.name for e in client.search_experiments()] == ["shared name"]
    assert [e.experiment_id for e in client.search_experiments(filter_string="name = 'shared name'")] == [
        alice_experiment.experiment_id
    ]
    runs = client.search_runs([alice_experiment.experiment_id])
    assert sorted(run.info.run_name for run in runs) == ["a", "b", "c"]

    def found(filter_string):
        runs = client.search_runs([alice_experiment.experiment_id], filter_string=filter_string)
        return sorted(run.info.run_name for run in runs)

    assert found("params.name = 'b'") == ["b"]
    assert found("params.name != 'b'") == ["a"]  # c has no such param: it matches neither, as in MLflow
    assert found("params.nothing != 'b'") == []
    assert found("tags.mlflow.runName = 'a'") == found("tags.\"mlflow.runName\" = 'a'") == ["a"]
    assert found("params.`actor/lr-max` = '1e-a'") == found("param.`actor/lr-max` != '1e-b'") == ["a"]
    assert client.search_runs([]) == []
    assert len(mlflow.search_runs(experiment_ids=[alice_experiment.experiment_id])) == 3  # the pandas path
    from mlflow.entities import ViewType

    deleted = client.search_runs([alice_experiment.experiment_id], run_view_type=ViewType.DELETED_ONLY)
    assert list(deleted) == []  # none deleted (archived) yet
    assert len(client.search_runs([alice_experiment.experiment_id], run_view_type=ViewType.ALL)) == 3

    assert (
        list(client.search_runs([bob_experiment.mlflow_id])) == []
    )  # as MLflow's server: no such experiment
    with pytest.raises(mlflow.MlflowException) as excinfo:
        client.search_runs([alice_experiment.experiment_id], filter_string="metrics.reward ~ 0.5")
    assert error_of(excinfo) == ("INVALID_PARAMETER_VALUE", 400)
    assert "metrics.reward ~ 0.5" in excinfo.value.message


def test_a_notebook_finds_the_best_runs_by_metric_param_name_and_time(mlflow_alice):
    """What an analysis notebook asks first ("the best run by reward"): filters on metrics and times,
    LIKE, IN and IS NULL, and order_by, as MLflow's own server answers them."""
    mlflow = mlflow_alice
    experiment = mlflow.set_experiment("sweep")
    runs = {}
    for name, lr, reward in (
        ("lr-a", "1e-3", 0.2),
        ("lr-b", "3e-4", 0.9),
        ("LR-c", "1e-4", 0.5),
        ("none", None, None),
    ):
        with mlflow.start_run(run_name=name) as run:
            if lr is not None:
                mlflow.log_param("lr", lr)
                mlflow.set_tag("team", "rl")
            if reward is not None:
                mlflow.log_metric("reward", reward - 0.5, step=0)
                mlflow.log_metric("reward", reward, step=1)  # the latest step's value is the run's
            runs[name] = run.info.run_id
    client = mlflow.MlflowClient()
    ids = [experiment.experiment_id]

    def names(**search):
        return [run.info.run_name for run in client.search_runs(ids, **search)]

    # missing values last, whichever the direction; then newest first
    assert names(order_by=["metrics.reward DESC"]) == ["lr-b", "LR-c", "lr-a", "none"]
    assert names(order_by=["metrics.reward ASC"]) == ["lr-a", "LR-c", "lr-b", "none"]
    assert names(order_by=["params.lr"]) == [
        "lr-a",
        "LR-c",
        "lr-b",
        "none",
    ]  # params are text: "1e-3" < "1e-4"
    assert names(order_by=["attributes.start_time ASC"]) == ["lr-a", "lr-b", "LR-c", "none"]
    assert names(order_by=["run_name DESC"]) == ["none", "lr-b", "lr-a", "LR-c"]
    assert names(filter_string="metrics.reward > 0.4", order_by=["metrics.reward DESC"]) == ["lr-b", "LR-c"]
    assert names(filter_string="metrics.reward <= 0.2") == ["lr-a"]
    assert names(filter_string="attributes.run_name LIKE 'lr-%'", order_by=["run_name"]) == ["lr-a", "lr-b"]
    assert names(filter_string="run_name ILIKE 'lr-%'", order_by=["run_name"]) == ["LR-c", "lr-a", "lr-b"]
    assert names(filter_string="tags.team IS NULL") == ["none"]
    in_list = f"attributes.run_id IN ('{runs['lr-a']}', '{runs['none']}')"
    assert names(filter_string=in_list, order_by=["run_name"]) == ["lr-a", "none"]
    assert names(filter_string="attributes.start_time > 0 AND status = 'FINISHED'", max_results=1) == ["none"]
    best = mlflow.search_runs(
        [experiment.experiment_id], filter_string="params.lr LIKE '%e-4'", order_by=["metrics.reward DESC"]
    )
    assert list(best["tags.mlflow.runName"]) == ["lr-b", "LR-c"]  # the pandas path
    assert list(best["metrics.reward"]) == [0.9, 0.5]

    mlflow.set_experiment("another")
    client.set_experiment_tag(experiment.experiment_id, "team", "rl")
    found = client.search_experiments(filter_string="name LIKE '%wee%'")
    assert [e.name for e in found] == ["sweep"]
    assert [e.name for e in client.search_experiments(order_by=["name DESC"])] == ["sweep", "another"]
    assert [e.name for e in client.search_experiments(filter_string="tags.team = 'rl'")] == ["sweep"]


def test_non_finite_values_and_steps_going_backwards_are_stored_as_sent(mlflow_alice):
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        mlflow.log_metrics({"reward": math.nan, "grad_norm": math.inf, "entropy": -math.inf}, step=5)
        mlflow.log_metric("reward", 0.5, step=2)  # backwards: a point of its own at step 2
        mlflow.log_metric("reward", 0.75, step=2)  # the same step again: the last value wins
    stored = points(run.info.run_id)
    assert math.isnan(stored[(5, "train/reward_mean")])
    assert stored[(5, "actor/grad_norm")] == math.inf and stored[(5, "actor/entropy")] == -math.inf
    assert stored[(2, "train/reward_mean")] == 0.75 and len(stored) == 4
    assert echolab_run(run.info.run_id).step == 5
    assert math.isnan(mlflow.get_run(run.info.run_id).data.metrics["reward"])  # step 5's value


def test_a_foreign_name_logged_beside_ours_has_its_own_history(mlflow_alice):
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        mlflow.log_metrics({"reward": 1.0, "train/reward_mean": 2.0}, step=0)  # ours wins the step...
        mlflow.log_metrics({"train/reward_mean": 3.0, "reward": 4.0}, step=1)  # ...and keeps TRL's apart
    client = mlflow.MlflowClient()
    assert [m.value for m in client.get_metric_history(run.info.run_id, "reward")] == [1.0, 4.0]
    assert [m.value for m in client.get_metric_history(run.info.run_id, "train/reward_mean")] == [2.0, 3.0]
    assert client.get_run(run.info.run_id).data.metrics == {"reward": 4.0, "train/reward_mean": 3.0}


def test_a_foreign_name_keeps_our_key_across_calls_and_a_second_alias_its_own(mlflow_alice):
    mlflow = mlflow_alice
    client = mlflow.MlflowClient()
    with mlflow.start_run() as run:
        mlflow.log_metric("reward", 1.0, step=0)  # TRL's name takes train/reward_mean...
        mlflow.log_metric("critic/score/mean", 2.0, step=0)  # ...so veRL's, logged later, keeps its own
        mlflow.log_metric("reward", 3.0, step=1)
        with pytest.raises(mlflow.MlflowException) as excinfo:  # nowhere to keep ours apart from TRL's
            mlflow.log_metrics({"train/reward_mean": 9.0, "loss": 0.5}, step=1)
    assert error_of(excinfo) == ("INVALID_PARAMETER_VALUE", 400)
    assert (
        "train/reward_mean" in excinfo.value.message and "'reward' it logged first" in excinfo.value.message
    )
    assert points(run.info.run_id) == {
        (0, "train/reward_mean"): 1.0,
        (0, "critic/score/mean"): 2.0,
        (1, "train/reward_mean"): 3.0,
    }
    assert [m.value for m in client.get_metric_history(run.info.run_id, "reward")] == [1.0, 3.0]
    assert [m.value for m in client.get_metric_history(run.info.run_id, "critic/score/mean")] == [2.0]
    assert client.get_run(run.info.run_id).data.metrics == {"reward": 3.0, "critic/score/mean": 2.0}


def test_ten_thousand_params_are_all_kept(mlflow_alice):
    mlflow = mlflow_alice
    params = {f"layer.{index}.lr": index / 7 for index in range(10_000)}
    with mlflow.start_run() as run:
        mlflow.log_params(params)  # the client sends 100 per log-batch
    config = echolab_run(run.info.run_id).config
    assert len(config) == 10_000 and config["layer.9999.lr"] == str(9999 / 7)
    assert len(mlflow.get_run(run.info.run_id).data.params) == 10_000


def test_long_values_are_cut_and_long_metric_keys_kept_as_mlflows_server_does(mlflow_alice):
    mlflow = mlflow_alice
    key = "eval/" + "k" * 245  # MLflow's longest key
    with mlflow.start_run() as run:
        mlflow.log_param("prompt", "p" * 6001)
        mlflow.set_tag("notes", "t" * 8001)
        mlflow.log_metric(key, 0.5, step=1)
    got = mlflow.get_run(run.info.run_id).data
    assert got.params["prompt"] == "p" * 6000 and got.tags["notes"] == "t" * 8000
    assert got.metrics[key] == 0.5
    # an experiment's tags are not cut: MLflow keeps 20,000 characters and refuses more
    client = mlflow.MlflowClient()
    client.set_experiment_tag(run.info.experiment_id, "readme", "r" * 20_000)
    assert client.get_experiment(run.info.experiment_id).tags["readme"] == "r" * 20_000
    with pytest.raises(mlflow.MlflowException) as excinfo:
        client.set_experiment_tag(run.info.experiment_id, "readme", "r" * 20_001)
    assert (
        error_of(excinfo) == ("INVALID_PARAMETER_VALUE", 400)
        and "the limit is 20000" in excinfo.value.message
    )


def test_a_duplicated_run_name_makes_a_second_run(mlflow_alice):
    mlflow = mlflow_alice
    mlflow.set_experiment("dupes")
    first = mlflow.start_run(run_name="seed 1")
    mlflow.end_run()
    second = mlflow.start_run(run_name="seed 1")
    mlflow.end_run()
    assert first.info.run_id != second.info.run_id
    runs = Run.objects.filter(mlflow__run_uuid__in=[first.info.run_id, second.info.run_id])
    assert [run.label for run in runs] == ["seed 1", "seed 1"]


def test_a_changed_param_rejects_the_whole_batch(mlflow_alice):
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        mlflow.log_param("lr", "0.1")
        client = mlflow.MlflowClient()
        with pytest.raises(mlflow.MlflowException) as excinfo:
            client.log_batch(
                run.info.run_id,
                metrics=[mlflow.entities.Metric("reward", 1.0, 0, 1)],
                params=[mlflow.entities.Param("lr", "0.2")],
            )
        assert error_of(excinfo) == ("INVALID_PARAMETER_VALUE", 400)
        assert "'lr'" in excinfo.value.message and "0.1" in excinfo.value.message
        assert points(run.info.run_id) == {}  # the batch's metric is not written either
        mlflow.log_param("lr", "0.1")  # the same value again is fine, as in MLflow


def test_echolabs_own_tags_are_refused_not_overwritten_silently(mlflow_alice):
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        client = mlflow.MlflowClient()
        for log in (
            lambda: mlflow.set_tag("echolab.run_id", "mine"),
            lambda: client.log_batch(run.info.run_id, tags=[mlflow.entities.RunTag("echolab.note", "x")]),
        ):
            with pytest.raises(mlflow.MlflowException) as excinfo:
                log()
            assert error_of(excinfo) == ("INVALID_PARAMETER_VALUE", 400)
            assert "is under 'echolab.', EchoLab's own read-only tags" in excinfo.value.message
        with pytest.raises(mlflow.MlflowException):
            client.create_run(run.info.experiment_id, tags={"echolab.run_url": "http://elsewhere"})
        tags = client.get_run(run.info.run_id).data.tags
        assert tags["echolab.run_id"] == str(echolab_run(run.info.run_id).pk) and "echolab.note" not in tags


@pytest.mark.parametrize(
    "step, problem",
    [(-1, "INVALID_PARAMETER_VALUE: step: must be between 0"), (2**31, "VALUE: step: must be between 0")],
)
def test_a_step_out_of_range_is_refused_naming_it(mlflow_alice, step, problem):
    mlflow = mlflow_alice
    with mlflow.start_run() as run, pytest.raises(mlflow.MlflowException) as excinfo:
        mlflow.log_metric("reward", 1.0, step=step)
    assert error_of(excinfo) == ("INVALID_PARAMETER_VALUE", 400) and problem in excinfo.value.message
    assert points(run.info.run_id) == {}


def test_a_revoked_token_is_refused(mlflow_alice, alice, live_server, monkeypatch):
    mlflow = mlflow_alice
    token, plain = ApiToken.issue(alice, "to revoke")
    point_mlflow_at(monkeypatch, live_server.url, plain)
    run = mlflow.start_run()
    token.delete()
    with pytest.raises(mlflow.MlflowException) as excinfo:
        mlflow.log_metric("reward", 1.0, step=1)
    assert error_of(excinfo) == ("UNAUTHENTICATED", 401) and "revoked" in excinfo.value.message
    assert points(run.info.run_id) == {}
    point_mlflow_at(monkeypatch, live_server.url, ApiToken.issue(alice, "new")[1])


def test_another_users_run_does_not_exist_for_the_caller(mlflow_alice, bob):
    mlflow = mlflow_alice
    bobs = ExternalRun.start(ExternalExperiment.create(bob, "bob's"), "bob's run", {}, "bob", timezone.now())
    client = mlflow.MlflowClient()
    for call in (
        lambda: client.get_run(bobs.run_uuid),
        lambda: client.log_metric(bobs.run_uuid, "reward", 1.0),
        lambda: client.set_terminated(bobs.run_uuid, "KILLED"),
        lambda: client.get_experiment(str(bobs.run.experiment_id)),
    ):
        with pytest.raises(mlflow.MlflowException) as excinfo:
            call()
        assert error_of(excinfo) == ("RESOURCE_DOES_NOT_EXIST", 404)
    bobs.run.refresh_from_db()
    assert bobs.run.status == Run.Status.RUNNING and not MetricPoint.objects.filter(run_id=bobs.pk).exists()


def test_unsupported_calls_and_logged_models_are_refused_clearly(mlflow_alice):
    mlflow = mlflow_alice
    client = mlflow.MlflowClient()
    with mlflow.start_run() as run:
        with pytest.raises(mlflow.MlflowException) as excinfo:
            client.delete_experiment(run.info.experiment_id)
        assert error_of(excinfo) == ("ENDPOINT_NOT_FOUND", 404)
        assert "experiments/delete" in excinfo.value.message and "runs/log-batch" in excinfo.value.message
        assert excinfo.value.message.startswith(
            "ENDPOINT_NOT_FOUND: EchoLab deletes an experiment, with its runs and their data, only"
        )
        # MLflow 3's log_model starts by making a logged model, which EchoLab does not keep (its files can
        # be logged as artifacts); searching them finds none.
        with pytest.raises(mlflow.MlflowException) as excinfo:
            client.create_logged_model(run.info.experiment_id, source_run_id=run.info.run_id)
        assert error_of(excinfo) == ("ENDPOINT_NOT_FOUND", 404)
        assert "logged-models/search" in excinfo.value.message
        assert list(client.search_logged_models([run.info.experiment_id])) == []
    assert echolab_run(run.info.run_id).status == Run.Status.COMPLETED


def test_transformers_checkpoint_logging_is_refused_saying_what_to_do_instead(
    mlflow_alice, tmp_path, monkeypatch
):
    """HF_MLFLOW_LOG_ARTIFACTS makes transformers' MLflowCallback log each checkpoint with pyfunc.log_model,
    which starts with logged-models/create: EchoLab refuses it, and the exception ends the training at its
    first checkpoint. The refusal is what the script's log shows, so it says why and what to do instead."""
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.integrations import MLflowCallback

    mlflow = mlflow_alice
    monkeypatch.setenv("HF_MLFLOW_LOG_ARTIFACTS", "1")
    (tmp_path / "checkpoint-10").mkdir()
    (tmp_path / "checkpoint-10" / "trainer_state.json").write_text("{}")
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    state = TrainerState()
    state.global_step = 10
    callback = MLflowCallback()
    with mlflow.start_run() as run:
        callback.setup(args, state, model=None)
        with pytest.raises(mlflow.MlflowException) as excinfo:
            callback.on_save(args, state, TrainerControl())
    assert error_of(excinfo) == ("ENDPOINT_NOT_FOUND", 404)
    message = excinfo.value.message
    assert "HF_MLFLOW_LOG_ARTIFACTS" in message and "log_artifacts" in message
    assert "logged-models/search" in message  # the list of what is supported follows
    assert echolab_run(run.info.run_id).status == Run.Status.COMPLETED


def test_a_silent_run_is_lost_and_comes_back_when_it_logs_again(mlflow_alice, settings):
    from worker.sweeper import sweep_runs

    mlflow = mlflow_alice
    settings.MLFLOW_LOST_AFTER = 60
    run = mlflow.start_run()
    mlflow.log_metric("reward", 0.5, step=1)
    assert sweep_runs()["lost"] == 0  # it spoke just now
    silent_since = timezone.now() - timedelta(minutes=2)
    Run.objects.filter(mlflow__run_uuid=run.info.run_id).update(heartbeat_at=silent_since)
    assert sweep_runs()["lost"] == 1
    lost = echolab_run(run.info.run_id)
    assert lost.status == Run.Status.FAILED and lost.error.startswith("lost: nothing arrived")
    assert lost.finished_at == silent_since  # it ended when last heard from: its duration is not the wait
    assert mlflow.get_run(run.info.run_id).info.status == "FAILED"
    mlflow.log_metric("reward", 0.6, step=2)
    back = echolab_run(run.info.run_id)
    assert back.status == Run.Status.RUNNING and back.error == "" and back.finished_at is None
    mlflow.end_run()
    assert echolab_run(run.info.run_id).status == Run.Status.COMPLETED


def test_an_external_run_compares_with_a_native_run(mlflow_alice, alice, client):
    mlflow = mlflow_alice
    with mlflow.start_run(run_name="trl") as run:
        for step in range(3):
            mlflow.log_metrics({"reward": step / 2, "reward_std": 0.3}, step=step)
    native = make_run(
        alice, experiment=make_experiment(alice, "native"), config={}, status=Run.Status.COMPLETED
    )
    MetricPoint.upsert(native.pk, [(step, "train/reward_mean", 0.1) for step in range(3)])
    external = echolab_run(run.info.run_id)
    client.force_login(alice)
    answer = client.get(reverse("api_compare") + f"?runs={native.pk},{external.pk}&keys=train/reward_mean")
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert [run["label"] for run in data["runs"]] == ["seed=1", "trl"] and data["not_found"] == []
    assert data["series"][str(external.pk)]["train/reward_mean"]["value"] == [0.0, 0.5, 1.0]
    assert data["series"][str(native.pk)]["train/reward_mean"]["value"] == [0.1, 0.1, 0.1]


def test_an_empty_run_name_tag_keeps_the_name_as_mlflow_does(mlflow_alice):
    mlflow = mlflow_alice
    mlflow.set_experiment("names")
    with mlflow.start_run(run_name="first") as active:
        mlflow.set_tag("mlflow.runName", "")  # MLflow's own store renames only to a non-empty name
        assert echolab_run(active.info.run_id).label == "first"
        assert mlflow.get_run(active.info.run_id).info.run_name == "first"
        mlflow.set_tag("mlflow.runName", "second")
    assert echolab_run(active.info.run_id).label == "second"
    assert mlflow.get_run(active.info.run_id).data.tags["mlflow.runName"] == "second"


def test_a_run_logged_before_names_were_kept_finds_a_foreign_names_history_under_ours(mlflow_alice):
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        mlflow.log_metric("reward", 1.0, step=0)
    ExternalRun.objects.filter(run_uuid=run.info.run_id).update(logged_as={})  # as a run made before it
    client = mlflow.MlflowClient()
    assert [m.value for m in client.get_metric_history(run.info.run_id, "reward")] == [1.0]
    assert client.get_run(run.info.run_id).data.metrics == {"train/reward_mean": 1.0}


def test_a_name_that_is_no_longer_an_alias_finds_the_history_it_logged_under_ours(mlflow_alice):
    """TRL's reward_std took train/reward_std_in_group until 0556da7; a run logged then keeps its points there
    and `logged_as` says so. get_run answers them as reward_std, and so must their history."""
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        mlflow.log_metric("rollout/in_group_std", 0.25, step=0)
    stored = ExternalRun.objects.get(run_uuid=run.info.run_id)
    assert stored.logged_as == {"train/reward_std_in_group": "rollout/in_group_std"}
    # as TRL's run was stored before reward_std stopped being an alias
    ExternalRun.objects.filter(pk=stored.pk).update(logged_as={"train/reward_std_in_group": "reward_std"})
    client = mlflow.MlflowClient()
    assert client.get_run(run.info.run_id).data.metrics == {"reward_std": 0.25}
    assert [m.value for m in client.get_metric_history(run.info.run_id, "reward_std")] == [0.25]


def test_a_script_logging_through_mlflow_and_echolabs_api_keeps_one_series_per_name(
    mlflow_alice, alice, client
):
    """A tester's `reward` at steps 1 and 3 through the client and 2 through the API read back as step 2
    alone, the API's points kept under `reward` beside the client's train/reward_mean."""
    import json

    mlflow = mlflow_alice
    token = ApiToken.issue(alice, "script")[1]

    def post(run_id, points_sent):
        answer = client.post(
            f"/api/runs/{run_id}/metrics",
            json.dumps({"points": points_sent}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        assert answer.status_code == 200, answer.content

    with mlflow.start_run() as active:
        mlflow.log_metric("reward", 0.1, step=1)  # takes train/reward_mean
        run_id = mlflow.get_run(active.info.run_id).data.tags["echolab.run_id"]
        post(run_id, [{"step": 2, "key": "reward", "value": 0.2}])
        mlflow.log_metric("reward", 0.3, step=3)
        post(run_id, [{"step": 4, "key": "train/reward_mean", "value": 0.4}])  # ours joins the series
    mlflow_client = mlflow.MlflowClient()
    history = mlflow_client.get_metric_history(active.info.run_id, "reward")
    assert [(m.step, m.value) for m in history] == [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)]
    got = mlflow_client.get_run(active.info.run_id)
    assert got.data.metrics == {"reward": 0.4}
    assert set(Run.objects.get(pk=run_id).latest_metrics) == {"train/reward_mean"}  # charted as Reward mean

    # A run's first name through the API takes our key too, as through the client.
    with mlflow.start_run() as second:
        second_id = mlflow.get_run(second.info.run_id).data.tags["echolab.run_id"]
        post(second_id, [{"step": 0, "key": "success_rate", "value": 0.5}])
        mlflow.log_metric("success_rate", 0.75, step=1)
    history = mlflow_client.get_metric_history(second.info.run_id, "success_rate")
    assert [(m.step, m.value) for m in history] == [(0, 0.5), (1, 0.75)]
    assert set(Run.objects.get(pk=second_id).latest_metrics) == {"train/success"}
    # and the tags EchoLab adds can be searched as they are read
    found = mlflow_client.search_runs(
        [active.info.experiment_id], filter_string=f"tags.`echolab.run_id` = '{run_id}'"
    )
    assert [run.info.run_id for run in found] == [active.info.run_id]


def test_the_run_page_lists_the_scripts_tags_and_links_a_nested_run_to_its_parent(
    mlflow_alice, alice, client
):
    # A tester's tags and nesting came back from get_run but showed nowhere on the run's page.
    mlflow = mlflow_alice
    with (
        mlflow.start_run(run_name="sweep") as parent,
        mlflow.start_run(run_name="trial 1", nested=True) as child,
    ):
        mlflow.set_tags({"team": "rl", "mlflow.note.content": "first line\nsecond line <b>"})
    client.force_login(alice)
    child_page = client.get(ExternalRun.objects.get(run_uuid=child.info.run_id).run.get_absolute_url())
    html = child_page.content.decode()
    parent_run = ExternalRun.objects.get(run_uuid=parent.info.run_id).run
    assert f'Nested in <a href="{parent_run.get_absolute_url()}">sweep</a>.' in html
    assert "<th><code>team</code></th><td>rl</td>" in html
    assert "<td>first line\nsecond line &lt;b&gt;</td>" in html  # as written, its lines kept
    assert html.index("<code>team</code>") < html.index("<code>mlflow.note.content</code>")  # its own first
    html = client.get(parent_run.get_absolute_url()).content.decode()
    assert 'id="mlflow-parent"' not in html and "<code>team</code>" not in html


def test_a_run_deleted_through_the_client_is_archived_and_restored(mlflow_alice, alice):
    """MLflow's delete is soft (restore undoes it): EchoLab's archive, hidden from lists and active searches."""
    from mlflow.entities import ViewType

    mlflow = mlflow_alice
    experiment = mlflow.set_experiment("tidy")
    assert experiment.artifact_location == f"mlflow-artifacts:/{experiment.experiment_id}"
    with mlflow.start_run(run_name="keep") as kept:
        mlflow.set_tags({"a": "1", "b": "2"})
    with mlflow.start_run(run_name="drop") as dropped:
        pass
    client = mlflow.MlflowClient()
    client.delete_tag(kept.info.run_id, "a")
    assert (
        set(client.get_run(kept.info.run_id).data.tags) >= {"b"}
        and "a" not in client.get_run(kept.info.run_id).data.tags
    )
    with pytest.raises(mlflow.MlflowException) as excinfo:
        client.delete_tag(kept.info.run_id, "a")
    assert error_of(excinfo) == ("RESOURCE_DOES_NOT_EXIST", 404)
    assert f"No tag with name: a in run with id {kept.info.run_id}" in excinfo.value.message

    client.delete_run(dropped.info.run_id)
    assert echolab_run(dropped.info.run_id).archived_at is not None
    assert client.get_run(dropped.info.run_id).info.lifecycle_stage == "deleted"

    def names(view_type):
        return sorted(
            r.info.run_name for r in client.search_runs([experiment.experiment_id], run_view_type=view_type)
        )

    assert names(ViewType.ACTIVE_ONLY) == ["keep"]
    assert names(ViewType.DELETED_ONLY) == ["drop"]
    assert names(ViewType.ALL) == ["drop", "keep"]
    client.restore_run(dropped.info.run_id)
    assert echolab_run(dropped.info.run_id).archived_at is None
    assert client.get_run(dropped.info.run_id).info.lifecycle_stage == "active"
    assert names(ViewType.ACTIVE_ONLY) == ["drop", "keep"]


@pytest.mark.parametrize(
    "log, says",
    [
        (lambda mlflow: mlflow.log_param("bad key!?", 1), "names may only contain alphanumerics"),
        (lambda mlflow: mlflow.set_tag("a<b>", "x"), "names may only contain alphanumerics"),
        (lambda mlflow: mlflow.log_metric("../x", 1.0, step=0), "would resolve to '../x'"),
        (lambda mlflow: mlflow.log_metric("/abs", 1.0, step=0), "would resolve to '/abs'"),
        (lambda mlflow: mlflow.log_metric("a//b", 1.0, step=0), "would resolve to 'a/b'"),
    ],
)
def test_a_name_mlflows_server_refuses_is_refused_here_too(mlflow_alice, log, says):
    """A script tried on EchoLab runs on an MLflow server: the names MLflow refuses are refused here too."""
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        mlflow.log_metric("eval: acc/mean-1.0", 0.5, step=0)  # MLflow's whole alphabet: taken
        with pytest.raises(mlflow.MlflowException) as excinfo:
            log(mlflow)
    assert error_of(excinfo) == ("INVALID_PARAMETER_VALUE", 400)
    assert says in excinfo.value.message
    assert list(echolab_run(run.info.run_id).latest_metrics) == ["eval: acc/mean-1.0"]


def test_writes_refused_behind_asynchronous_logging_are_said_on_the_run_page(mlflow_alice, alice_client):
    """TRL logs asynchronously: the client reports a refused batch only in its own log, and the run ended
    FINISHED with nothing stored. The run page says what was refused."""
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        mlflow.log_metrics({"loss": 1.0}, step=0, synchronous=False)
        mlflow.log_metrics({"loss": 0.9, "x": 2.0}, step=-1, synchronous=False)  # a step MLflow takes
        mlflow.log_metrics({"success_rate": 55.0}, step=1, synchronous=False)  # a percentage
    stored = echolab_run(run.info.run_id)
    assert list(stored.latest_metrics) == ["loss"]
    html = alice_client.get(f"/runs/{stored.pk}/").content.decode()
    callout = " ".join(html[html.index('id="mlflow-refused"') :].split("</p>")[0].split())
    assert "2 writes from this run's script were refused and not stored, the last at " in callout
    assert "asynchronous logging (TRL's) reports a refusal only in the script's own log" in callout
    assert "metrics[0]." in callout  # the last one's reason (the client's queue sends them in its own order)
    assert stored.mlflow.refused_writes == 2


def test_a_run_whose_writes_were_all_taken_says_nothing_of_refusals(mlflow_alice, alice_client):
    mlflow = mlflow_alice
    with mlflow.start_run() as run:
        mlflow.log_metric("loss", 1.0, step=0)
    stored = echolab_run(run.info.run_id)
    assert 'id="mlflow-refused"' not in alice_client.get(f"/runs/{stored.pk}/").content.decode()


def test_an_experiment_renamed_by_the_client_is_renamed_in_echolab(mlflow_alice, alice):
    mlflow = mlflow_alice
    client = mlflow.MlflowClient()
    experiment_id = client.create_experiment("grpo sweep")
    created = client.get_experiment(experiment_id)
    assert created.last_update_time == created.creation_time
    time.sleep(0.01)
    client.rename_experiment(experiment_id, "grpo sweep (lr)")
    renamed = client.get_experiment(experiment_id)
    assert renamed.name == "grpo sweep (lr)"
    assert renamed.last_update_time > renamed.creation_time  # as MLflow's store moves it on a rename
    assert client.get_experiment_by_name("grpo sweep") is None
    assert (
        ExternalExperiment.objects.get(owner=alice, name="grpo sweep (lr)").experiment.name
        == "grpo sweep (lr)"
    )

    client.create_experiment("taken")
    refusals = [
        (("taken",), "RESOURCE_ALREADY_EXISTS", "experiment 'taken' already exists"),
        (("  ",), "INVALID_PARAMETER_VALUE", "new_name: must not be blank"),
        (("Default",), "INVALID_PARAMETER_VALUE", "new_name: the experiment named 'Default' is id 0"),
    ]
    for (new_name,), code, message in refusals:
        with pytest.raises(mlflow.MlflowException) as excinfo:
            client.rename_experiment(experiment_id, new_name)
        assert excinfo.value.message.startswith(f"{code}: {message}")
    with mlflow.start_run():  # makes the Default experiment, id 0
        pass
    with pytest.raises(mlflow.MlflowException) as excinfo:
        client.rename_experiment("0", "mine")
    assert excinfo.value.message.startswith(
        "INVALID_PARAMETER_VALUE: new_name: the experiment named 'Default' is id 0"
    )
    assert client.get_experiment(experiment_id).name == "grpo sweep (lr)"
    assert client.get_experiment("0").name == "Default"
