"""The new-experiment form: generated environment fields, trainer validation next to the field,
nothing saved on any error, one run per grid combination and seed."""

import re

import pytest
from django.urls import reverse

from tests.webapp.forms import experiment_post
from webapp.experiments.models import Experiment, Run

URL = reverse("experiment_new")


def counts():
    return Experiment.objects.count(), Run.objects.count()


def field_errors(response, field):
    return response.context["form"].errors.get(field, [])


def test_form_lists_every_registered_environment_and_its_parameters(alice_client):
    import envs

    html = alice_client.get(URL).content.decode()
    for name, spec in envs.registry().items():
        assert f'data-env="{name}"' in html
        for param in spec.params:
            assert f'name="env__{name}__{param.name}"' in html


def test_environment_parameters_are_labelled_in_words_and_their_help_names_the_yaml_key(alice_client):
    """A label read out as "num underscore boxes" told a screen reader's user little; the key stays in the
    help, for those who write the same value in YAML."""
    html = alice_client.get(URL).content.decode()
    assert '<label for="id_env__sokoban__num_boxes">Boxes:</label>' in html
    assert 'aria-describedby="id_env__sokoban__num_boxes_helptext"' in html
    assert (
        '<p class="help" id="id_env__sokoban__num_boxes_helptext">Boxes (and targets) in a generated room. '
        "In YAML: env.params.num_boxes</p>"
    ) in html
    assert '<label for="id_env__frozenlake__slippery">Slippery ice</label>' in html
    labels = re.findall(r'<label for="id_env__[^"]*">([^<]*)</label>', html)
    assert len(labels) > 10 and not [label for label in labels if "_" in label], labels


def test_valid_post_creates_experiment_and_queues_its_run(
    alice_client, alice, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = alice_client.post(URL, experiment_post(seeds="3"))
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and response["Location"] == experiment.get_absolute_url()
    assert experiment.owner == alice and experiment.preset == "starpo-s"
    run = experiment.runs.get()
    assert run.label == "seed=3" and run.status == "queued" and run.total_steps == 20
    assert run.config["seed"] == 3
    params = {"size": 4, "frozen_prob": 0.8, "slippery": True, "map": ""}
    assert run.config["env"] == {"name": "frozenlake", "params": params}
    assert run.config["algorithm"]["filter"] == "top_ratio"  # from the preset
    assert len(callbacks) == 1  # enqueued after commit


def test_unchecked_bool_parameter_is_false(alice_client):
    alice_client.post(URL, experiment_post(env__frozenlake__slippery=None))
    assert Run.objects.get().config["env"]["params"]["slippery"] is False


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("env__frozenlake__size", "99", "must be at most 12"),
        ("env__frozenlake__size", "", "required"),
        ("env__frozenlake__frozen_prob", "lots", "number"),
        ("steps", "0", "must be at least 1"),
        ("seeds", "1, x", "'x' is not a whole number"),
        ("seeds", "2,2", "listed twice"),
        ("grid", "algorithm.filter_ratio 0.5", "line 1"),
        ("overrides", "algorithm: [unclosed", "not valid YAML"),
        ("overrides", "- a list", "expected a mapping"),
        ("overrides", "1: 2", "keys must be names"),
        ("overrides", "schedule: {steps: 99}", "schedule.steps: set it in the steps field"),
        # dotted, as the trainer reads it too: taken and then dropped before
        ("overrides", "schedule.steps: 5", "schedule.steps: set it in the steps field"),
        ("overrides", "model.name: /etc", "model.name: set it in the model field"),
        ("overrides", "seed.x: 7", "seed: set it in the seeds field"),
        ("overrides", "schedule: 5", "schedule: must be a mapping of its fields, as {steps: ...}"),
        ("overrides", "env.name: sokoban", "own fields"),
        ("overrides", "env: {name: bandit}", "own fields"),
        ("grid", "seed = 1, 2", "seeds field"),
        ("seeds", "99999999999", "too large"),
        ("steps", "100000000", "must be at most"),
        ("detector_overrides", "grad_spike: {tolerance: -1}", "grad_spike.tolerance"),
        ("detector_overrides", "no_such_rule: {}", "no_such_rule"),
        ("alert_recipients", "me@example.com, not-an-email", "'not-an-email' is not a valid email"),
        ("preset", "ppo-extreme", "must be one of: "),
    ],
)
def test_bad_value_is_reported_next_to_its_field_and_nothing_is_saved(alice_client, field, value, expected):
    before = counts()
    response = alice_client.post(URL, experiment_post(**{field: value}))
    assert response.status_code == 400
    errors = " ".join(field_errors(response, field))
    assert expected in errors, response.context["form"].errors
    assert f'id="field-{field}"' in response.content.decode()
    assert counts() == before


