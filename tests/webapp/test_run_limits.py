"""Every size a run's config sets has an upper bound an operator can change (settings.RUN_LIMITS, from
LIMIT_<NAME>); more is a 400 naming the field and the limit, and integers beyond 64 bits are never stored."""

import json

import pytest
from django.urls import reverse

from tests.webapp.forms import experiment_post
from trainer.config import TrainConfig
from webapp import environment
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Experiment, Run


@pytest.fixture
def api(alice):
    _, plain = ApiToken.issue(alice, "tests")
    return {"HTTP_AUTHORIZATION": f"Bearer {plain}"}


def post(client, api, body):
    if not isinstance(body, (str, bytes)):
        body = json.dumps(body)
    return client.post(reverse("api_experiments"), body, content_type="application/json", **api)


def preset_body(**overrides):
    return {"name": "big", "env": {"name": "bandit"}, "model": "tiny", "overrides": overrides}


@pytest.mark.parametrize(
    "overrides, field, limit",
    [
        ({"rollout": {"group_size": 10**9}}, "rollout.group_size", 64),
        ({"rollout": {"env_groups": 10**9}}, "rollout.env_groups", 256),
        ({"rollout": {"max_new_tokens": 10**9}}, "rollout.max_new_tokens", 8192),
        ({"rollout": {"val_seeds": 10**9}}, "rollout.val_seeds", 4096),
        ({"schedule": {"samples_per_step": 10**9}}, "schedule.samples_per_step", 256),
        ({"rollout": {"max_turns": 10**6}}, "rollout.max_turns", 50),
    ],
)
def test_sizes_above_the_limit_are_refused_naming_field_and_limit(client, api, overrides, field, limit):
    response = post(client, api, preset_body(**overrides))
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert f"limit of {limit}" in errors[field] and environment.limit_variable(field) in errors[field]
    assert list(errors) == [field]  # not also the token product, blamed on max_new_tokens the user left alone
    assert not Experiment.objects.exists() and not Run.objects.exists()


def test_the_product_of_groups_group_size_turns_and_tokens_is_bounded(client, api):
    body = preset_body(rollout={"env_groups": 256, "group_size": 64, "max_turns": 50, "max_new_tokens": 8192})
    response = post(client, api, body)
    assert response.status_code == 400
    message = response.json()["errors"]["rollout.max_new_tokens"]
    assert "env_groups x group_size x max_turns x max_new_tokens" in message
    assert "LIMIT_ROLLOUT_TOKENS" in message


def test_a_complete_config_is_bounded_too(client, api):
    config = TrainConfig.preset("grpo", env={"name": "bandit"}).to_dict()
    config["rollout"]["group_size"] = 10**9
    response = post(client, api, {"name": "big", "config": config})
    assert response.status_code == 400
    assert "limit of 64" in response.json()["errors"]["config.rollout.group_size"]


def test_operators_set_limits_in_settings(client, api, settings):
    settings.RUN_LIMITS = {**settings.RUN_LIMITS, "rollout.group_size": 4}
    assert post(client, api, preset_body(rollout={"group_size": 4})).status_code == 201
    response = post(client, api, preset_body(rollout={"group_size": 5}))
    assert "limit of 4" in response.json()["errors"]["rollout.group_size"]


def test_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("LIMIT_GROUP_SIZE", "1024")
    assert environment.limits({"rollout.group_size": 64})["rollout.group_size"] == 1024
    monkeypatch.setenv("LIMIT_GROUP_SIZE", "0")
    with pytest.raises(environment.EnvironmentConfigError, match="LIMIT_GROUP_SIZE: must be >= 1"):
        environment.limits({"rollout.group_size": 64})


@pytest.mark.parametrize(
    "body, field",
    [
        (preset_body(rollout={"group_size": 2**70}), "rollout.group_size"),
        ({"name": "x", "env": {"name": "bandit", "params": {"arms": 2**70}}}, "env.params.arms"),
        (preset_body(algorithm={"kl_coef": 2**64}), "algorithm.kl_coef"),
        ({"name": "x", "env": {"name": "bandit"}, "grid": {"schedule.val_every": [1, 2**63]}}, "grid"),
        (
            {
                "name": "x",
                "env": {"name": "bandit"},
                "detector_overrides": {"grad_spike": {"tolerance": 2**80}},
            },
            "detector_overrides",
        ),
    ],
)
def test_integers_beyond_64_bits_are_refused_and_never_stored(client, api, body, field):
    # keyed as any other problem of the field is: a config field by its name, not by the input holding it
    response = post(client, api, body)
    assert response.status_code == 400, response.content
    assert "64 bits" in response.json()["errors"][field], response.json()
    assert not Experiment.objects.exists()


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "x", "env": {"name": "bandit"}, "seeds": [' + "9" * 5000 + "]}",
        '{"name": "x", "env": {"name": "bandit"}, "overrides": {"rollout": {"group_size": '
        + "9" * 5000
        + "}}}",
        '{"name": "x", "overrides": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"name": "x", "overrides": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}",
    ],
)
def test_huge_literals_and_deep_nesting_are_a_400(client, api, text):
    response = post(client, api, text)
    assert response.status_code == 400
    assert response.json()["error"]
    assert not Experiment.objects.exists()


