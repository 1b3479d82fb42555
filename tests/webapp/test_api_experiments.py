"""JSON API for experiments and runs: the form's validation, scoping (404 for others), stop."""

import json

import pytest
from django.urls import reverse

from tests.factories import spec_experiment
from trainer.config import TrainConfig
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Experiment, Run

BODY = {
    "name": "API sweep",
    "env": {"name": "frozenlake", "params": {"size": 4}},
    "model": "tiny",
    "preset": "starpo-s",
    "steps": 12,
    "seeds": [1, 2],
    "grid": {"algorithm.filter_ratio": [0.25, 0.5]},
    "overrides": {"rollout": {"group_size": 4}},
    "detector_overrides": {"grad_spike": {"tolerance": 5.0}},
    "alert_recipients": ["team@example.com"],
    "alert_on_warnings": True,
}


@pytest.fixture
def api(alice):
    _, plain = ApiToken.issue(alice, "tests")
    return {"HTTP_AUTHORIZATION": f"Bearer {plain}"}


def post(client, url, body, headers):
    return client.post(url, json.dumps(body), content_type="application/json", **headers)


def test_create_expands_grid_and_seeds(client, api, alice):
    response = post(client, reverse("api_experiments"), BODY, api)
    assert response.status_code == 201, response.json()
    body = response.json()
    experiment = Experiment.objects.get(pk=body["id"])
    assert experiment.owner == alice and experiment.alert_on_warnings
    assert experiment.recipients() == ["team@example.com"]
    assert len(body["runs"]) == 4
    assert {run["label"] for run in body["runs"]} == {
        f"seed={seed} algorithm.filter_ratio={ratio}" for seed in (1, 2) for ratio in (0.25, 0.5)
    }
    run = Run.objects.get(label="seed=2 algorithm.filter_ratio=0.5")
    assert run.config["rollout"]["group_size"] == 4 and run.config["schedule"]["steps"] == 12


def test_seeds_and_grid_may_be_written_as_the_form_takes_them(client, api):
    # The OpenAPI document says so: one whole number for seeds, the form's text for the grid.
    body = {**BODY, "seeds": 3, "grid": "algorithm.filter_ratio = 0.25, 0.5\n"}
    response = post(client, reverse("api_experiments"), body, api)
    assert response.status_code == 201, response.json()
    assert sorted(run["label"] for run in response.json()["runs"]) == [
        "seed=3 algorithm.filter_ratio=0.25",
        "seed=3 algorithm.filter_ratio=0.5",
    ]


def test_create_from_a_complete_config(client, api):
    from trainer.config import TrainConfig

    config = TrainConfig.preset("grpo", env={"name": "bandit"}).to_dict()
    body = {"name": "full", "config": config, "seeds": "4,5"}
    response = post(client, reverse("api_experiments"), body, api)
    assert response.status_code == 201, response.json()
    assert sorted(Run.objects.values_list("config__seed", flat=True)) == [4, 5]
    assert Experiment.objects.get().preset == ""


