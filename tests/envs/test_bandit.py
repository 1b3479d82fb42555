"""Bandit: arm assignment, answers by letter or name, payouts, success and feedback."""

import math

import pytest

import envs

SEEDS = range(4000)


def pull(env, seed, action):
    env.reset(seed=seed)
    return env.step(action)


def test_arm_letters_are_drawn_per_seed():
    env = envs.make("bandit")
    orders = {env.reset(seed=seed) for seed in range(40)}
    assert orders == {"A: Phoenix\nB: Dragon", "A: Dragon\nB: Phoenix"}


def test_letter_and_name_pull_the_same_arm():
    env = envs.make("bandit")
    for seed in range(20):
        env.reset(seed=seed)
        name_on_a = env.arms["A"]
        assert pull(env, seed, "A") == pull(env, seed, name_on_a)


def test_answers_are_case_insensitive_and_canonicalised():
    env = envs.make("bandit-teacher-engineer")
    assert env.actions == ["A", "B", "Teacher", "Engineer"]
    assert env.parse_actions("engineer") == ["Engineer"]
    assert env.parse_actions(" b ") == ["B"]
    assert env.parse_actions("Dragon") == ["Dragon"] and "Dragon" not in env.actions


def within_four_sigma(mean, expected, p, n):
    return abs(mean - expected) <= 4 * math.sqrt(p * (1 - p) / n)


def test_high_risk_arm_pays_one_a_quarter_of_the_time():
    env = envs.make("bandit")
    rewards = [pull(env, seed, "Dragon")[1] for seed in SEEDS]
    assert set(rewards) == {0.0, 1.0}
    assert within_four_sigma(sum(rewards) / len(rewards), 0.25, 0.25, len(rewards))


def test_payout_parameters_are_used():
    env = envs.make("bandit", high_risk_prob=0.6, high_risk_reward=5.0, low_risk_reward=0.15)
    rewards = [pull(env, seed, "Dragon")[1] for seed in SEEDS]
    assert set(rewards) == {0.0, 5.0}
    assert within_four_sigma(sum(rewards) / 5.0 / len(rewards), 0.6, 0.6, len(rewards))
    assert {pull(env, seed, "Phoenix")[1] for seed in range(50)} == {0.15}


def test_success_is_choosing_the_higher_expected_value():
    env = envs.make("bandit")  # EV: Dragon 0.25 > Phoenix 0.1
    assert all(pull(env, seed, "Dragon")[3]["success"] for seed in range(30))
    assert not any(pull(env, seed, "Phoenix")[3]["success"] for seed in range(30))
    env = envs.make("bandit", low_risk_reward=0.3)  # now the safe arm is better
    assert pull(env, 0, "Phoenix")[3]["success"] and not pull(env, 0, "Dragon")[3]["success"]


def test_reversed_names_swap_the_roles():
    env = envs.make("bandit-reversed")  # Dragon is the constant arm, Phoenix the risky one
    assert {pull(env, seed, "Dragon")[1] for seed in range(50)} == {0.1}
    assert pull(env, 0, "Phoenix")[3]["success"]


def test_one_valid_pull_ends_the_episode_with_feedback():
    env = envs.make("bandit")
    env.reset(seed=0)
    observation, reward, done, info = env.step("Answer")
    assert (reward, done, info["action_is_valid"]) == (0.0, False, False)
    assert observation.startswith("A: ")
    observation, reward, done, info = env.step("Phoenix")
    assert (observation, reward, done, info["action_is_valid"]) == ("Phoenix: 0.1 points", 0.1, True, True)
    dragon_feedback = {pull(env, seed, "Dragon")[0] for seed in range(40)}
    assert dragon_feedback == {"Dragon: 1 points", "Dragon: 0 points"}


@pytest.mark.parametrize(
    "params, field",
    [
        ({"low_risk_name": "  "}, "low_risk_name"),
        ({"high_risk_name": "b"}, "high_risk_name"),
        ({"high_risk_name": "Up || Down"}, "high_risk_name"),
        ({"low_risk_name": "Dragon", "high_risk_name": "dragon"}, "high_risk_name"),
        ({"low_risk_reward": -1}, "low_risk_reward"),
    ],
)
def test_bad_names_and_payouts(params, field):
    with pytest.raises(envs.ParamError) as caught:
        envs.make("bandit", **params)
    assert caught.value.field == field and field in str(caught.value)


def test_oracle_always_picks_the_better_arm():
    assert envs.oracle_success("bandit", {}, range(50)) == 1.0
    assert envs.oracle_success("bandit-librarian-trader-reversed", {"low_risk_reward": 0.4}, range(50)) == 1.0
