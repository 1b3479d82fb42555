"""The model field: "tiny", a hub id, or a folder that must resolve inside MODEL_ROOT."""

import pytest
from django.urls import reverse

from tests.webapp.forms import experiment_post
from webapp.experiments.models import Experiment


@pytest.fixture
def model_root(tmp_path, settings):
    root = tmp_path / "models"
    (root / "my-model").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    settings.MODEL_ROOT = root
    return root


@pytest.mark.parametrize("value", ["../../etc", "../outside", "/etc", "my-model/../../outside", "~/x"])
def test_paths_outside_model_root_are_rejected_on_the_field(alice_client, model_root, value):
    response = alice_client.post(reverse("experiment_new"), experiment_post(model=value))
    assert response.status_code == 200
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
    assert "outside it" in " ".join(response.context["form"].errors["model"])
