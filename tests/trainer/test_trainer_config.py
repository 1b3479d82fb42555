"""Config validation: every problem reported, named by its dotted field."""

import pytest

from trainer.config import PRESETS, ConfigError, TrainConfig
from trainer.overrides import load_yaml


def errors_of(d) -> dict:
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(d)
    return e.value.errors


def test_defaults_and_presets_are_valid_and_round_trip():
    for name in PRESETS:
        cfg = TrainConfig.preset(name)
        assert TrainConfig.from_yaml(cfg.to_yaml()) == cfg
        assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    s = TrainConfig.preset("starpo-s")
    assert (s.algorithm.kl_coef, s.algorithm.eps_high, s.algorithm.filter) == (0.0, 0.28, "top_ratio")
    assert TrainConfig.preset("starpo").algorithm.kl_coef == 0.001
    assert TrainConfig.preset("grpo").algorithm.advantage == "grpo"


def test_tiny_profile_versus_paper_values_for_hub_models():
    tiny = TrainConfig.preset("starpo-s")
    hub = TrainConfig.preset("starpo-s", model={"name": "Qwen/Qwen2.5-0.5B-Instruct"})
    assert tiny.optim.actor_lr > 100 * hub.optim.actor_lr
    assert (hub.rollout.env_groups, hub.rollout.group_size, hub.optim.actor_lr) == (8, 16, 1e-6)
    assert hub.algorithm.filter_ratio == 0.25


def test_overrides_dotted_keyword_and_section():
    cfg = TrainConfig.preset(
        "starpo",
        "rollout.group_size=4",
        "algorithm.kl_estimator=k3",
        "optim.critic_lr=1e-3",
        env={"name": "frozenlake", "params": {"size": 4}},
        optim__actor_lr=1e-4,
    )
    assert (cfg.rollout.group_size, cfg.algorithm.kl_estimator, cfg.env.name, cfg.optim.actor_lr) == (
        4,
        "k3",
        "frozenlake",
        1e-4,
    )
    assert cfg.optim.critic_lr == 1e-3


def test_all_errors_are_collected_with_dotted_names():
    errs = errors_of(
        {
            "rollout": {"group_size": "eight", "bogus": 1},
            "optim": {"actor_lr": True},
            "algorithm": {"loss_agg": 3},
            "nope": {},
        }
    )
    assert set(errs) == {
        "rollout.group_size",
        "rollout.bogus",
        "optim.actor_lr",
        "algorithm.loss_agg",
        "nope",
    }
    assert "unknown key" in errs["rollout.bogus"]
    assert "integer" in errs["rollout.group_size"]


def test_a_misspelt_key_is_told_the_key_it_resembles():
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict({"algorithm": {"kl_coeff": 0.1, "zzz": 1}})
    assert caught.value.errors["algorithm.kl_coeff"].startswith("unknown key (did you mean kl_coef? known: ")
    assert caught.value.errors["algorithm.zzz"].startswith("unknown key (known: ")


def test_cross_field_rules():
    errs = errors_of(
        {
            "rollout": {"group_size": 1},
            "algorithm": {"filter": "top_ratio", "eps_low": 1.5, "advantage": "a2c"},
        }
    )
    assert errs["rollout.group_size"] == "must be >= 2 when a rollout filter is on"
    assert "eps_low" in "".join(errs) and "algorithm.advantage" in errs
    errs = errors_of({"optim": {"micro_batch_size": 12, "mini_batch_size": 32}, "rollout": {"top_p": 0}})
    assert set(errs) == {"optim.mini_batch_size", "rollout.top_p"}
    assert errs["optim.mini_batch_size"] == "must be a multiple of optim.micro_batch_size (12)"
    assert set(errors_of({"optim": {"micro_batch_size": 64, "mini_batch_size": 32}})) == {
        "optim.mini_batch_size"
    }
    errs = errors_of({"optim": {"actor_lr": 1e308, "critic_lr": 0}})
    assert errs == {"optim.actor_lr": "must be in (0, 1]", "optim.critic_lr": "must be in (0, 1]"}
    assert TrainConfig.from_dict({"optim": {"actor_lr": 1}}).optim.actor_lr == 1
    errs = errors_of({"rollout": {"val_seeds": 0}, "schedule": {"val_every": 10}})
    assert list(errs) == ["rollout.val_seeds"] and "schedule.val_every" in errs["rollout.val_seeds"]
    assert (
        TrainConfig.from_dict({"rollout": {"val_seeds": 0}, "schedule": {"val_every": 0}}).rollout.val_seeds
        == 0
    )


def test_env_params_validated_by_envs():
    errs = errors_of({"env": {"name": "frozenlake", "params": {"size": -1}}})
    assert list(errs) == ["env.params.size"]
    assert "size" in errs["env.params.size"]
    assert list(errors_of({"env": {"name": "chess"}})) == ["env.name"]


def test_bad_yaml_and_unknown_preset():
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_yaml("rollout: [1, 2")
    assert "config" in e.value.errors
    with pytest.raises(ConfigError) as e:
        TrainConfig.preset("ppo-xl")
    assert "preset" in e.value.errors


def test_a_key_written_twice_in_a_config_file_is_an_error_not_its_last_value():
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_yaml("optim:\n  actor_lr: 1e-3\n  actor_lr: 1e-2\n")
    assert "the key 'actor_lr' appears twice in one mapping" in e.value.errors["config"]
    merged = load_yaml("base: &b {actor_lr: 1e-3}\noptim:\n  <<: *b\n  actor_lr: 1e-2\n")
    assert merged["optim"] == {"actor_lr": 1e-2}  # a merge key's value may be overridden


def test_aliases_that_multiply_a_document_past_config_size_or_without_end_are_refused():
    import yaml

    # "billion laughs": 270 bytes standing for 9^9 values, which every later walk visited one by one
    lines, previous = ["a: &a [x, x, x, x, x, x, x, x, x]"], "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
        previous = name
    with pytest.raises(yaml.YAMLError, match="make it stand for more than 100,000 values"):
        load_yaml("\n".join(lines))
    assert len(load_yaml("\n".join(lines[:5]))["e"]) == 9  # 9^5 values: still a document
    with pytest.raises(yaml.YAMLError, match="makes the document endless"):
        load_yaml("a: &a [1, *a]")
    assert load_yaml("x: &x 1\ny: [*x, *x]") == {"x": 1, "y": [1, 1]}  # an alias as such is fine
