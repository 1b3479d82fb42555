"""A warm start (e.g. an SFT model folder) in the form and the API: checked like the model field, kept in
the run's config as model.warm_start, while model.name still picks the tiny profile."""

import json

import pytest
from django.urls import reverse

from tests.factories import make_model_folder
from tests.helpers import post_with_token
from tests.webapp.forms import experiment_post
from trainer.config import TrainConfig
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Experiment, Run


@pytest.fixture
def model_root(tmp_path, settings):
    root = tmp_path / "models"
    make_model_folder(root / "sft-frozenlake")
    settings.MODEL_ROOT = root
    return root


def test_form_warm_start_inside_model_root_reaches_the_run_config(alice_client, model_root):
    response = alice_client.post(reverse("experiment_new"), experiment_post(warm_start="sft-frozenlake"))
    assert response.status_code == 302
    config = Run.objects.get().config
    assert config["model"] == {
        **config["model"],
        "name": "tiny",
        "warm_start": str(model_root / "sft-frozenlake"),
    }
    assert config["optim"]["actor_lr"] == 5e-4  # the tiny profile still applies

    rerun = alice_client.get(reverse("experiment_rerun", args=[Experiment.objects.get().pk]))
    initial = rerun.context["form"].initial
    assert initial["warm_start"] == "sft-frozenlake" and "warm_start" not in initial["overrides"]


@pytest.mark.parametrize(
    "value, message",
    [
        ("../outside", "MODEL_ROOT"),
        ("./nothing-here", "no model folder"),
        # a bare name that is no folder here: a folder mistyped, not a hub checkpoint (those are org/name)
        (
            "nonexistent_folder",
            "there is no model folder 'nonexistent_folder' inside MODEL_ROOT (a warm start",
        ),
    ],
)
def test_form_rejects_a_warm_start_outside_or_missing(alice_client, model_root, value, message):
    response = alice_client.post(reverse("experiment_new"), experiment_post(warm_start=value))
    assert response.status_code == 400
    assert message in " ".join(response.context["form"].errors["warm_start"])
    assert Experiment.objects.count() == 0


def test_api_warm_start_goes_through_the_same_checks(client, alice, model_root):
    _, plain = ApiToken.issue(alice, "tests")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {plain}"}
    body = {
        "name": "warm",
        "preset": "starpo-s",
        "env": {"name": "frozenlake"},
        "steps": 2,
        "overrides": {"model": {"warm_start": "../../etc"}},
    }

    def post():
        return client.post(
            reverse("api_experiments"), json.dumps(body), content_type="application/json", **headers
        )

    response = post()
    assert response.status_code == 400
    assert "model.warm_start" in response.json()["errors"]["overrides"]
    body["overrides"]["model"]["warm_start"] = "sft-frozenlake"
    response = post()
    assert response.status_code == 201, response.json()
    assert Run.objects.get().config["model"]["warm_start"] == str(model_root / "sft-frozenlake")


@pytest.mark.browser
def test_the_form_shows_the_warm_start_field_and_its_error(page, tmp_path):
    page.goto(f"{page.base}{reverse('experiment_new')}")
    field = page.locator("#field-warm_start")
    assert field.is_visible()
    assert "Warm start" in field.inner_text() and "python -m trainer sft" in field.inner_text()
    page.fill("input[name=name]", "warm")
    page.fill("input[name=warm_start]", "./not-there")
    page.click("#create-experiment")
    page.locator("#field-warm_start .errorlist").wait_for()
    assert "no model folder './not-there' inside MODEL_ROOT" in field.inner_text()
    field.screenshot(path=str(tmp_path / "warm_start_field.png"))


@pytest.mark.parametrize(
    "where",
    [
        {"grid": {"model.warm_start": ["/etc"]}},
        {"config": {"model": {"name": "tiny", "warm_start": "/etc"}}},
    ],
)
def test_a_warm_start_from_a_grid_or_a_complete_config_is_checked_too(client, alice, model_root, where):
    if "config" in where:  # a complete config, with the warm start given
        config = TrainConfig.preset("starpo-s", env={"name": "bandit", "params": {}}).to_dict()
        where = {"config": {**config, "model": {**config["model"], **where["config"]["model"]}}}
    body = {"name": "warm", **where}
    if "config" not in where:
        body.update(preset="starpo-s", env={"name": "bandit"}, steps=2)
    response = post_with_token(client, alice, reverse("api_experiments"), body)
    assert response.status_code == 400, response.json()
    assert "no model folder '/etc' inside MODEL_ROOT" in response.json()["error"]
    assert Experiment.objects.count() == 0
