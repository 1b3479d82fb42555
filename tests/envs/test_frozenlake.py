"""FrozenLake: dynamics cross-checked against gymnasium's FrozenLake-v1, maps, rewards, the oracle."""

import math
from collections import Counter

import gymnasium
import pytest

import envs

GYM_4X4 = ["SFFF", "FHFH", "FFFH", "HFFG"]
GYM_8X8 = ["SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF", "FFFHFFFF", "FHHFFFHF", "FHFFHFHF", "FFFHFFFG"]
ACTIONS = ["Left", "Down", "Right", "Up"]  # gymnasium's action numbers 0..3


def gym_transitions(desc):
    return gymnasium.make("FrozenLake-v1", desc=desc, is_slippery=True).unwrapped.P


def start_at(desc, row, col):
    """The same map with the start moved to (row, col); S is frozen ice, so the dynamics do not change."""
    rows = [line.replace("S", "F") for line in desc]
    rows[row] = rows[row][:col] + "S" + rows[row][col + 1 :]
    return rows


def test_slippery_transitions_match_gymnasium():
    transitions = gym_transitions(GYM_4X4)
    trials = 300
    for state, tile in enumerate("".join(GYM_4X4)):
        if tile in "HG":
            continue
        row, col = divmod(state, 4)
        env = envs.make("frozenlake", map=start_at(GYM_4X4, row, col))
        for action_number, action in enumerate(ACTIONS):
            expected = Counter()
            outcome_of = {}
            for probability, next_state, reward, terminated in transitions[state][action_number]:
                expected[next_state] += probability
                outcome_of[next_state] = (reward, terminated)
            seen = Counter()
            for seed in range(trials):
                env.reset(seed=seed)
                _, reward, done, info = env.step(action)
                next_state = info["position"][0] * 4 + info["position"][1]
                assert (reward, done) == outcome_of[next_state], (state, action, next_state)
                seen[next_state] += 1
            assert set(seen) <= set(expected), (state, action)
            for next_state, probability in expected.items():
                # 4-sigma binomial bound on each outcome's count.
                sigma = math.sqrt(trials * probability * (1 - probability))
                assert abs(seen[next_state] - trials * probability) <= 4 * sigma + 1, (
                    state,
                    action,
                    next_state,
                )


def test_not_slippery_moves_exactly_and_borders_stop_the_player():
    env = envs.make("frozenlake", map=GYM_4X4, slippery=False)
    env.reset(seed=0)
    _, reward, done, info = env.step("Left")
    assert (info["position"], reward, done, info["action_is_effective"]) == ((0, 0), 0.0, False, False)
    _, _, _, info = env.step("Right")
    assert info["position"] == (0, 1) and info["action_is_effective"]


def test_hole_ends_the_episode_without_reward():
    env = envs.make("frozenlake", map=GYM_4X4, slippery=False)
    env.reset(seed=0)
    env.step("Right")
    observation, reward, done, info = env.step("Down")
    assert (reward, done, info["success"], info["position"]) == (0.0, True, False, (1, 1))
    assert observation.splitlines()[1] == "_X_O"


def test_goal_pays_one_and_ends_the_episode():
    env = envs.make("frozenlake", map="SFG", slippery=False)
    assert env.reset(seed=0) == "P_G"
    assert env.step("Right")[:3] == ("_PG", 0.0, False)
    observation, reward, done, info = env.step("Right")
    assert (observation, reward, done, info["success"]) == ("__√", 1.0, True, True)


def test_map_accepts_gymnasium_desc_text_and_commas():
    as_list = envs.validate_params("frozenlake", {"map": GYM_4X4})["map"]
    assert as_list == envs.validate_params("frozenlake", {"map": "SFFF,FHFH,FFFH,HFFG"})["map"]
    assert as_list == envs.validate_params("frozenlake", {"map": "SFFF\n FHFH\nFFFH\nHFFG\n"})["map"]


@pytest.mark.parametrize(
    "desc, message",
    [
        ("SFF,FF", "frozenlake.map row 2 has 2 tiles, row 1 has 3"),
        ("SFG,FXF", "frozenlake.map row 2: unknown tile 'X'"),
        ("SFG,SFF", "exactly one start S, got 2"),
        ("SFF,FFF", "needs a goal G"),
        ("SH,HG", "no path over frozen tiles leads from S to a G"),
        # a map beyond 64 x 64 is refused before its search, which took seconds for each run's config
        (",".join(["S" + "F" * 63] + ["F" * 64] * 63 + ["F" * 63 + "G"]), "map has 65 rows; at most 64"),
        ("S" + "F" * 300 + "," + "F" * 300 + "G", "map row 1 has 301 tiles; at most 64"),
    ],
)
def test_bad_maps_are_rejected(desc, message):
    with pytest.raises(envs.ParamError, match=message) as caught:
        envs.make("frozenlake", map=desc)
    assert caught.value.field == "map"


