"""Grid parsing and expansion, shared by the form and the API."""

import pytest

from trainer.config import TrainConfig
from webapp.experiments import form_inputs, run_planning, spec_parsing, specs


def test_grid_text_parses_typed_values_and_round_trips():
    grid = spec_parsing.parse_grid(
        "algorithm.filter_ratio = 0.25, 0.5  # comment\n\nrollout.thinking = true, false\n"
        "preset = starpo, starpo-s"
    )
    assert grid == {
        "algorithm.filter_ratio": [0.25, 0.5],
        "rollout.thinking": [True, False],
        "preset": ["starpo", "starpo-s"],
    }
    assert spec_parsing.parse_grid(form_inputs.grid_text(grid)) == grid


def test_numbers_written_with_an_exponent_are_numbers_everywhere():
    # YAML 1.1 (PyYAML) reads `1e-4` as a string; a learning rate is written that way.
    grid = spec_parsing.parse_grid("optim.actor_lr = 1e-4, 5E-4, -2e-5, 1.0e-3")
    assert grid == {"optim.actor_lr": [1e-4, 5e-4, -2e-5, 1e-3]}
    assert spec_parsing.parse_overrides("optim: {actor_lr: 3e-4}") == {"optim": {"actor_lr": 3e-4}}
    assert spec_parsing.parse_overrides("note: '1e-4'") == {"note": "1e-4"}  # quoted stays text
    assert TrainConfig.from_yaml("optim: {actor_lr: 2e-4}").optim.actor_lr == 2e-4


@pytest.mark.parametrize(
    "text, words",
    [
        ("x = 1\nx = 2", "listed twice"),
        ("a.b = 1, 1", "listed twice"),
        ("a.b = 1, 1.0", "the value 1.0 is listed twice"),  # one number: two runs of one config
        ("a.b =", "at least one value"),
        ("9bad = 1", "not a config field name"),
        ("a.b = [1", "not a valid value"),
        ("a.b = 1,, 2", "an empty value between commas"),
    ],
)
def test_bad_grid_lines_say_what_is_wrong(text, words):
    with pytest.raises(ValueError, match=words):
        spec_parsing.parse_grid(text)


def test_true_and_1_are_two_grid_values():
    assert spec_parsing.parse_grid({"a.b": [True, 1]}) == {"a.b": [True, 1]}


def test_a_trailing_comma_in_a_grid_line_is_no_value():
    assert spec_parsing.parse_grid("a.b = 1, 2,") == {"a.b": [1, 2]}


def test_combinations_are_the_cartesian_product_in_order():
    combos = run_planning.combinations({"a": [1, 2, 3], "b": ["x", "y"]})
    assert len(combos) == 6
    assert combos[0] == {"a": 1, "b": "x"} and combos[-1] == {"a": 3, "b": "y"}


def test_plan_counts_runs_and_validates_each(db):
    spec = specs.ExperimentSpec(
        name="t",
        seeds=[1, 2, 3],
        env={"name": "bandit", "params": {}},
        grid={"rollout.group_size": [2, 4], "algorithm.kl_coef": [0.0, 0.1]},
    )
    runs = run_planning.plan(spec)
    assert len(runs) == 12 and len({run.label for run in runs}) == 12
    spec.grid["algorithm.kl_coef"].append(-1.0)
    with pytest.raises(specs.SpecError) as error:
        run_planning.plan(spec)
    assert error.value.errors == {"grid": "algorithm.kl_coef = -1.0: must be >= 0"}


def test_describe_chooses_the_closest_preset():
    from trainer.config import TrainConfig

    config = TrainConfig.preset(
        "starpo-s", env={"name": "bandit"}, algorithm={"entropy_coef": 0.01}
    ).to_dict()
    described = form_inputs.describe(config)
    assert described["preset"] == "starpo-s"
    assert described["overrides"] == {"algorithm": {"entropy_coef": 0.01}}


def test_recipients_are_one_email_per_address_within_limits():
    assert spec_parsing.parse_recipients("a@x.org, A@X.ORG; b@x.org a@x.org") == ["a@x.org", "b@x.org"]
    with pytest.raises(ValueError, match="51 addresses; at most 50"):
        spec_parsing.parse_recipients([f"u{i}@x.org" for i in range(51)])
    with pytest.raises(ValueError, match="longer than 64 characters"):
        spec_parsing.parse_recipients(["a" * 65 + "@x.org"])
    # 50 long addresses: the API took them, and the alert form that shows them then refused every save
    long = [f"{'a' * 60}{i:02d}@{'b' * 60}.example.org" for i in range(50)]
    with pytest.raises(ValueError, match="the addresses come to 6,848 characters; at most 2,000 in all"):
        spec_parsing.parse_recipients(long)
    assert len(spec_parsing.parse_recipients(long[:14])) == 14


def test_recipients_copied_from_a_mail_client_keep_their_addresses():
    # "Bob <bob@example.com>" was "'Bob' is not a valid email address"
    copied = 'Bob <bob@example.com>, carol@example.com; "Smith, Eve" <eve@x.org>'
    assert spec_parsing.parse_recipients(copied) == ["bob@example.com", "carol@example.com", "eve@x.org"]
    with pytest.raises(ValueError, match="'<>' is not an email address, nor a name and <address>"):
        spec_parsing.parse_recipients("<>")
    # an entry that is not an address is named whole (the mail parser read "not an email" as "not" and
    # dropped the rest)
    with pytest.raises(
        ValueError, match="^'not an email' is not an email address, nor a name and <address>$"
    ):
        spec_parsing.parse_recipients("Bob <bob@example.com>, not an email")


def test_a_list_of_recipients_takes_each_as_the_text_does():
    # The API's list refused "Bob Smith <bob@example.com>" that the same text was taken with
    named = ["Bob Smith <bob@example.com>", "carol@example.com"]
    assert spec_parsing.parse_recipients(named) == ["bob@example.com", "carol@example.com"]
    with pytest.raises(ValueError, match="^'a@x.org b@x.org' is not one email address$"):
        spec_parsing.parse_recipients(["a@x.org b@x.org"])


def test_a_bad_grid_key_reports_only_problems_some_run_would_have():
    # Judged alone against the base config, max_new_tokens = 8192 breaks a tokens-per-step limit that the
    # grid's own group_size (2) keeps it under. Only the unknown key is wrong.
    spec = specs.ExperimentSpec(
        name="x",
        env={"name": "frozenlake", "params": {}},
        overrides={"rollout": {"env_groups": 64}},
        grid={"rollout.group_size": [2, 4], "rollout.max_new_tokens": [8192], "nope.key": [1]},
    )
    with pytest.raises(specs.SpecError) as refused:
        run_planning.plan(spec)
    assert set(refused.value.errors) == {"grid"}, refused.value.errors
    assert refused.value.errors["grid"].startswith("nope.key = 1: ")
