"""The model field: "tiny", a hub id, or a folder that must resolve inside MODEL_ROOT."""

import json

import pytest
from django.urls import reverse

from tests.factories import make_model_folder
from tests.webapp.forms import experiment_post
from trainer.config import TrainConfig
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Experiment
from webapp.experiments.spec_parsing import resolve_model


@pytest.fixture
def model_root(tmp_path, settings):
    root = tmp_path / "models"
    make_model_folder(root / "my-model")
    (tmp_path / "outside").mkdir()
    settings.MODEL_ROOT = root
    settings.CHECKPOINT_ROOT = tmp_path / "checkpoints"
    return root


@pytest.fixture
def api(alice):
    _, plain = ApiToken.issue(alice, "tests")
    return {"HTTP_AUTHORIZATION": f"Bearer {plain}"}


def post_experiment(client, api, body):
    return client.post(reverse("api_experiments"), json.dumps(body), content_type="application/json", **api)


def complete_config(model="tiny"):
    return TrainConfig.preset("grpo", env={"name": "bandit"}, model={"name": model}).to_dict()


@pytest.mark.parametrize("value", ["../../etc", "../outside", "/etc", "my-model/../../outside", "~/x"])
def test_paths_outside_model_root_are_rejected_on_the_field(alice_client, model_root, value):
    response = alice_client.post(reverse("experiment_new"), experiment_post(model=value))
    assert response.status_code == 400
    errors = " ".join(response.context["form"].errors["model"])
    assert "MODEL_ROOT" in errors
    assert Experiment.objects.count() == 0


def test_missing_folder_inside_model_root_is_rejected(alice_client, model_root):
    response = alice_client.post(reverse("experiment_new"), experiment_post(model="./nothing-here"))
    assert "no model folder" in " ".join(response.context["form"].errors["model"])


@pytest.mark.parametrize("value", ["my-model", "./my-model", "{root}/my-model"])
def test_folder_inside_model_root_is_accepted_as_an_absolute_path(alice_client, model_root, value):
    model = value.format(root=model_root)
    response = alice_client.post(reverse("experiment_new"), experiment_post(model=model))
    assert response.status_code == 302
    assert Experiment.objects.get().config["model"]["name"] == str(model_root / "my-model")


def test_symlink_escaping_model_root_is_rejected(alice_client, model_root, tmp_path):
    (model_root / "sneaky").symlink_to(tmp_path / "outside")
    response = alice_client.post(reverse("experiment_new"), experiment_post(model="sneaky"))
    assert "no model folder 'sneaky' inside MODEL_ROOT" in " ".join(response.context["form"].errors["model"])


@pytest.mark.parametrize("value", ["/etc", "../../etc", "/root/.ssh", "../outside", "{root}/../outside"])
def test_a_complete_config_goes_through_the_same_resolver(client, api, model_root, value):
    body = {"name": "escape", "config": complete_config(value.format(root=model_root))}
    response = post_experiment(client, api, body)
    assert response.status_code == 400, response.json()
    assert "no model folder" in response.json()["errors"]["config.model.name"]
    assert Experiment.objects.count() == 0


def test_a_grid_over_model_name_in_config_mode_goes_through_the_resolver(client, api, model_root):
    body = {"name": "escape", "config": complete_config(), "grid": {"model.name": ["my-model", "/etc"]}}
    response = post_experiment(client, api, body)
    assert response.status_code == 400
    assert response.json()["errors"]["grid"].startswith("model.name = /etc: there is no model folder")
    assert Experiment.objects.count() == 0


def test_a_grid_over_model_name_resolves_local_folders_to_absolute_paths(client, api, model_root):
    body = {"name": "two", "config": complete_config(), "grid": {"model.name": ["tiny", "my-model"]}}
    assert post_experiment(client, api, body).status_code == 201
    names = sorted(Experiment.objects.get().runs.values_list("config__model__name", flat=True))
    assert names == sorted(["tiny", str(model_root / "my-model")])


def test_errors_do_not_tell_whether_a_path_outside_model_root_exists(client, api, model_root, tmp_path):
    messages = []
    for value in (str(tmp_path / "outside"), str(tmp_path / "nowhere"), "../outside", "../nowhere"):
        errors = post_experiment(client, api, {"name": "x", "env": {"name": "bandit"}, "model": value}).json()
        messages.append(errors["errors"]["model"].replace(value, "VALUE"))
    assert len(set(messages)) == 1, messages


@pytest.mark.parametrize("value", ["./", ".", "{root}", "my-model/.."])
def test_model_root_itself_is_not_a_model_folder(alice_client, model_root, value):
    model = value.format(root=model_root)
    response = alice_client.post(reverse("experiment_new"), experiment_post(model=model))
    assert "no model folder" in " ".join(response.context["form"].errors["model"])
    assert Experiment.objects.count() == 0


def test_checkpoint_folders_are_never_loadable(client, api, model_root, settings):
    """An operator who keeps checkpoints inside MODEL_ROOT still cannot have one run load another's."""
    settings.CHECKPOINT_ROOT = model_root / "checkpoints"
    (model_root / "checkpoints" / "7" / "step-3").mkdir(parents=True)
    for value in ("checkpoints/7/step-3", "checkpoints", str(model_root / "checkpoints" / "7")):
        response = post_experiment(client, api, {"name": "x", "config": complete_config(value)})
        assert "no model folder" in response.json()["errors"]["config.model.name"], value
    assert Experiment.objects.count() == 0


def test_a_folder_that_is_no_saved_model_is_refused_before_anything_is_queued(model_root):
    # A tester's warm start "broken" (a config.json, no tokenizer) was queued and failed on the worker.
    (model_root / "broken").mkdir()
    (model_root / "broken" / "config.json").write_text("{}")
    with pytest.raises(
        ValueError, match="'broken' in MODEL_ROOT is not a saved model: it needs config.json and a tokenizer"
    ):
        resolve_model("broken")


def test_a_name_one_letter_off_a_model_here_is_a_typo_unless_the_hub_cache_has_it(
    client, api, model_root, tmp_path, monkeypatch
):
    """'tinyy' was queued with a hub model's settings and failed a minute later on a worker."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    body = {"name": "typo", "env": {"name": "bandit"}, "preset": "grpo", "model": "tinyy", "seeds": [1]}
    response = post_experiment(client, api, body)
    assert response.status_code == 400 and response.json()["errors"] == {
        "model": "'tinyy' is no model here and not in this machine's Hugging Face cache; did you mean 'tiny'?"
    }
    with pytest.raises(ValueError, match="did you mean 'my-model'"):
        resolve_model("my-modle")
    assert Experiment.objects.count() == 0
    (tmp_path / "hub" / "models--tinyy").mkdir(parents=True)  # a real hub model of that name, downloaded
    assert resolve_model("tinyy") == "tinyy"
    assert resolve_model("gpt2") == "gpt2" and resolve_model("org/tinyy") == "org/tinyy"  # nothing near