@pytest.mark.parametrize(
    "change, field, words",
    [
        ({"env": {"name": "frozenlake", "params": {"size": 99}}}, "env.params.size", "between"),
        ({"env": {"name": "atlantis"}}, "env", "unknown environment"),
        ({"model": "../../etc"}, "model", "MODEL_ROOT"),
        ({"steps": 0}, "steps", "from 1 to"),
        ({"overrides": {"schedule": {"steps": 5}}}, "overrides", "steps field"),
        ({"seeds": [1, "x"]}, "seeds", "'x'"),
        ({"grid": {"algorithm.filter_ratio": [0.5, 2.0]}}, "grid", "algorithm.filter_ratio = 2.0"),
        ({"grid": {"algorithm.filter_ratio": list(range(1, 34))}}, "grid", "the limit is 64"),
        ({"overrides": {"algorithm": {"kl_coef": -1}}}, "algorithm.kl_coef", ">= 0"),
        # an override no run reads (a tester's filter_ratio under starpo was stored and did nothing)
        (
            {"preset": "starpo", "grid": {}, "overrides": {"algorithm": {"filter_ratio": 0.5}}},
            "overrides",
            "algorithm.filter_ratio is not read while algorithm.filter is 'none'",
        ),
        (
            {"overrides": {"model": {"lora_alpha": 16}}},
            "overrides",
            "model.lora_alpha is not read while model.lora_rank is 0",
        ),
        ({"overrides": "algorithm: [oops"}, "overrides", "not valid YAML"),
        (
            {"overrides": "optim:\n  actor_lr: 1e-3\n  actor_lr: 2e-3"},
            "overrides",
            "(line 3, column 3): the key 'actor_lr' appears twice in one mapping",
        ),
        ({"detector_overrides": {"grad_spike": {"nope": 1}}}, "detector_overrides", "grad_spike.nope"),
        ({"alert_recipients": "x@"}, "alert_recipients", "not a valid email"),
        ({"alert_recipients": [1.5]}, "alert_recipients", "1.5 is not an email address"),
        ({"preset": {}}, "preset", "unknown preset"),
        ({"preset": "fast"}, "preset", "unknown preset"),
        ({"name": ""}, "name", "required"),
        ({"colour": "blue"}, "colour", "unknown field"),
        ({"config": {}}, "preset", "not both"),
        (
            {"env": {"name": "frozenlake", "params": {"zzz": 1}}},
            "env.params.zzz",
            "frozenlake.zzz is not a parameter",
        ),
        ({"grid": {"nope.key": [1, 2]}}, "grid", "nope.key: nope: unknown key"),  # once, not per value
        ({"grid": {"algorithm.filter_ratio": 0.5}}, "grid", "expected a list of values, got a number"),
        ({"grid": "algorithm.filter_ratio = 0.25,,0.5"}, "grid", "an empty value between commas"),
        (
            {"grid": {"rollout": [{"group_size": 4}, {"group_size": 99999}]}, "overrides": {}},
            "grid",
            "rollout = {group_size: 99999}: rollout.group_size: 99999 is above this server's limit",
        ),
        # Counted, not built: 2**200 grid combinations (a list of them filled the memory) or a
        # million seeds (each checked against every one before it)
        (
            {"grid": {f"rollout.x{i}": [1, 2] for i in range(200)}},
            "grid",
            f"this makes {2**200 * 2:,} runs ({2**200:,} combinations x 2 seeds); the limit is 64",
        ),
        (
            {"seeds": list(range(1_000_000))},
            "seeds",
            "1,000,000 seeds make at least 1,000,000 runs; the limit is 64",
        ),
        (
            {"seeds": ",".join(map(str, range(65)))},
            "seeds",
            "65 seeds make at least 65 runs; the limit is 64",
        ),
        ({"seeds": {"a": 1}}, "seeds", "got an object"),
        ({"seeds": True}, "seeds", "got a boolean"),
    ],
)
def test_create_rejects_bad_input_naming_the_field(client, api, change, field, words):
    response = post(client, reverse("api_experiments"), {**BODY, **change}, api)
    assert response.status_code == 400
    body = response.json()
    assert words in body["errors"][field], body
    assert field in body["error"]
    assert Experiment.objects.count() == 0 and Run.objects.count() == 0


def test_an_override_turned_off_by_the_overrides_themselves_is_kept(client, api):
    # Validation switched off on purpose keeps its seeds (a CPU-sized config does this); a LoRA setting
    # under full fine-tuning, which nothing in the overrides chose, is refused alone.
    overrides = {"schedule": {"val_every": 0}, "rollout": {"val_seeds": 2}, "model": {"lora_alpha": 8}}
    response = post(client, reverse("api_experiments"), {**BODY, "overrides": overrides}, api)
    assert response.json()["errors"] == {
        "overrides": "model.lora_alpha is not read while model.lora_rank is 0 (full fine-tuning): leave it out, "
        "or change what turns it off"
    }
    del overrides["model"]
    assert post(client, reverse("api_experiments"), {**BODY, "overrides": overrides}, api).status_code == 201