def test_random_maps_vary_and_always_have_a_reachable_goal():
    env = envs.make("frozenlake", size=5, frozen_prob=0.6, slippery=False)
    starts, goals = set(), set()
    for seed in range(200):
        rows = env.reset(seed=seed).splitlines()
        assert len(rows) == 5 and all(len(row) == 5 for row in rows)
        text = "".join(rows)
        assert text.count("P") == 1 and text.count("G") == 1
        starts.add(text.index("P"))
        goals.add(text.index("G"))
        # Without slipping, the optimal policy reaches the goal iff a path exists.
        assert env.optimal_success() == 1.0
    assert len(starts) > 10 and len(goals) > 10


def gym_value_iteration(desc):
    """Success probability of the optimal policy computed from gymnasium's own transition table."""
    transitions = gym_transitions(desc)
    values = [0.0] * len(transitions)
    while True:
        updated = [
            max(
                sum(p * (reward + (0.0 if done else values[nxt])) for p, nxt, reward, done in outcomes)
                for outcomes in transitions[state].values()
            )
            for state in range(len(transitions))
        ]
        if max(abs(a - b) for a, b in zip(updated, values)) < 1e-13:
            return updated[0]
        values = updated


@pytest.mark.parametrize("desc", [GYM_4X4, GYM_8X8])
def test_oracle_value_iteration_agrees_with_gymnasium(desc):
    ours = envs.oracle_success("frozenlake", {"map": desc}, [0])
    assert ours == pytest.approx(gym_value_iteration(desc), abs=1e-6)
    assert 0.5 < ours < 1.0  # slipping makes the optimum uncertain but far from hopeless


def test_oracle_with_an_action_budget():
    map_params = {"map": GYM_4X4}
    assert (
        envs.oracle_success("frozenlake", map_params, [0], max_actions=5) == 0.0
    )  # the goal is 6 moves away
    short = envs.oracle_success("frozenlake", map_params, [0], max_actions=10)
    assert 0.0 < short < envs.oracle_success("frozenlake", map_params, [0])
    assert envs.oracle_success("frozenlake", {"map": GYM_4X4, "slippery": False}, [0], max_actions=6) == 1.0


def test_oracle_playout_matches_its_expected_success():
    # Playing the value-iteration policy must reach the goal about as often as the oracle says.
    env = envs.make("frozenlake", map=GYM_4X4)
    env.reset(seed=0)
    expected = env.optimal_success()
    values = {(r, c): 0.0 for r in range(4) for c in range(4)}
    values[(3, 3)] = 1.0
    for _ in range(1000):
        values = {
            cell: values[cell]
            if GYM_4X4[cell[0]][cell[1]] in "HG"
            else max(
                sum(p * values[nxt] for nxt, p in env.transitions(cell, action).items()) for action in ACTIONS
            )
            for cell in values
        }
    best_action = {
        cell: max(
            ACTIONS,
            key=lambda a, cell=cell: sum(p * values[nxt] for nxt, p in env.transitions(cell, a).items()),
        )
        for cell in values
    }
    episodes = 1000
    wins = 0
    for seed in range(episodes):
        env.reset(seed=seed)
        done, info = False, {"position": (0, 0), "success": False}
        while not done:
            _, _, done, info = env.step(best_action[info["position"]])
        wins += info["success"]
    sigma = math.sqrt(expected * (1 - expected) / episodes)
    assert abs(wins / episodes - expected) <= 4 * sigma


def test_instruction_warns_about_slipping_only_on_slippery_ice():
    assert "slippery" in envs.make("frozenlake").instruction
    assert "slippery" not in envs.make("frozenlake", slippery=False).instruction


def test_a_step_the_ice_slid_says_where_it_went():
    env = envs.make("frozenlake", map=GYM_4X4)
    env.reset(seed=0)
    seen, episodes = set(), 0
    for _ in range(200):
        if env.done:
            episodes += 1
            env.reset(seed=episodes)
        before = env.position
        _, _, _, info = env.step("Right")
        went = info.get("went", "Right")
        assert went in ("Right", "Up", "Down")  # the intended way or one perpendicular to it
        moved = (env.position[0] - before[0], env.position[1] - before[1])
        assert moved in ((0, 0), {"Right": (0, 1), "Up": (-1, 0), "Down": (1, 0)}[went])
        seen.add(went)
    assert seen == {"Right", "Up", "Down"}
    env = envs.make("frozenlake", map=GYM_4X4, slippery=False)
    env.reset(seed=0)
    assert "went" not in env.step("Right")[3]
