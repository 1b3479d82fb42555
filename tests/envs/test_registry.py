"""The registry, parameter validation and the behaviour every environment shares."""

import math
import random

import pytest

import envs
from envs.spec import PARAM_TYPES

NAMES = list(envs.registry())


def test_registry_lists_the_environments_the_issue_names():
    assert {"bandit", "sokoban", "sokoban-large", "frozenlake"} <= set(NAMES)
    assert {"bandit-reversed", "bandit-teacher-engineer", "bandit-librarian-trader-reversed"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_param_is_complete_enough_to_build_a_form_field(name):
    spec = envs.registry()[name]
    assert spec.name == name and spec.description
    for param in spec.params:
        assert param.type in PARAM_TYPES and param.help, param
        if param.type in ("int", "float"):
            assert param.min is not None and param.max is not None and param.min <= param.default <= param.max
        if param.type == "choice":
            assert param.default in param.choices
        # The default must itself pass validation, or the untouched form would be rejected.
        assert param.validate(param.default, name) == param.default


def test_presets_change_defaults_only():
    registry = envs.registry()
    assert envs.validate_params("sokoban-large", {})["dim_room"] == 8
    assert envs.validate_params("sokoban-large", {})["num_boxes"] == 2
    assert [p.name for p in registry["sokoban-large"].params] == [p.name for p in registry["sokoban"].params]
    reversed_names = envs.validate_params("bandit-reversed", {})
    assert (reversed_names["low_risk_name"], reversed_names["high_risk_name"]) == ("Dragon", "Phoenix")


@pytest.mark.parametrize("name", NAMES)
def test_every_environment_plays_with_defaults(name):
    env = envs.make(name)
    observation = env.reset(seed=3)
    assert isinstance(observation, str) and observation == env.render()
    assert env.instruction and env.actions and isinstance(env.symbols, dict)
    _, reward, done, info = env.step(env.actions[0])
    assert isinstance(reward, float) and isinstance(done, bool)
    assert {"success", "action_is_valid", "action_is_effective"} <= set(info)
    assert info["action_is_valid"] is True


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_and_actions_give_the_same_episode(name):
    def play(seed):
        env = envs.make(name)
        chooser = random.Random(99)
        trace = [env.reset(seed=seed)]
        for _ in range(30):
            step = env.step(chooser.choice(env.actions + ["Jump"]))
            trace.append(step)
            if step[2]:
                trace.append(env.reset(seed=seed + 1))
        return trace

    assert play(5) == play(5)
    assert len({repr(play(seed)) for seed in range(5)}) > 1  # and the seed does matter


def test_episodes_are_pinned_so_recorded_experiments_stay_reproducible():
    # Same seed -> same state on every machine and after every refactor: random.Random is platform
    # independent, so a change here means the generators changed and old runs can no longer be replayed.
    assert envs.make("frozenlake").reset(seed=1) == "_O__\n___P\n_GO_\n____"
    # Sokoban re-pinned deliberately when generation took up RAGEN's box-swap score and player wander.
    assert envs.make("sokoban").reset(seed=1) == "######\n######\n####_#\n#_#__#\n#O_XP#\n######"
    assert envs.make("bandit").reset(seed=1) == "A: Dragon\nB: Phoenix"


def test_parse_actions_follows_the_contract():
    env = envs.make("frozenlake")
    assert env.parse_actions("left || Jump") == ["Left", "Jump"]
    assert env.parse_actions("  UP||down || ") == ["Up", "Down"]
    assert env.parse_actions("") == []
    words = env.parse_actions("Right || right now")
    assert [word in env.actions for word in words] == [True, False]


def test_invalid_word_changes_nothing():
    env = envs.make("frozenlake", slippery=False)
    before = env.reset(seed=2)
    observation, reward, done, info = env.step("Jump")
    assert (observation, reward, done) == (before, 0.0, False)
    assert info["action_is_valid"] is False and info["action_is_effective"] is False
    assert env.step("left")[3]["action_is_valid"] is False  # step() takes canonical words only


def test_step_outside_an_episode_is_an_error():
    env = envs.make("bandit")
    with pytest.raises(RuntimeError, match="reset"):
        env.step("A")
    env.reset(seed=0)
    env.step("A")
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("B")


def test_form_strings_are_converted():
    params = envs.validate_params("frozenlake", {"size": " 5", "frozen_prob": "0.7", "slippery": "false"})
    assert params == {"size": 5, "frozen_prob": 0.7, "slippery": False, "map": ""}
    assert envs.validate_params("sokoban", {"dim_room": 7.0})["dim_room"] == 7


@pytest.mark.parametrize(
    "name, params, field, message",
    [
        ("sokoban", {"dim_room": 40}, "dim_room", "sokoban.dim_room must be between 5 and 12, got 40"),
        ("sokoban", {"dim_room": "six"}, "dim_room", "sokoban.dim_room must be an integer, got 'six'"),
        ("sokoban", {"dim_room": True}, "dim_room", "sokoban.dim_room must be an integer, got True"),
        ("sokoban", {"dim_room": 6.5}, "dim_room", "must be an integer"),
        (
            "sokoban",
            {"vocabulary": "emoji"},
            "vocabulary",
            "sokoban.vocabulary must be one of 'default', 'alternate'",
        ),
        ("sokoban", {"dim_room": 5, "num_boxes": 3}, "num_boxes", "num_boxes=3 does not fit a 5x5 room"),
        ("sokoban-large", {"colour": "red"}, "colour", "sokoban-large.colour is not a parameter"),
        ("frozenlake", {"frozen_prob": math.nan}, "frozen_prob", "must be a finite number"),
        (
            "frozenlake",
            {"frozen_prob": 0},
            "frozen_prob",
            "frozenlake.frozen_prob must be between 0.1 and 1.0, got 0",
        ),
        ("frozenlake", {"slippery": "maybe"}, "slippery", "frozenlake.slippery must be true or false"),
        ("frozenlake", {"map": 7}, "map", "frozenlake.map must be text"),
        # text is bounded before it is parsed, once for each run's config
        (
            "frozenlake",
            {"map": "\n" * 20_000 + "SFG"},
            "map",
            "frozenlake.map is 20,003 characters long; at most 10,000",
        ),
        (
            "sokoban",
            {"level": "T" * 10_001},
            "level",
            "sokoban.level is 10,001 characters long; at most 10,000",
        ),
        ("bandit", {"high_risk_name": "x" * 10_001}, "high_risk_name", "at most 10,000"),
        (
            "bandit",
            {"high_risk_prob": 1.5},
            "high_risk_prob",
            "bandit.high_risk_prob must be between 0.0 and 1.0",
        ),
    ],
)
def test_bad_params_name_the_field(name, params, field, message):
    with pytest.raises(envs.ParamError, match=message.replace(".", r"\.").replace("(", r"\(")) as caught:
        envs.validate_params(name, params)
    assert caught.value.field == field
    with pytest.raises(ValueError, match=field):
        envs.make(name, **params)


def test_unknown_environment():
    with pytest.raises(envs.ParamError, match="unknown environment 'chess'") as caught:
        envs.make("chess")
    assert caught.value.field == "name"


def turn_policy_success(lake, choose, turns=5, per_turn=5, budget=10):
    """The exact chance that a policy writing each turn's actions from the turn's state alone,
    choose(lake, length, actions_after), reaches the goal (state distributions carried turn to turn)."""
    start, won, used = lake.position, 0.0, 0
    where = {start: 1.0}
    for turn in range(1, turns + 1):
        length = min(per_turn, budget - used)
        after, on_ice = min(budget - used - length, (turns - turn) * per_turn), {}
        for cell, p in where.items():
            lake.position = cell
            ends = {cell: p}
            for action in choose(lake, length, after):
                moved = {}
                for at, q in ends.items():
                    steps = {at: 1.0} if lake.rows[at[0]][at[1]] in "GH" else lake.transitions(at, action)
                    for to, r in steps.items():
                        moved[to] = moved.get(to, 0.0) + q * r
                ends = moved
            for at, q in ends.items():
                tile = lake.rows[at[0]][at[1]]
                won += q if tile == "G" else 0.0
                if tile in "SF":
                    on_ice[at] = on_ice.get(at, 0.0) + q
        where, used = on_ice, used + length
    lake.position = start
    return won


def test_frozenlake_turn_plans_beat_repeating_the_oracles_first_action():
    # A model writes a turn's actions at once, not seeing where each slid. Repeating the step-by-step
    # oracle's first action is such a plan too; valuing a plan's end state without the episode's
    # action budget (the first version) did worse than that.
    lake, plans, repeats = envs.make("frozenlake", size=4), [], []
    for seed in range(4):
        lake.reset(seed=seed)
        first: dict = {}  # the oracle's action per cell (value iteration is the slow part)

        def repeat(env, n, after):
            if env.position not in first:
                first[env.position] = env.oracle_action()
            return [first[env.position]] * n

        plans.append(turn_policy_success(lake, lambda env, n, after: env.oracle_plan(n, after)))
        repeats.append(turn_policy_success(lake, repeat))
        assert repeats[-1] <= plans[-1] <= lake.optimal_success(10) + 1e-9  # the optimum bounds any plan
    assert sum(plans) > sum(repeats) * 1.2  # measured 0.83 against 0.55
    assert envs.make("frozenlake", slippery=False).oracle_plan(5, 5) is None  # deterministic: step by step


def test_oracle_needs_seeds():
    with pytest.raises(ValueError, match="at least one seed"):
        envs.oracle_success("bandit", {}, [])


def test_oracle_actions_play_optimally():
    sokoban = envs.make("sokoban")
    for seed in range(5):
        sokoban.reset(seed=seed)
        steps, done, info = 0, False, {}
        optimal = len(envs.sokoban.solve(sokoban.level))
        while not done:
            _, _, done, info = sokoban.step(sokoban.oracle_action())
            steps += 1
        assert info["success"] and steps == optimal
    lake = envs.make("frozenlake", map="SFF,FHF,FFG", slippery=False)
    lake.reset(seed=0)
    path = []
    for _ in range(4):
        path.append(lake.oracle_action())
        lake.step(path[-1])
    assert lake.position == (2, 2)
    bandit = envs.make("bandit")
    bandit.reset(seed=3)
    assert bandit.oracle_action() == "Dragon"  # EV 0.25 beats the constant 0.1