@pytest.mark.parametrize(
    "overrides",
    [
        "rollout:\n  group_size: 1000000000",
        "rollout:\n  group_size: " + "9" * 5000,
        "a: " + "[" * 5000 + "]" * 5000,
    ],
)
def test_the_form_names_the_overrides_field(alice_client, overrides):
    response = alice_client.post(reverse("experiment_new"), experiment_post(overrides=overrides))
    assert response.status_code == 400
    assert response.context["form"].errors["overrides"]
    assert not Experiment.objects.exists()


def test_a_fixed_frozenlake_map_is_bounded_before_each_run_searches_it(client, api):
    # 300 x 300 tiles (a 90 KB body) in 64 runs held the request for 45 s: each run's config searched the map
    side = 90  # within the 10,000 characters an environment's text takes
    rows = ["S" + "F" * (side - 1), *["F" * side] * (side - 2), "F" * (side - 1) + "G"]
    body = {
        "name": "big map",
        "env": {"name": "frozenlake", "params": {"map": "\n".join(rows)}},
        "model": "tiny",
        "seeds": list(range(64)),
    }
    response = post(client, api, body)
    assert response.status_code == 400
    assert "at most 64" in response.json()["errors"]["env.params.map"]
    assert not Experiment.objects.exists() and not Run.objects.exists()


def test_an_environments_text_is_bounded_before_each_run_parses_it(client, api):
    # A level's 3 MB title line in 64 runs held the request for 36 s: each run's config parsed the level
    level = "T" * 3_000_000 + "\n#####\n#@$.#\n#####"
    body = {"name": "long level", "env": {"name": "sokoban", "params": {"level": level}}, "model": "tiny"}
    response = post(client, api, {**body, "seeds": list(range(64))})
    assert response.status_code == 400
    assert "at most 10,000" in response.json()["errors"]["env.params.level"]
    assert not Experiment.objects.exists() and not Run.objects.exists()


def test_a_fixed_sokoban_level_is_bounded_before_each_run_parses_it(client, api):
    # 99 x 99 (9,899 characters) in 64 runs held the request for 20 s: each run's config parsed it three times
    side = 99
    rows = [
        "#" * side,
        "#@$." + " " * (side - 5) + "#",
        *["#" + " " * (side - 2) + "#"] * (side - 3),
        "#" * side,
    ]
    body = {"name": "big level", "env": {"name": "sokoban", "params": {"level": "\n".join(rows)}}}
    response = post(client, api, {**body, "model": "tiny", "seeds": list(range(64))})
    assert response.status_code == 400
    assert "at most 64" in response.json()["errors"]["env.params.level"]
    assert not Experiment.objects.exists() and not Run.objects.exists()


@pytest.mark.parametrize(
    "env, searched",
    [
        (
            {"name": "sokoban", "params": {"level": "; 64 runs\n#####\n#@$.#\n#####"}},
            "envs.sokoban.level._parse_board",
        ),
        (
            {"name": "frozenlake", "params": {"map": "SFFF,FHFH,FFFH,HFFG,FFFF"}},
            "envs.frozenlake.goal_reachable",
        ),
    ],
)
def test_the_runs_of_an_experiment_share_one_reading_of_its_fixed_board(
    client, api, monkeypatch, env, searched
):
    # Each run's config was validated and its environment built, reading the board three times a run: a
    # 64 x 64 level in 64 runs held the request for 7 s
    import importlib

    module_name, _, function = searched.rpartition(".")
    module = importlib.import_module(module_name)
    calls = []
    original = getattr(module, function)
    monkeypatch.setattr(module, function, lambda *args: calls.append(1) or original(*args))
    response = post(client, api, {"name": "shared", "env": env, "model": "tiny", "seeds": list(range(64))})
    assert response.status_code == 201, response.content
    assert Run.objects.count() == 64 and len(calls) == 1