def test_trainer_config_error_lands_on_the_overrides_field(alice_client):
    before = counts()
    response = alice_client.post(URL, experiment_post(overrides="algorithm:\n  kl_coef: -1\n"))
    assert field_errors(response, "overrides") == ["algorithm.kl_coef: must be >= 0"]
    assert counts() == before


def test_unknown_config_key_in_overrides_names_it(alice_client):
    response = alice_client.post(URL, experiment_post(overrides="rollout:\n  group_sise: 4\n"))
    assert "rollout.group_sise: unknown key" in " ".join(field_errors(response, "overrides"))


def test_error_from_a_non_overridden_field_is_a_non_field_error_naming_it(alice_client):
    # group_size 1 with the StarPO-S filter is invalid; the error names rollout.group_size.
    response = alice_client.post(URL, experiment_post(grid="rollout.group_size = 1"))
    assert "rollout.group_size = 1" in " ".join(field_errors(response, "grid"))
    assert Experiment.objects.count() == 0


def test_only_the_chosen_environments_parameters_are_validated(alice_client):
    response = alice_client.post(URL, experiment_post(**{"env__sokoban__dim_room": "999"}))
    assert response.status_code == 302
    assert "dim_room" not in Run.objects.get().config["env"]["params"]


@pytest.mark.parametrize("typed", ["#####\r\n#@$.#\r\n#####\r\n", "#####|#@$.#|#####"])
def test_a_sokoban_level_is_typed_in_a_text_area_or_on_one_line_between_bars(alice_client, typed):
    page = alice_client.get(URL).content.decode()
    assert re.search(r'<textarea name="env__sokoban__level"[^>]*class="code"', page)
    assert re.search(r'<textarea name="env__frozenlake__map"', page)
    sokoban = {f"env__sokoban__{name}": value for name, value in (("dim_room", "6"), ("num_boxes", "1"))}
    sokoban |= {"env__sokoban__search_budget": "1000", "env__sokoban__max_steps": "10"}
    response = alice_client.post(URL, experiment_post(env="sokoban", env__sokoban__level=typed, **sokoban))
    assert response.status_code == 302, response.context["form"].errors
    assert Run.objects.get().config["env"]["params"]["level"].splitlines() == ["#####", "#@$.#", "#####"]


def test_env_check_error_from_the_environment_lands_on_its_parameter(alice_client):
    before = counts()
    response = alice_client.post(URL, experiment_post(env__frozenlake__map="not a map"))
    assert response.status_code == 400
    assert field_errors(response, "env__frozenlake__map")
    assert counts() == before


def test_grid_times_seeds_gives_one_labelled_run_each(alice_client):
    response = alice_client.post(
        URL,
        experiment_post(
            seeds="1,2", grid="algorithm.filter_ratio = 0.25, 0.5, 1.0\nrollout.group_size = 4, 8"
        ),
    )
    assert response.status_code == 302
    runs = Run.objects.order_by("id")
    assert runs.count() == 3 * 2 * 2
    labels = [run.label for run in runs]
    assert labels[0] == "seed=1 algorithm.filter_ratio=0.25 rollout.group_size=4"
    assert len(set(labels)) == 12
    run = runs.get(label="seed=2 algorithm.filter_ratio=0.5 rollout.group_size=8")
    assert run.config["algorithm"]["filter_ratio"] == 0.5 and run.config["rollout"]["group_size"] == 8
    assert run.config["seed"] == 2


def test_every_grid_combination_is_validated_before_saving(alice_client):
    before = counts()
    response = alice_client.post(URL, experiment_post(grid="algorithm.filter_ratio = 0.5, 1.5"))
    assert field_errors(response, "grid") == ["algorithm.filter_ratio = 1.5: must be in (0, 1]"]
    assert counts() == before


def test_a_grid_key_the_overrides_also_set_is_refused(alice_client):
    """The grid's values replaced the override in every run, without a word."""
    before = counts()
    post = experiment_post(overrides="algorithm:\n  kl_coef: 0.3", grid="algorithm.kl_coef = 0.1, 0.2")
    assert field_errors(alice_client.post(URL, post), "overrides") == [
        "algorithm.kl_coef is also in the grid, whose values replace the override in every run: set it in one place"
    ]
    assert counts() == before
    # a grid over a whole section the overrides set a field of
    post = experiment_post(
        overrides="rollout:\n  group_size: 4", grid="rollout = {group_size: 8}, {group_size: 4}"
    )
    assert field_errors(alice_client.post(URL, post), "overrides")[0].startswith(
        "rollout is also in the grid"
    )


