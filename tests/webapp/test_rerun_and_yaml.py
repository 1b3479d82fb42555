"""Re-run with changes (the form prefilled from an experiment or a run), YAML export and import."""

import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.factories import make_experiment, spec_experiment
from tests.helpers import post_with_token
from trainer.config import TrainConfig
from webapp.experiments.models import Experiment


def _resubmit(client, form):
    """Post a prefilled new-experiment form as a browser would send it, unchanged."""
    data = {name: form[name].value() for name in form.fields if not form.fields[name].disabled}
    data = {key: value for key, value in data.items() if value not in (None, False)}
    data = {key: ("on" if value is True else value) for key, value in data.items()}
    return client.post(reverse("experiment_new"), data)


def _sweep(owner):
    return spec_experiment(
        owner,
        preset="starpo-s",
        description="lr sweep",
        seeds=[1, 2],
        grid={"algorithm.filter_ratio": [0.25, 0.5]},
        overrides={"rollout": {"group_size": 4}, "algorithm": {"kl_coef": 0.01}},
        detector_overrides={"grad_spike": {"tolerance": 5.0}},
        alert_recipients=["team@example.com"],
        alert_on_warnings=True,
        env={"name": "frozenlake", "params": {"size": 5, "frozen_prob": 0.8, "slippery": False, "map": ""}},
    )


def _runs(experiment):
    return {run.label: run.config for run in experiment.runs.all()}


def test_rerun_prefills_the_form_and_resubmitting_reproduces_the_configs(alice_client, alice):
    source = _sweep(alice)
    form = alice_client.get(reverse("experiment_rerun", args=[source.pk])).context["form"]
    initial = form.initial
    assert initial["preset"] == "starpo-s" and initial["seeds"] == "1, 2"
    assert initial["grid"] == "algorithm.filter_ratio = 0.25, 0.5"
    overrides = yaml.safe_load(initial["overrides"])
    assert overrides == {"rollout": {"group_size": 4}, "algorithm": {"kl_coef": 0.01}}
    assert initial["env__frozenlake__size"] == 5 and initial["env__frozenlake__slippery"] is False

    response = _resubmit(alice_client, form)
    assert response.status_code == 302, response.context["form"].errors
    copy = Experiment.objects.exclude(pk=source.pk).get()
    assert copy.detector_overrides == source.detector_overrides
    assert _runs(copy) == _runs(source)


def test_a_runs_rerun_is_that_run_alone(alice_client, alice):
    source = _sweep(alice)
    run = source.runs.get(label="seed=2 algorithm.filter_ratio=0.5")
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert f'href="{reverse("run_rerun", args=[run.pk])}">Re-run<' in page
    form = alice_client.get(reverse("run_rerun", args=[run.pk])).context["form"]
    assert form.initial["seeds"] == "2" and form.initial["grid"] == ""
    assert form.initial["name"] == "FrozenLake test / seed=2 algorithm.filter_ratio=0.5 (re-run)"
    response = _resubmit(alice_client, form)
    assert response.status_code == 302, response.context["form"].errors
    copy = Experiment.objects.exclude(pk=source.pk).get()
    assert [run.config for run in copy.runs.all()] == [run.config]
    assert alice_client.get(reverse("run_rerun", args=[run.pk + 100])).status_code == 404