def test_config_errors_are_named_under_config(client, api):
    config = TrainConfig.preset("starpo", env={"name": "bandit", "params": {}}).to_dict()
    config["rollout"]["group_size"] = "big"
    response = post(client, reverse("api_experiments"), {"name": "x", "config": config}, api)
    assert response.status_code == 400
    assert "config.rollout.group_size" in response.json()["errors"]


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"text"'])
def test_malformed_bodies_are_400(client, api, raw):
    response = client.post(reverse("api_experiments"), raw, content_type="application/json", **api)
    assert response.status_code == 400 and response.json()["error"]


def test_list_and_detail_are_scoped_to_the_caller(client, api, alice, bob):
    mine = spec_experiment(alice, seeds=[1, 2])
    theirs = spec_experiment(bob, name="bob's")
    listed = client.get(reverse("api_experiments"), **api).json()
    assert [item["id"] for item in listed["results"]] == [mine.pk] and listed["count"] == 1
    detail = client.get(reverse("api_experiment", args=[mine.pk]), **api).json()
    assert [run["label"] for run in detail["runs"]] == ["seed=1", "seed=2"]
    their_run = theirs.runs.get()
    theirs_answer = client.get(reverse("api_experiment", args=[theirs.pk]), **api)
    assert theirs_answer.status_code == 404 and theirs_answer.json()["error"] == "experiment not found"
    assert client.get(reverse("api_run", args=[their_run.pk]), **api).status_code == 404
    assert client.post(reverse("api_run_stop", args=[their_run.pk]), **api).status_code == 404
    assert Run.objects.get(pk=their_run.pk).status == "queued"


def test_runs_list_filters_by_status_and_experiment(client, api, alice):
    first = spec_experiment(alice, seeds=[1, 2])
    second = spec_experiment(alice, name="other")
    Run.objects.filter(pk=first.runs.order_by("id").first().pk).update(status="running")

    def ids(**query):
        response = client.get(reverse("api_runs"), query, **api)
        assert response.status_code == 200, response.json()
        return sorted(run["id"] for run in response.json()["results"])

    assert len(ids()) == 3
    assert ids(status="running") == [first.runs.order_by("id").first().pk]
    assert ids(experiment=second.pk) == [second.runs.get().pk]
    assert client.get(reverse("api_runs"), {"status": "bogus"}, **api).status_code == 400
    assert client.get(reverse("api_runs"), {"experiment": "x"}, **api).status_code == 400
    assert client.get(reverse("api_runs"), {"page_size": "0"}, **api).status_code == 400


def test_run_detail_has_config_and_stop_stops(client, api, alice):
    run = spec_experiment(alice).runs.get()
    detail = client.get(reverse("api_run", args=[run.pk]), **api).json()
    assert detail["config"]["env"]["name"] == "frozenlake" and detail["status"] == "queued"
    assert client.get(reverse("api_run_stop", args=[run.pk]), **api).status_code == 405
    stopped = client.post(reverse("api_run_stop", args=[run.pk]), **api).json()
    assert stopped["status"] == "stopped" and stopped["stop_requested"]


def test_resume_queues_a_stopped_run_again_and_refuses_any_other(client, api, alice, purge_broker):
    run = spec_experiment(alice).runs.get()
    refused = client.post(reverse("api_run_resume", args=[run.pk]), **api)
    assert refused.status_code == 409
    assert refused.json()["error"] == f"run {run.pk} is queued: only a stopped or failed run can be resumed"
    client.post(reverse("api_run_stop", args=[run.pk]), **api)
    resumed = client.post(reverse("api_run_resume", args=[run.pk]), **api)
    assert resumed.status_code == 200
    assert (resumed.json()["status"], resumed.json()["stop_requested"]) == ("queued", False)