def test_grid_over_presets(alice_client):
    alice_client.post(URL, experiment_post(grid="preset = starpo, starpo-s"))
    filters = dict(Run.objects.values_list("label", "config__algorithm__filter"))
    assert filters == {"seed=1 preset=starpo": "none", "seed=1 preset=starpo-s": "top_ratio"}


def test_a_grid_that_trains_the_same_runs_again_is_refused_saying_why(alice_client):
    """A tester's grid: filter_ratio under starpo, which keeps every group, made four runs of two configs
    (identical curves, read as "the ratio does not matter")."""
    post = experiment_post(preset="starpo", seeds="1,2", grid="algorithm.filter_ratio = 0.25, 0.5")
    assert field_errors(alice_client.post(URL, post), "grid") == [
        "algorithm.filter_ratio = 0.25 and 0.5 train the same runs: algorithm.filter_ratio is not read while "
        "algorithm.filter is 'none' (every group is kept; the starpo-s presets filter)"
    ]
    # Over presets too: the starpo runs of the two ratios are the same
    post = experiment_post(grid="preset = starpo, starpo-s\nalgorithm.filter_ratio = 0.25, 0.5")
    assert field_errors(alice_client.post(URL, post), "grid")[0].startswith(
        "algorithm.filter_ratio = 0.25 and 0.5 train the same runs where preset = starpo: "
    )
    # One value: no copies, but its runs would be labelled with a setting they do not have
    post = experiment_post(preset="starpo", grid="algorithm.filter_ratio = 0.5")
    assert field_errors(alice_client.post(URL, post), "grid") == [
        "algorithm.filter_ratio is not read while algorithm.filter is 'none' (every group is kept; the "
        "starpo-s presets filter)"
    ]
    assert counts() == (0, 0)
    alice_client.post(URL, experiment_post(preset="starpo-s", grid="algorithm.filter_ratio = 0.25, 0.5"))
    assert counts() == (1, 2)


def test_too_many_runs_is_refused_with_the_count(alice_client):
    before = counts()
    seeds = ",".join(str(seed) for seed in range(9))
    grid = "algorithm.filter_ratio = 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8"
    response = alice_client.post(URL, experiment_post(seeds=seeds, grid=grid))
    message = "this makes 72 runs (8 combinations x 9 seeds); the limit is 64"
    assert message in " ".join(field_errors(response, "grid"))
    assert counts() == before