def test_export_imports_back_as_the_same_experiment(alice_client, alice):
    source = _sweep(alice)
    response = alice_client.get(reverse("experiment_export", args=[source.pk]))
    assert response["Content-Disposition"] == 'attachment; filename="frozenlake-test.yaml"'
    text = response.content.decode()
    exported = yaml.safe_load(text)
    assert exported["seeds"] == [1, 2] and exported["grid"] == {"algorithm.filter_ratio": [0.25, 0.5]}
    # Made from a preset: written as the form shows it, the preset and what the experiment changed.
    assert (exported["preset"], exported["model"], exported["steps"]) == (
        "starpo-s",
        "tiny",
        source.config["schedule"]["steps"],
    )
    assert exported["overrides"] == {"rollout": {"group_size": 4}, "algorithm": {"kl_coef": 0.01}}
    assert "config" not in exported

    upload = SimpleUploadedFile("sweep.yaml", text.encode(), content_type="application/x-yaml")
    form = alice_client.post(reverse("experiment_import"), {"file": upload}).context["form"]
    assert form.initial["seeds"] == "1, 2" and form.initial["alert_recipients"] == "team@example.com"
    response = _resubmit(alice_client, form)
    assert response.status_code == 302, response.context["form"].errors
    copy = Experiment.objects.exclude(pk=source.pk).get()
    assert _runs(copy) == _runs(source)
    assert (copy.name, copy.description, copy.grid, copy.seeds) == (
        source.name,
        source.description,
        source.grid,
        source.seeds,
    )
    assert (copy.detector_overrides, copy.alert_recipients, copy.alert_on_warnings) == (
        source.detector_overrides,
        source.alert_recipients,
        True,
    )


def test_export_is_what_the_api_creates_from(client, alice_client, alice):
    source = _sweep(alice)
    text = alice_client.get(reverse("experiment_export", args=[source.pk])).content.decode()
    comments = "".join(line for line in text.splitlines() if line.startswith("#"))
    assert "`config`" not in comments and "`preset`, `env`, `model`" in comments  # says what the file holds
    exported = yaml.safe_load(text)
    response = post_with_token(client, alice, reverse("api_experiments"), exported)
    assert response.status_code == 201, response.json()
    assert _runs(Experiment.objects.get(pk=response.json()["id"])) == _runs(source)


def test_an_experiment_yaml_with_a_problem_names_it(alice_client):
    text = "seeds: [1, two]\nconfig: {env: {name: bandit}}\n"
    response = alice_client.post(reverse("experiment_import"), {"text": text})
    assert response.status_code == 400
    assert "seeds:" in " ".join(response.context["import_form"].errors["text"])
    text = "name: hand-written\nseeds: [3]\nenv: {name: bandit}\nsteps: 7\nmodel: tiny\n"
    form = alice_client.post(reverse("experiment_import"), {"text": text}).context["form"]
    assert (form.initial["name"], form.initial["seeds"], form.initial["steps"]) == ("hand-written", "3", 7)
    assert Experiment.objects.count() == 0


def test_pasted_yaml_import(alice_client):
    text = "env: {name: bandit}\nrollout: {group_size: 2}\nseed: 7\n"
    response = alice_client.post(reverse("experiment_import"), {"text": text})
    form = response.context["form"]
    assert response.status_code == 200 and form.initial["env"] == "bandit"
    assert form.initial["seeds"] == "7"
    # A few sections are the settings to change: overrides on the default preset (with the tiny
    # model's profile), not every dataclass default written out as an override.
    assert yaml.safe_load(form.initial["overrides"]) == {"rollout": {"group_size": 2}}
    assert form.initial["preset"] == "starpo"

    # Without env or seed, the form keeps its own (its first environment and seed 1, not the trainer's seed 0).
    response = alice_client.post(reverse("experiment_import"), {"text": "algorithm:\n  filter_ratio: 0.5\n"})
    form = response.context["form"]
    assert (form.initial["env"], form.initial["seeds"]) == ("bandit", "1")
    assert yaml.safe_load(form.initial["overrides"]) == {"algorithm": {"filter_ratio": 0.5}}