def test_session_post_needs_csrf(alice):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(reverse("api_experiments"), json.dumps(BODY), content_type="application/json")
    assert response.status_code == 403 and response.json()["error"].startswith(
        "CSRF check failed: CSRF cookie not set. (a signed-in browser's call sends"
    )
    # The header sent, from another site: said so, not "send the X-CSRFToken header" (a tester sent it)
    client.get("/")
    token = client.cookies["csrftoken"].value
    response = client.post(
        reverse("api_experiments"),
        json.dumps(BODY),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
        HTTP_ORIGIN="https://elsewhere.example",
    )
    assert response.status_code == 403 and response.json()["error"].startswith(
        "CSRF check failed: Origin checking failed - https://elsewhere.example does not match any trusted origins."
    )
    assert Experiment.objects.count() == 0


def test_a_sokoban_level_set_is_read_only_from_the_servers_level_folder(client, api, tmp_path, monkeypatch):
    from django.conf import settings

    from envs.sokoban.env import LevelFiles

    assert LevelFiles.root == settings.LEVELS_ROOT.resolve()  # set when the web app starts
    monkeypatch.setattr(LevelFiles, "root", tmp_path / "levels")
    secret = tmp_path / "secret.txt"
    secret.write_text("not a level\n")
    body = {"name": "levels", "env": {"name": "sokoban", "params": {"levels": str(secret)}}, "steps": 2}
    refused = post(client, reverse("api_experiments"), body, api)
    assert refused.status_code == 400
    assert "no level file" in refused.json()["errors"]["env.params.levels"]
    assert (
        "not a level" not in refused.content.decode() and "unknown character" not in refused.content.decode()
    )

    LevelFiles.root.mkdir()
    (LevelFiles.root / "one.xsb").write_text("#####\n#@$.#\n#####\n")
    body["env"]["params"]["levels"] = "one.xsb"
    created = post(client, reverse("api_experiments"), body, api)
    assert created.status_code == 201, created.json()
    run = Run.objects.get(pk=created.json()["runs"][0]["id"])
    assert run.config["env"]["params"]["levels"] == str(LevelFiles.root / "one.xsb")
    assert not Experiment.objects.filter(name="levels").exclude(pk=created.json()["id"]).exists()


def test_one_answer_names_every_bad_field(client, api):
    body = {
        "name": "many problems",
        "env": {"name": "frozenlake", "params": {"size": -3}},
        "steps": 0,
        "seeds": [-1],
        "alert_recipients": ["notanemail"],
        "overrides": {"rollout": {"group_size": 0}},
    }
    errors = post(client, reverse("api_experiments"), body, api).json()["errors"]
    assert {"steps", "seeds", "alert_recipients"} <= set(errors), errors
    assert any(key.startswith("env") for key in errors) and any("group_size" in key for key in errors), errors
    assert not Experiment.objects.exists()


LONG = "a" * 1_000_000


@pytest.mark.parametrize(
    "change, field",
    [
        ({"steps": LONG}, "steps"),
        ({"preset": LONG}, "preset"),
        ({"model": LONG}, "model"),
        ({"alert_on_warnings": LONG}, "alert_on_warnings"),
        ({"seeds": [LONG]}, "seeds"),
        ({"seeds": "1," + LONG}, "seeds"),
        ({"alert_recipients": [LONG]}, "alert_recipients"),
        ({"overrides": {"rollout": {"group_size": LONG}}}, "rollout.group_size"),
        ({"detector_overrides": {"grad_spike": {"tolerance": LONG}}}, "detector_overrides"),
        ({"env": {"name": "sokoban", "params": {"vocabulary": LONG}}}, "env.params.vocabulary"),
        ({"env": {"name": LONG}}, "env"),
    ],
)
def test_a_long_bad_value_is_quoted_short(client, api, change, field):
    response = post(client, reverse("api_experiments"), {**BODY, **change}, api)
    assert response.status_code == 400
    message = response.json()["errors"][field]
    assert "aaa" in message and "aaa…" in message and len(message) < 400, message
    assert len(response.content) < 2000


