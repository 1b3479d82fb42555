"""POST /experiments/estimate: the new-experiment form's time estimate, from step times measured here."""

import math

import pytest

from webapp.experiments.models import Experiment, Run
from webapp.experiments.specs import ExperimentSpec
from webapp.metrics.models import MetricPoint

URL = "/experiments/estimate"


def form(**fields):
    data = {
        "name": "x",
        "env": "frozenlake",
        "env__frozenlake__size": "4",
        "env__frozenlake__frozen_prob": "0.8",
        "model": "tiny",
        "preset": "starpo",
        "steps": "10",
        "seeds": "1",
    }
    data.update(fields)
    return data


def trained_run(owner, seconds, imported=False, env="frozenlake"):
    """A run whose steps 1, 2, ... took `seconds`, after a step 0 of 1,000 s (the first validation and the
    warm-up), which no estimate counts."""
    experiment = Experiment.create_with_runs(
        owner, ExperimentSpec(name="m", env={"name": env, "params": {}}, steps=5)
    )
    if imported:
        Experiment.objects.filter(pk=experiment.pk).update(imported=True)
    run = experiment.runs.get()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    MetricPoint.upsert(
        run.pk, [(step, "time/step_s", value) for step, value in enumerate([1000.0, *seconds])]
    )
    return run