def test_an_import_keeps_what_was_typed_in_the_form(alice_client):
    typed = {
        "name": "typed name to keep",
        "description": "why",
        "env": "bandit",
        "preset": "grpo",
        "seeds": "4, 5",
    }
    failed = alice_client.post(reverse("experiment_import"), {**typed, "text": "algorithm: [oops"})
    assert failed.status_code == 400 and "not valid YAML" in " ".join(
        failed.context["import_form"].errors["text"]
    )
    assert {name: failed.context["form"].initial[name] for name in typed} == typed
    page = failed.content.decode()
    assert 'value="typed name to keep"' in page and '<option value="bandit" selected>' in page

    # A few settings apply to the form as it was: its environment, preset and seeds, and keep its name.
    form = alice_client.post(
        reverse("experiment_import"), {**typed, "text": "algorithm: {filter_ratio: 0.5}"}
    )
    initial = form.context["form"].initial
    assert {name: initial[name] for name in typed} == typed
    assert yaml.safe_load(initial["overrides"]) == {"algorithm": {"filter_ratio": 0.5}}

    # and keeps its steps, its overrides (joined with the file's) and an unticked box.
    more = {"steps": "77", "overrides": "optim: {actor_lr: 0.01}\nalgorithm: {filter_ratio: 0.25}"}
    text = "algorithm: {filter_ratio: 0.5}"
    initial = (
        alice_client.post(reverse("experiment_import"), {**typed, **more, "text": text})
        .context["form"]
        .initial
    )
    assert initial["steps"] == "77" and initial["alert_on_warnings"] is False
    assert yaml.safe_load(initial["overrides"]) == {
        "optim": {"actor_lr": 0.01},
        "algorithm": {"filter_ratio": 0.5},
    }
    refused = alice_client.post(reverse("experiment_import"), {"env": "frozenlake", "text": "env: [oops"})
    assert refused.context["form"].initial["env__frozenlake__slippery"] is False  # unticked, not its default


def test_a_hand_written_experiment_of_a_few_fields_keeps_the_rest_as_typed(alice_client):
    """A tester's `name` and `seeds` alone were refused ("env: required") though the form had bandit."""
    typed = {
        "name": "typed",
        "env": "bandit",
        "preset": "grpo",
        "steps": "33",
        "overrides": "optim: {actor_lr: 0.01}",
    }
    response = alice_client.post(
        reverse("experiment_import"), {**typed, "text": "name: Only name\nseeds: [1, 2]\n"}
    )
    assert response.status_code == 200, response.context["import_form"].errors
    initial = response.context["form"].initial
    assert (initial["name"], initial["seeds"]) == ("Only name", "1, 2")  # what the file sets
    assert (initial["env"], initial["preset"], initial["steps"]) == (
        "bandit",
        "grpo",
        "33",
    )  # the rest, typed
    assert yaml.safe_load(initial["overrides"]) == {"optim": {"actor_lr": 0.01}}

    # What it names replaces what was typed, its environment's fields with it.
    text = "seeds: [3]\nenv: {name: frozenlake, params: {size: 4}}\n"
    initial = alice_client.post(reverse("experiment_import"), {**typed, "text": text}).context["form"].initial
    assert (initial["env"], initial["env__frozenlake__size"], initial["preset"]) == ("frozenlake", 4, "grpo")

    # Sent alone (a script, nothing typed): still refused, naming the field.
    alone = alice_client.post(reverse("experiment_import"), {"text": "name: Only name\nseeds: [1]\n"})
    assert alone.status_code == 400 and "env:" in " ".join(alone.context["import_form"].errors["text"])


def test_a_whole_config_imports_as_it_is(alice_client):
    config = TrainConfig.preset("grpo", env={"name": "bandit"}).to_dict()
    config["optim"]["actor_lr"] = 1e-6
    response = alice_client.post(reverse("experiment_import"), {"text": yaml.safe_dump(config)})
    form = response.context["form"]
    assert response.status_code == 200 and form.initial["preset"] == "grpo"
    assert yaml.safe_load(form.initial["overrides"]) == {"optim": {"actor_lr": 1e-6}}


def test_bad_yaml_import_is_reported_on_the_field(alice_client):
    response = alice_client.post(reverse("experiment_import"), {"text": "env: [unclosed"})
    assert response.status_code == 400
    assert "not valid YAML" in " ".join(response.context["import_form"].errors["text"])
    response = alice_client.post(reverse("experiment_import"), {"text": "rollout: {group_size: zero}"})
    assert "rollout.group_size" in " ".join(response.context["import_form"].errors["text"])
    response = alice_client.post(reverse("experiment_import"), {"text": "rollout: {group_size: 99999}"})
    assert "rollout.group_size: 99999 is above this server's limit of 64" in " ".join(
        response.context["import_form"].errors["text"]
    )
    upload = SimpleUploadedFile("x.yaml", b"\xff\xfe", content_type="application/x-yaml")
    response = alice_client.post(reverse("experiment_import"), {"file": upload})
    assert "not UTF-8" in " ".join(response.context["import_form"].errors["file"])
    assert Experiment.objects.count() == 0