def test_a_seed_of_thousands_of_digits_is_too_large_in_the_users_words(client, api):
    response = post(client, reverse("api_experiments"), {**BODY, "seeds": "9" * 5000}, api)
    message = response.json()["errors"]["seeds"]
    assert "too large (at most 2147483647)" in message and "…" in message, message
    assert "int_max_str_digits" not in response.content.decode()


@pytest.mark.parametrize(
    "param, value, words",
    [
        ("slippery", "false", "must be a boolean, got str 'false'"),
        ("slippery", "yes", "must be a boolean"),
        ("slippery", 0, "must be a boolean, got int 0"),
        ("frozen_prob", "0.5", "must be a number, got str '0.5'"),
        ("size", "4", "must be an integer, got str '4'"),
        ("size", 4.0, "must be an integer"),
        ("map", 5, "must be a string"),
    ],
)
def test_env_params_must_have_their_json_type(client, api, param, value, words):
    body = {**BODY, "env": {"name": "frozenlake", "params": {param: value}}}
    response = post(client, reverse("api_experiments"), body, api)
    assert response.status_code == 400
    assert words in response.json()["errors"][f"env.params.{param}"], response.json()
    assert not Experiment.objects.exists()


def test_env_params_of_their_json_type_are_taken(client, api):
    params = {"size": 3, "frozen_prob": 1, "slippery": False, "map": ["SFF", "FFF", "FFG"]}
    body = {**BODY, "seeds": [1], "grid": {}, "env": {"name": "frozenlake", "params": params}}
    response = post(client, reverse("api_experiments"), body, api)
    assert response.status_code == 201, response.json()
    stored = Run.objects.get().config["env"]["params"]
    assert stored == {"size": 3, "frozen_prob": 1.0, "slippery": False, "map": "SFF\nFFF\nFFG"}


def test_the_name_is_measured_as_stored_without_the_spaces_around_it(client, api):
    response = post(client, reverse("api_experiments"), {**BODY, "name": "n" * 199 + "     "}, api)
    assert response.status_code == 201, response.json()
    assert Experiment.objects.get().name == "n" * 199
    response = post(client, reverse("api_experiments"), {**BODY, "name": " " + "n" * 201}, api)
    assert response.json()["errors"]["name"] == "at most 200 characters, got 201"


def test_steps_and_seeds_written_as_whole_floats_are_the_integers_the_schema_takes(client, api):
    # JSON Schema's integer (the OpenAPI document's type for steps and seeds) is any number without a
    # fraction: 12.0 was a 400 "expected a whole number", though the schema says it is one
    body = {**BODY, "grid": {}, "steps": 12.0, "seeds": [1.0, 2]}
    response = post(client, reverse("api_experiments"), body, api)
    assert response.status_code == 201, response.json()
    assert sorted(Run.objects.values_list("config__seed", flat=True)) == [1, 2]
    assert set(Run.objects.values_list("total_steps", flat=True)) == {12}
    assert Experiment.objects.get().seeds == [1, 2] and isinstance(Experiment.objects.get().seeds[0], int)
    response = post(client, reverse("api_experiments"), {**body, "seeds": 3.0}, api)
    assert response.status_code == 201 and response.json()["seeds"] == [3]
    for steps, seeds in ((12.5, [1]), (12, [1.5]), (12, 2.5)):
        response = post(client, reverse("api_experiments"), {**body, "steps": steps, "seeds": seeds}, api)
        assert response.status_code == 400, (steps, seeds)