def test_no_measured_run_means_no_estimate(alice_client):
    response = alice_client.post(URL, form(seeds="1,2"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["total_seconds"] is None and [run["seconds"] for run in body["runs"]] == [None, None]
    assert body["text"].startswith("2 runs; no time estimate: none of your runs of model tiny")


def test_only_the_users_own_runs_are_measured(alice, bob, client):
    """Another user's step times told which models others train, and how fast."""
    trained_run(alice, [2.0, 4.0])
    client.force_login(alice)
    assert client.post(URL, form()).json()["runs"][0]["seconds"] == pytest.approx(3.0 * 10)
    client.force_login(bob)
    body = client.post(URL, form()).json()
    assert body["runs"][0]["seconds"] is None and "none of your runs of model tiny" in body["text"]


def test_step_times_of_imported_runs_and_non_finite_values_are_left_out(alice, alice_client):
    trained_run(alice, [2.0, 4.0, math.nan, math.inf])
    trained_run(alice, [100.0, 100.0], imported=True)  # another machine's times
    body = alice_client.post(URL, form(steps="10")).json()
    assert body["runs"][0]["seconds"] == pytest.approx(3.0 * 10)
    assert "from 1 run of model tiny on frozenlake" in body["text"]


def test_the_same_environment_is_preferred_then_the_same_model(alice, alice_client):
    trained_run(alice, [5.0], env="sokoban")
    only_model = alice_client.post(URL, form()).json()
    assert (
        "of model tiny (other environments: none on frozenlake yet) measured here"
        in only_model["runs"][0]["basis"]
    )
    trained_run(alice, [1.0])
    same_env = alice_client.post(URL, form()).json()
    assert same_env["runs"][0]["seconds"] == pytest.approx(1.0 * 10)


def test_runs_of_the_same_algorithm_are_preferred(alice, alice_client):
    """StarPO-S updates on a quarter of the groups: its steps ran 2.6 s where StarPO's took 10 s (a
    tester's bandit runs), and both were estimated alike."""
    starpo = trained_run(alice, [10.0])
    starpo_s = trained_run(alice, [2.5])
    starpo_s.config["algorithm"].update(filter="top_ratio", filter_ratio=0.25)
    starpo_s.save(update_fields=["config"])
    runs = alice_client.post(URL, form(preset="starpo")).json()["runs"]
    assert runs[0]["seconds"] == pytest.approx(10.0 * 10) and "(ppo, filter none)" in runs[0]["basis"]
    runs = alice_client.post(URL, form(preset="starpo-s")).json()["runs"]
    assert runs[0]["seconds"] == pytest.approx(2.5 * 10)
    assert "(ppo, filter top_ratio 0.25)" in runs[0]["basis"]
    runs = alice_client.post(URL, form(preset="grpo")).json()["runs"]  # none measured: says so
    assert "(other algorithms: none with grpo, filter none yet)" in runs[0]["basis"]
    assert starpo.config["algorithm"]["filter"] == "none"


def test_an_invalid_form_answers_its_errors_naming_the_field(alice_client):
    response = alice_client.post(URL, form(steps="-3"))
    assert response.status_code == 200 and "steps" in response.json()["errors"]
    assert "runs" not in response.json()


def test_needs_login_and_post(alice_client):
    assert alice_client.get(URL).status_code == 405
    alice_client.logout()
    assert alice_client.post(URL, form()).status_code == 302


def sized_run(owner, seconds, group_size):
    run = trained_run(owner, [seconds])
    run.config["rollout"]["group_size"] = group_size
    run.save(update_fields=["config"])
    return run


@pytest.mark.parametrize(
    "measured, per_step, how",
    [
        # {group size: seconds a step} of runs trained here, for a run of group size 16; the basis counts
        # the runs it used (of the same size: 1 of the 2)
        (
            {2: 50.0, 16: 3.0},
            3.0,
            "from 1 run of model tiny on frozenlake (ppo, filter none) measured here, of the same rollout size",
        ),
        # 2 s of fixed cost and 0.25 s per group member: 2.5 s at 2, 4 s at 8, so 6 s at 16, where scaling
        # the smaller run in proportion would say 20 s
        (
            {2: 2.5, 8: 4.0},
            6.0,
            "from 2 runs of model tiny on frozenlake (ppo, filter none) measured here, fitted as a fixed cost",
        ),
        # in proportion from one size, saying which way it errs
        ({8: 2.0}, 4.0, "scaled up by rollout size from smaller runs: likely shorter (a step's fixed cost"),
        ({32: 8.0}, 4.0, "scaled down by rollout size from larger runs: likely longer (a step's fixed cost"),
    ],
)
def test_the_step_time_comes_from_runs_of_the_same_size_else_a_fit_else_a_scaling(
    alice, alice_client, measured, per_step, how
):
    for group_size, seconds in measured.items():
        sized_run(alice, seconds, group_size)
    body = alice_client.post(URL, form(overrides="rollout:\n  group_size: 16\n")).json()
    assert body["runs"][0]["seconds"] == pytest.approx(per_step * 10)
    assert how in body["text"]


def test_a_grid_over_models_names_each_unmeasured_model_and_no_single_basis(alice, alice_client):
    from types import SimpleNamespace

    from webapp.experiments.estimate import summary

    measured = trained_run(alice, [2.0])

    def planned(model, label):
        return SimpleNamespace(label=label, config={**measured.config, "model": {"name": model}})

    both_unmeasured = summary([planned("org/a", "a"), planned("org/b", "b"), planned("org/c", "c")], alice)
    assert both_unmeasured["text"] == (
        "3 runs; no time estimate: none of your runs of models org/a, org/b or org/c has measured its step time "
        "on this server yet."
    )
    model = measured.config["model"]["name"]
    mixed = summary([planned(model, "tiny"), planned("org/b", "b")], alice)
    assert mixed["text"] == (
        f"2 runs, about 10s each (2 s a step, from 1 run of model {model} on frozenlake (ppo, filter none) "
        "measured here, of the same rollout size); 1 with no estimate: none of your runs of model org/b has "
        "measured its step time on this server yet."
    )


def test_several_runs_say_their_time_in_all_on_one_worker(alice, alice_client):
    trained_run(alice, [3.0, 3.0])
    body = alice_client.post(URL, form(seeds="1,2,3", steps="20")).json()
    assert body["text"].startswith("3 runs, about 1m 00s each (3 s a step, from 1 run of model tiny")
    assert body["text"].endswith("; 3m 00s in all on one worker.")
    assert body["total_seconds"] == pytest.approx(180.0)


def test_a_slow_step_reads_as_a_whole_number_of_seconds(alice, alice_client):
    trained_run(alice, [1410.6, 1410.6])  # a tester's FrozenLake steps on a busy machine: "1.41e+03 s a step"
    assert "(1,411 s a step, from 1 run" in alice_client.post(URL, form()).json()["text"]


def test_a_hub_model_this_server_has_not_downloaded_is_named(alice_client, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    text = alice_client.post(URL, form(model="Qwen/DoesNotExist-123")).json()["text"]
    assert text.endswith(
        " Qwen/DoesNotExist-123 is not in this server's Hugging Face cache: a worker downloads it when its run "
        "starts, which needs the hub within that worker's reach (else the run fails then)."
    )
    (tmp_path / "models--Qwen--DoesNotExist-123").mkdir()
    assert "cache" not in alice_client.post(URL, form(model="Qwen/DoesNotExist-123")).json()["text"]
    assert "cache" not in alice_client.post(URL, form()).json()["text"]  # tiny is built here


def test_runs_too_short_for_a_collapse_are_warned_of(alice_client):
    from diagnostics.detector import fewest_steps_for_a_collapse

    needs = fewest_steps_for_a_collapse()
    text = alice_client.post(URL, form(steps=str(needs - 1))).json()["text"]
    assert text.endswith(
        f" Runs of {needs - 1} steps are too short for the detector to call a collapse: it needs at least "
        f"{needs} logged steps (warnings still count)."
    )
    assert "too short" not in alice_client.post(URL, form(steps=str(needs))).json()["text"]
    rule_off = form(steps="3", detector_overrides="collapse:\n  enabled: false\n")
    assert "too short" not in alice_client.post(URL, rule_off).json()["text"]


def test_runs_on_different_bases_name_each_basis_after_its_runs(alice, alice_client):
    from types import SimpleNamespace

    from webapp.experiments import estimate

    fast, slow = trained_run(alice, [2.0]), trained_run(alice, [5.0], env="bandit")

    def planned(measured, label):
        return SimpleNamespace(label=label, config=measured.config)

    text = estimate.summary([planned(fast, "fl-1"), planned(slow, "b-1"), planned(fast, "fl-2")], alice)[
        "text"
    ]
    model = fast.config["model"]["name"]
    assert text.startswith(
        f"3 runs, about 10s to 25s each ('fl-1', 'fl-2': 2 s a step, from 1 run of model {model} on frozenlake "
    )
    assert f"; 'b-1': 5 s a step, from 1 run of model {model} on bandit " in text
    # many bases: the first ones named, the rest counted
    runs = [planned(fast, f"fl-{i}") for i in range(5)] + [planned(slow, "b-1")]
    many = [estimate.RunEstimate(run.label, 1.0, f"basis {i}", model) for i, run in enumerate(runs)]
    assert estimate._bases(many) == (
        "'fl-0': basis 0; 'fl-1': basis 1; 'fl-2': basis 2; 'fl-3': basis 3; 2 other bases for the other runs"
    )
    same = [estimate.RunEstimate(f"r{i}", 1.0, "basis", model) for i in range(5)]
    assert estimate._bases(same) == "basis"
    other = estimate.RunEstimate("o", 1.0, "other", model)
    assert estimate._bases([*same, other]) == "'r0', 'r1', 'r2' and 2 more: basis; 'o': other"


def test_a_hub_warm_start_this_server_has_not_downloaded_is_named_too(alice_client, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    text = alice_client.post(URL, form(warm_start="someone/sft-bandit")).json()["text"]
    assert " someone/sft-bandit is not in this server's Hugging Face cache: a worker downloads it" in text


def test_runs_already_queued_are_said_to_start_first(alice, bob, alice_client):
    trained_run(alice, [3.0, 3.0])
    assert "already queued" not in alice_client.post(URL, form()).json()["text"]
    Experiment.create_with_runs(
        bob, ExperimentSpec(name="b", env={"name": "bandit", "params": {}}, seeds=[1, 2])
    )
    text = alice_client.post(URL, form()).json()["text"]
    assert text.endswith(" 2 runs already queued start before these.")  # anyone's: the queue is one