def test_hub_model_id_gets_the_hub_profile(alice_client):
    alice_client.post(URL, experiment_post(model="Qwen/Qwen2.5-0.5B-Instruct"))
    config = Run.objects.get().config
    assert config["model"]["name"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert config["algorithm"]["filter_ratio"] == 0.25  # the paper's value, not the tiny profile's


def test_post_without_csrf_token_is_refused(alice, client):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    response = csrf_client.post(URL, experiment_post())
    assert response.status_code == 403
    assert Experiment.objects.count() == 0
    # In the site's page, saying what to do (it was Django's technical page, "CSRF verification failed").
    page = response.content.decode()
    assert "<h1>This form is out of date</h1>" in page and "reload the page, and send the form again" in page
    assert "Nothing was saved." in page and "The check that failed: CSRF cookie not set." in page
    assert "SITE_URL" not in page


def test_a_form_posted_from_an_address_the_server_was_not_told_of_names_the_setting(alice):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    csrf_client.get(URL)  # the page's cookie
    token = csrf_client.cookies["csrftoken"].value
    response = csrf_client.post(
        URL, {**experiment_post(), "csrfmiddlewaretoken": token}, HTTP_ORIGIN="http://10.0.0.5:8000"
    )
    assert response.status_code == 403 and Experiment.objects.count() == 0
    page = response.content.decode()
    assert "The check that failed: Origin checking failed - http://10.0.0.5:8000 does not match" in page
    assert "sets <code>SITE_URL</code>" in page


def test_every_problem_shows_after_one_submit(alice_client):
    """The tester's form: a blank name and bad seeds no longer hide the grid's and the overrides' problems
    until a second submit."""
    post = experiment_post(
        name="", seeds="x", grid="foo.bar = 1", overrides="rollout:\n  group_size: abc\n", steps="-1"
    )
    errors = alice_client.post(URL, post).context["form"].errors
    assert {"name", "seeds", "steps", "grid", "overrides"} <= set(errors), errors
    assert counts() == (0, 0)


def test_a_grid_over_environment_names_says_the_forms_parameters_are_anothers(alice_client):
    post = experiment_post(env="frozenlake", grid="env.name = bandit, sokoban")
    errors = alice_client.post(URL, post).context["form"].errors
    assert errors["grid"][0].startswith("env.name = bandit: env.params.")
    assert (
        "the parameters given are frozenlake's" in errors["grid"][0]
        and "grid over env = {name:" in errors["grid"][0]
    )
    assert counts() == (0, 0)


def test_text_in_a_number_field_is_kept_and_named(alice_client):
    post = experiment_post(steps="abc", env="frozenlake", **{"env__frozenlake__frozen_prob": "1e400"})
    response = alice_client.post(URL, post)
    errors = response.context["form"].errors
    assert errors["steps"] == ["must be a whole number, like 3"]
    assert errors["env__frozenlake__frozen_prob"] == ["Enter a number."]
    # Digits of other scripts are refused, not read as 5 (Python's int() reads "٥" so): as Seeds does
    other_digits = alice_client.post(
        URL, experiment_post(steps="٥", env="frozenlake", env__frozenlake__frozen_prob="٠.٥")
    )
    assert other_digits.context["form"].errors["steps"] == ["must be a whole number, like 3"]
    assert other_digits.context["form"].errors["env__frozenlake__frozen_prob"] == [
        "must be a number, like 0.8"
    ]
    html = response.content.decode()
    # A text box, so that the browser shows what was typed again (a number box would show it empty)
    steps = re.search(r'<input [^>]*name="steps"[^>]*>', html).group(0)
    assert 'type="text"' in steps and 'value="abc"' in steps and 'inputmode="numeric"' in steps
    assert 'value="1e400"' in html


def test_a_bad_grid_key_does_not_hide_a_bad_grid_value_or_bad_overrides(alice_client):
    # A tester's one submit: the unknown key failed every run first, so `abc` and both override problems
    # showed only after it was fixed, one resubmit at a time.
    response = alice_client.post(
        reverse("experiment_new"),
        experiment_post(
            grid="optim.actor_lr = 1e-5, abc\nalgorithm.bogus = 1",
            overrides="rollout: {val_envs: [chess], group_size: -3}",
        ),
    )
    errors = response.context["form"].errors
    assert "optim.actor_lr = abc: must be a number" in errors["grid"][0]
    assert "algorithm.bogus = 1: unknown key" in errors["grid"][0]  # one value: said with it
    assert "rollout.group_size: must be >= 1" in errors["overrides"]
    assert any("unknown environment 'chess'" in message for message in errors["overrides"])
    assert not Experiment.objects.exists()


def test_an_unknown_grid_key_is_said_once_not_once_per_value(alice_client):
    response = alice_client.post(
        reverse("experiment_new"), experiment_post(grid="algorithm.nonexistent = 1, 2, 3")
    )
    [grid] = response.context["form"].errors["grid"]
    assert (
        grid.startswith("algorithm.nonexistent: unknown key (known: advantage, ")
        and grid.count("unknown") == 1
    )


def test_an_unknown_grid_section_names_preset_among_what_a_grid_varies(alice_client):
    response = alice_client.post(reverse("experiment_new"), experiment_post(grid="nope.key = 1, 2"))
    [grid] = response.context["form"].errors["grid"]
    assert grid.startswith("nope.key: nope: unknown key (known: algorithm, ")
    assert grid.endswith("; a grid also varies preset")


@pytest.mark.parametrize("field", ["env__frozenlake__slippery", "alert_on_warnings"])
def test_a_checkbox_takes_only_what_a_browser_sends(alice_client, field):
    html = alice_client.get(URL).content.decode()
    box = re.search(rf'<input [^>]*name="{field}"[^>]*>', html).group(0)
    assert 'type="checkbox"' in box and "value=" not in box  # so a ticked box sends "on"
    response = alice_client.post(URL, experiment_post(**{field: "banana"}))
    assert response.status_code == 400
    assert field_errors(response, field) == [
        "a checkbox sends 'on' when ticked and nothing when not; got 'banana'"
    ]
    box = re.search(rf'<input [^>]*name="{field}"[^>]*>', response.content.decode()).group(0)
    assert "banana" not in box  # shown again, it sends "on" once ticked
    assert counts() == (0, 0)
    assert alice_client.post(URL, experiment_post(**{field: "on"})).status_code == 302


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("seeds", "9" * 5000, "seed '99999"),
        (
            "overrides",
            "rollout:\n  group_size: " + "9" * 5000,
            "not valid YAML (line 2, column 15): an integer",
        ),
        ("overrides", "a: " + "[" * 1000 + "]" * 1000, "nested more than 64 levels deep"),
        ("preset", "p" * 100_000, "; got 'ppp"),
        ("model", "../" * 150, "no model folder '../../"),  # the field takes 500 characters
    ],
)
def test_a_bad_value_is_named_in_the_users_words_and_quoted_short(alice_client, field, value, expected):
    response = alice_client.post(URL, experiment_post(**{field: value}))
    assert response.status_code == 400
    [message] = field_errors(response, field)
    assert expected in message and len(message) < 400, message
    assert "int_max_str_digits" not in message and "recursion" not in message