def test_rerun_and_export_of_an_experiment_without_a_trainer_config(alice_client, alice):
    # Imported metrics files make experiments whose config is not a trainer config.
    experiment = make_experiment(alice, "uploaded", imported=True)
    run = experiment.runs.create(label="uploaded", config={})
    said = f"Experiment {experiment.pk} was trained elsewhere: it has no trainer config to"
    for url in (reverse("experiment_rerun", args=[experiment.pk]), reverse("run_rerun", args=[run.pk])):
        response = alice_client.get(url, follow=True)  # its page, saying why: a 404 said it was not found
        assert response.redirect_chain == [(experiment.get_absolute_url(), 302)]
        assert f"{said} re-run." in response.content.decode()
    response = alice_client.get(reverse("experiment_export", args=[experiment.pk]), follow=True)
    assert f"{said} export." in response.content.decode()
    assert alice_client.get(experiment.get_absolute_url()).status_code == 200
    assert alice_client.get("/").status_code == 200


def test_a_grid_over_presets_gives_each_run_its_own_preset(alice_client, alice):
    source = spec_experiment(alice, preset="starpo", grid={"preset": ["starpo", "starpo-s"]}, seeds=[1])
    assert {run.label: run.preset for run in source.runs.all()} == {
        "seed=1 preset=starpo": "starpo",
        "seed=1 preset=starpo-s": "starpo-s",
    }
    run = source.runs.get(preset="starpo-s")
    form = alice_client.get(reverse("run_rerun", args=[run.pk])).context["form"]
    assert form.initial["preset"] == "starpo-s" and form.initial["overrides"] == ""
    listed = alice_client.get("/api/runs", {"sort": "preset"}).json()["results"]
    assert [(run["label"], run["preset"]) for run in listed] == [
        ("seed=1 preset=starpo", "starpo"),
        ("seed=1 preset=starpo-s", "starpo-s"),
    ]
    assert "starpo vs starpo-s" in alice_client.get("/").content.decode()


def test_a_grid_over_presets_exports_and_comes_back(client, alice_client, alice):
    source = spec_experiment(
        alice,
        preset="starpo",
        seeds=[1],
        grid={"preset": ["starpo", "starpo-s"]},
        overrides={"optim": {"actor_lr": 0.0005}},
        env={"name": "bandit", "params": {}},
    )
    text = alice_client.get(reverse("experiment_export", args=[source.pk])).content.decode()
    comments = "".join(line for line in text.splitlines() if line.startswith("#"))
    assert "`config`" not in comments and "`preset`, `env`, `model`" in comments  # says what the file holds
    exported = yaml.safe_load(text)
    response = post_with_token(client, alice, reverse("api_experiments"), exported)
    assert response.status_code == 201, response.json()
    copy = Experiment.objects.get(pk=response.json()["id"])
    assert _runs(copy) == _runs(source)
    assert [run.preset for run in copy.runs.order_by("pk")] == ["starpo", "starpo-s"]


def test_an_experiment_from_a_complete_config_exports_that_config(alice_client, alice):
    config = TrainConfig.preset("grpo", env={"name": "bandit", "params": {}}).to_dict()
    source = spec_experiment(alice, config=config, seeds=[3])
    text = alice_client.get(reverse("experiment_export", args=[source.pk])).content.decode()
    assert "# `config` is the first run's complete trainer config" in text
    exported = yaml.safe_load(text)
    # Its config part is a trainer config as `python -m trainer train --config` reads it.
    assert TrainConfig.from_dict(exported["config"]).to_dict() == source.config
    assert "preset" not in exported and "overrides" not in exported
