"""Re-run with changes (the form prefilled from an experiment), YAML export and import."""

import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.factories import make_experiment, spec_experiment
from trainer.config import TrainConfig
from webapp.experiments.models import Experiment


def test_rerun_prefills_the_form_and_resubmitting_reproduces_the_configs(alice_client, alice):
    params = {"size": 5, "frozen_prob": 0.8, "slippery": False, "map": ""}
    source = spec_experiment(
        alice,
        preset="starpo-s",
        seeds=[1, 2],
        grid={"algorithm.filter_ratio": [0.25, 0.5]},
        overrides={"rollout": {"group_size": 4}, "algorithm": {"kl_coef": 0.01}},
        detector_overrides={"grad_spike": {"tolerance": 5.0}},
        env={"name": "frozenlake", "params": params},
    )
    form = alice_client.get(reverse("experiment_rerun", args=[source.pk])).context["form"]
    initial = form.initial
    assert initial["preset"] == "starpo-s" and initial["seeds"] == "1, 2"
    assert initial["grid"] == "algorithm.filter_ratio = 0.25, 0.5"
    overrides = yaml.safe_load(initial["overrides"])
    assert overrides == {"rollout": {"group_size": 4}, "algorithm": {"kl_coef": 0.01}}
    assert initial["env__frozenlake__size"] == 5 and initial["env__frozenlake__slippery"] is False

    data = {name: form[name].value() for name in form.fields if not form.fields[name].disabled}
    data = {key: value for key, value in data.items() if value not in (None, False)}
    data = {key: ("on" if value is True else value) for key, value in data.items()}
    response = alice_client.post(reverse("experiment_new"), data)
    assert response.status_code == 302, response.context["form"].errors
    copy = Experiment.objects.exclude(pk=source.pk).get()
    assert copy.detector_overrides == source.detector_overrides
    original = {run.label: run.config for run in source.runs.all()}
    assert {run.label: run.config for run in copy.runs.all()} == original


def test_export_is_a_trainer_yaml_that_imports_back(alice_client, alice):
    experiment = spec_experiment(alice, preset="grpo", overrides={"algorithm": {"entropy_coef": 0.02}})
    response = alice_client.get(reverse("experiment_export", args=[experiment.pk]))
    assert response["Content-Disposition"] == 'attachment; filename="frozenlake-test.yaml"'
    text = response.content.decode()
    assert TrainConfig.from_yaml(text).to_dict() == experiment.config

    upload = SimpleUploadedFile("config.yaml", text.encode(), content_type="application/x-yaml")
    form = alice_client.post(reverse("experiment_import"), {"file": upload}).context["form"]
    assert form.initial["preset"] == "grpo"
    assert yaml.safe_load(form.initial["overrides"]) == {"algorithm": {"entropy_coef": 0.02}}
    assert form.initial["env"] == "frozenlake"


def test_pasted_yaml_import(alice_client):
    text = "env: {name: bandit}\nrollout: {group_size: 2}\n"
    response = alice_client.post(reverse("experiment_import"), {"text": text})
    form = response.context["form"]
    assert response.status_code == 200 and form.initial["env"] == "bandit"
    # A config without a model trains the tiny model with the dataclass defaults, not the tiny
    # profile's: the overrides say so, field by field.
    overrides = yaml.safe_load(form.initial["overrides"])
    assert overrides["rollout"]["group_size"] == 2
    assert overrides["optim"]["actor_lr"] == 1e-6 and overrides["rollout"]["val_seeds"] == 256


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
    assert alice_client.get(reverse("experiment_rerun", args=[experiment.pk])).status_code == 200
    assert alice_client.get(reverse("experiment_export", args=[experiment.pk])).status_code == 200
    assert alice_client.get(experiment.get_absolute_url()).status_code == 200
    assert alice_client.get("/").status_code == 200
