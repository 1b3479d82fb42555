"""Peer test: our Sokoban against gym-sokoban 0.0.6's SokobanEnv, the class RAGEN's Sokoban subclasses, step by
step on the same rooms (docs/ENVIRONMENTS.md, "Peer test").

Rooms: ours (generated, and hand-made ones for the corner cases) and gym-sokoban's own generated ones; each side
gets the other's room as it is (gym-sokoban's room_fixed / room_state from our level; our level from its grids,
as XSB). Words: random moves, a policy that pushes whatever box it stands beside, and optimal solutions (the
finishing push on the last allowed step, or one step short of it), with case variants and invalid words mixed
in. gym-sokoban gets the words as RAGEN's EnvStateManager passes them (`_extract_map_valid_actions`: lower-cased,
Up/Down/Left/Right to the push actions 1-4, any other word dropped before the environment) and is stepped until
done, as that manager does. Compared at every step: reward, done, success, whether the player moved, boxes on
targets and the grid in RAGEN's symbols (ours in the default vocabulary).

Where the two differ on purpose, a test below pins the difference and says why.

gym-sokoban needs the old gym, so it runs in its own venv, var/peer/gymsok-venv, made once by this module from
tests/envs/gym_sokoban_requirements.txt (pip needs PyPI for that; without it the tests fail, saying so), and
plays every episode in one child process.
"""

import fcntl
import hashlib
import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import envs
from envs.sokoban import Level, generate_room, parse_xsb, solve, to_xsb

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / "var" / "peer" / "gymsok-venv"
REQUIREMENTS = Path(__file__).with_name("gym_sokoban_requirements.txt")
# gym 0.26.2 is a source release built with these (no build isolation: the build uses them, not today's
# setuptools), and gym_sokoban imports pkg_resources, which setuptools < 70 has without complaint.
BUILD_TOOLS = ["setuptools==69.5.1", "wheel==0.45.1"]

MOVES = ["Up", "Down", "Left", "Right"]
# Words RAGEN lower-cases onto a move, and words it drops (our env: invalid, no step).
CASE_VARIANTS = ["up", "DOWN", "lEfT", "right"]
INVALID_WORDS = ["Jump", "Upp", "North", "push up", "1", "Stay", "Left!", "no operation"]

# Runs in gym-sokoban's venv. stdin: {"generate": [[dim, boxes, n], ...], "episodes": [...]}; stdout (last line):
# {"rooms": [[room_fixed, room_state], ...] per generate entry, "traces": [...] per episode}.
GYM_SOKOBAN_PLAYER = r"""
import json, random, sys
import numpy as np
from gym_sokoban.envs.room_utils import generate_room
from gym_sokoban.envs.sokoban_env import SokobanEnv

GRID = "#_O√XPS"  # RAGEN's grid_lookup: room_state 0-5, and 6 for the player on a target
ACTION_OF = {"up": 1, "down": 2, "left": 3, "right": 4}  # RAGEN's action_lookup, as its manager maps words

def grid(env):
    room = np.where((env.room_state == 5) & (env.room_fixed == 2), 6, env.room_state)
    return "\n".join("".join(GRID[cell] for cell in row) for row in room.tolist())

def rooms(dim, boxes, n):
    # gym-sokoban's first n rooms from seeds 0, 1, ...: a failed layout is retried with the next seed, as RAGEN does
    found, seed = [], 0
    while len(found) < n:
        random.seed(seed); np.random.seed(seed); seed += 1
        try:
            fixed, state, _ = generate_room(dim=(dim, dim), num_steps=int(1.7 * (dim + dim)), num_boxes=boxes)
        except (RuntimeError, RuntimeWarning):
            continue
        found.append([fixed.astype(int).tolist(), state.astype(int).tolist()])
    return found

def play(episode):
    fixed, state = np.array(episode["fixed"]), np.array(episode["state"])
    boxes = [tuple(cell) for cell in np.argwhere((state == 3) | (state == 4)).tolist()]
    targets = [tuple(cell) for cell in np.argwhere(fixed == 2).tolist()]
    env = SokobanEnv(dim_room=fixed.shape, max_steps=episode["max_steps"], num_boxes=len(boxes), reset=False)
    # The RGB frame each step draws (seven PNG files read) is not compared and would take most of the time.
    env.get_image = lambda mode, scale=1: None
    # What SokobanEnv.reset (and RAGEN's) sets after generate_room; box_mapping (target -> box) is read by
    # nothing that steps.
    env.room_fixed, env.room_state, env.box_mapping = fixed, state, dict(zip(targets, boxes))
    env.player_position = np.argwhere(state == 5)[0]
    env.num_env_steps, env.reward_last, env.boxes_on_target = 0, 0, episode["boxes_on_target"]
    trace, done = [grid(env)], False
    for word in episode["words"]:
        if done and episode["stop_at_done"]:
            break
        action = ACTION_OF.get(word.lower())
        if action is None:
            trace.append(None)
            continue
        before = env.player_position
        _, reward, done, info = env.step(action)
        trace.append({
            "reward": reward,
            "done": bool(done),
            "success": bool(env.boxes_on_target == env.num_boxes),  # RAGEN's info["success"]
            "effective": not np.array_equal(before, env.player_position),  # RAGEN's action_is_effective
            "boxes_on_target": int(env.boxes_on_target),
            "grid": grid(env),
        })
    return trace

request = json.load(sys.stdin)
print(json.dumps({
    "rooms": [rooms(*entry) for entry in request.get("generate", [])],
    "traces": [play(episode) for episode in request.get("episodes", [])],
}))
"""


# --- the peer's venv ---------------------------------------------------------------------------------------------


def _install_step(command: list) -> None:
    shown = " ".join(map(str, command))
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        result = None
    if result is None:
        pytest.fail(f"installing gym-sokoban into {VENV} took over 900 s: `{shown}`", pytrace=False)
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()[-15:]
        pytest.fail(
            f"could not install gym-sokoban, the Sokoban peer, into {VENV}: `{shown}` exited with "
            f"{result.returncode}. This test needs PyPI (or a pip index) once to make that venv; later runs "
            "reuse it. pip said:\n" + "\n".join(said),
            pytrace=False,
        )


def ensure_gym_sokoban_venv() -> Path:
    """The python of var/peer/gymsok-venv, made when missing or when its pins (or our Python) changed. A file
    lock keeps parallel test processes from making it twice; the stamp is written last, so a failed install
    is started again from nothing next time."""
    digest = hashlib.sha256(
        "\n".join([REQUIREMENTS.read_text(), *BUILD_TOOLS, sys.version]).encode()
    ).hexdigest()
    python, stamp = VENV / "bin" / "python", VENV / ".installed"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / "gymsok-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == digest:
            return python
        shutil.rmtree(VENV, ignore_errors=True)
        pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        _install_step([sys.executable, "-m", "venv", VENV])
        _install_step([*pip, *BUILD_TOOLS])
        _install_step([*pip, "--no-build-isolation", "-r", REQUIREMENTS])
        stamp.write_text(digest)
    return python


@pytest.fixture(scope="session")
def gym_sokoban_python() -> Path:
    return ensure_gym_sokoban_venv()


def run_gym_sokoban(python: Path, request: dict) -> dict:
    result = subprocess.run(
        [python, "-c", GYM_SOKOBAN_PLAYER],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"gym-sokoban's side failed:\n{result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- rooms both ways ---------------------------------------------------------------------------------------------


def gym_grids(level: Level) -> tuple[list[list[int]], list[list[int]]]:
    """gym-sokoban's room_fixed (0 wall, 1 floor, 2 target) and room_state (the same, with 3 a box on a target,
    4 a box elsewhere, 5 the player) of a level; cells outside a hand-made level's walls are walls."""
    fixed = [
        [
            (2 if cell in level.goals else 1) if cell in level.floor else 0
            for cell in range(row * level.width, (row + 1) * level.width)
        ]
        for row in range(level.height)
    ]
    state = [row[:] for row in fixed]
    for box in level.boxes:
        row, col = level.position(box)
        state[row][col] = 3 if box in level.goals else 4
    row, col = level.position(level.player)
    state[row][col] = 5
    return fixed, state


def level_from_grids(fixed: list[list[int]], state: list[list[int]]) -> Level:
    """Our level of gym-sokoban's grids, through XSB text (so parse_xsb checks it as any level)."""
    symbols = {
        (0, 0): "#",
        (1, 1): " ",
        (2, 2): ".",
        (1, 4): "$",
        (2, 3): "*",
        (2, 4): "*",
        (1, 5): "@",
        (2, 5): "+",
    }
    rows = [
        "".join(symbols[fixed_cell, cell] for fixed_cell, cell in zip(*pair)) for pair in zip(fixed, state)
    ]
    [level] = parse_xsb("\n".join(rows))
    return level


HAND_MADE = [
    "#####\n#@$.#\n#####",  # the finishing push
    "#######\n#@$$..#\n#######",  # a box into a box
    "######\n#@$# #\n#   .#\n######",  # a box into a wall
    "######\n#@*. #\n#  $ #\n######",  # a box from a target onto a target
    "#########\n#@*.*. $#\n#    $  #\n#########",  # from target to target, and into a box on a target
    "########\n#@$.$. #\n#  **  #\n#      #\n########",  # boxes that start on targets: off and on again
    "#########\n#+$$$ . #\n#    .  #\n#########",  # the player starts on a target, three boxes in a row
    # a hand-made shape: cells outside the walls, several boxes on targets from the start
    "  #####\n###   #\n#.@$  #\n### $.#\n#.##$ #\n# # . ##\n#$ *$$.#\n#   .  #\n########",
]


def our_levels() -> list[Level]:
    levels = [parse_xsb(text)[0] for text in HAND_MADE]
    for dim, boxes, seeds in [(6, 1, 30), (8, 2, 12), (7, 3, 6), (7, 4, 4), (9, 3, 4)]:
        levels += [generate_room(random.Random(seed), dim, boxes, 10_000) for seed in range(seeds)]
    return levels


GYM_ROOMS = [(6, 1, 20), (7, 2, 8)]  # (dim, boxes, rooms) generated by gym-sokoban


# --- playing ours, and the words both sides get ------------------------------------------------------------------


def adjacent_box_move(level: Level, rng: random.Random) -> str | None:
    pushes = [move for move in MOVES if level.player + level.delta(move) in level.boxes]
    return rng.choice(pushes) if pushes else None


def episode_words(plan: list[str], rng: random.Random) -> list[str]:
    """The words for a plan of moves: now and then a case variant in place of a move, invalid words between."""
    words = []
    for move in plan:
        while rng.random() < 0.15:
            words.append(rng.choice(INVALID_WORDS))
        words.append(rng.choice(CASE_VARIANTS) if rng.random() < 0.1 else move)
    return words


def play_ours(
    level: Level, words: list[str], max_steps: int, policy: str, rng: random.Random, events: Counter
):
    """Our trace (the start grid, then per word a step dict, or None for a word RAGEN drops), the words (for
    "pusher" chosen here: a push into a box beside the player, 70% of the time) and whether it ended."""
    env = envs.make("sokoban", level=to_xsb(level), max_steps=max_steps)
    grid = env.reset(seed=0)
    trace, played, pending = [grid], [], list(words)
    while pending and not env.done:
        word = pending.pop(0)
        if policy == "pusher" and word in MOVES and rng.random() < 0.7:
            word = adjacent_box_move(env.level, rng) or word
        played.append(word)
        # as the rollout parses an answer: case-insensitive, unknown words kept as written
        [action] = env.parse_actions(word)
        before, steps_before = env.level, env.steps_taken
        grid, reward, done, info = env.step(action)
        if not info["action_is_valid"]:
            # not a step: no change, no reward, not counted towards max_steps (RAGEN never passes it on)
            assert (grid, reward, done, env.level, env.steps_taken) == (
                trace_grid(trace),
                0.0,
                False,
                before,
                steps_before,
            ), word
            events["invalid word"] += 1
            trace.append(None)
            continue
        count_events(before, env.level, action, done, events)
        trace.append(
            {
                "reward": reward,
                "done": done,
                "success": info["success"],
                "effective": info["action_is_effective"],
                "boxes_on_target": env.level.boxes_on_goals,
                "grid": grid,
            }
        )
    if env.done:  # past the end, as past max_steps: refused (RAGEN's manager steps a done env no more)
        with pytest.raises(RuntimeError, match="the episode is over"):
            env.step("Up")
    return trace, played + pending, env.done


def trace_grid(trace: list) -> str:
    """The grid after the last step of a trace (its start grid before any)."""
    return next(
        step if isinstance(step, str) else step["grid"] for step in reversed(trace) if step is not None
    )


def count_events(before: Level, after: Level, move: str, done: bool, events: Counter) -> None:
    """What a step did, so that the test shows it played every case it claims to."""
    ahead = before.player + before.delta(move)
    behind = ahead + before.delta(move)
    if ahead not in before.floor:
        events["walk into a wall"] += 1
    elif ahead in before.boxes and after is before:
        events["box into a box" if behind in before.boxes else "box into a wall"] += 1
    elif ahead in before.boxes and ahead in before.goals and behind in before.goals:
        events["box from a target onto a target"] += 1
    if after.boxes_on_goals > before.boxes_on_goals:
        events["box onto a target"] += 1
    if after.boxes_on_goals < before.boxes_on_goals:
        events["box off a target"] += 1
    if done:
        events["finished" if after.is_solved else "out of steps"] += 1


def episodes_of(level: Level, rng: random.Random, events: Counter) -> list[dict]:
    """Five episodes on a level: random moves and the pusher, each with the default max_steps and a small one,
    and the optimal solution with max_steps its length (it finishes on the last step) or one less (out of
    steps before the last push). Each: our trace, and the request for gym-sokoban's side."""
    solution = [next(move for move in MOVES if move[0] == letter.upper()) for letter in solve(level) or ""]
    plans = [
        ("random", 100),
        ("random", rng.randint(1, 30)),
        ("pusher", 100),
        ("pusher", rng.randint(1, 30)),
        ("solution", max(len(solution) - rng.randint(0, 1), 1)),
    ]
    fixed, state = gym_grids(level)
    episodes = []
    for policy, max_steps in plans:
        plan = (
            solution
            if policy == "solution" and solution
            else [rng.choice(MOVES) for _ in range(max_steps + 5)]
        )
        words = episode_words(plan, rng)
        trace, words, done = play_ours(level, words, max_steps, policy, rng, events)
        if done:  # gym-sokoban must stop where we did, and not play these
            words += [rng.choice(MOVES) for _ in range(3)]
        request = {
            "fixed": fixed,
            "state": state,
            "max_steps": max_steps,
            "words": words,
            "boxes_on_target": level.boxes_on_goals,  # see the exception at reset, below
            "stop_at_done": True,
        }
        episodes.append({"level": to_xsb(level), "policy": policy, "ours": trace, "request": request})
    return episodes


def gym_request(level_text: str, words: list[str], max_steps: int = 100, **changes) -> dict:
    fixed, state = gym_grids(parse_xsb(level_text)[0])
    request = {"fixed": fixed, "state": state, "max_steps": max_steps, "words": words}
    return {
        **request,
        "boxes_on_target": parse_xsb(level_text)[0].boxes_on_goals,
        "stop_at_done": True,
        **changes,
    }


# Episodes for the differences pinned below, played by gym-sokoban in the same child process as the rest:
# gym-sokoban's own reset count of boxes on targets (0), and stepping on after done.
STARTS_ON_TARGETS = "########\n#@$.$. #\n#  **  #\n#      #\n########"
ONE_BOX_ON_ITS_TARGET = "#######\n#@* $.#\n#######"
SOLVED_BY_ONE_PUSH = "#####\n#@$.#\n#####"
EXCEPTIONS = {
    "walk, count from 0": gym_request(STARTS_ON_TARGETS, ["Down"], boxes_on_target=0),
    "push off, count from 0": gym_request(ONE_BOX_ON_ITS_TARGET, ["Right"], boxes_on_target=0),
    "past max_steps": gym_request(
        STARTS_ON_TARGETS, ["Down", "Down", "Up", "Up"], max_steps=2, stop_at_done=False
    ),
    "past the finish": gym_request(SOLVED_BY_ONE_PUSH, ["Right", "Left", "Left"], stop_at_done=False),
}


@pytest.fixture(scope="module")
def peer(gym_sokoban_python):
    """Every episode played by both sides: gym-sokoban generates its rooms in one call, then plays all
    episodes, ours and theirs, in a second."""
    generated = run_gym_sokoban(gym_sokoban_python, {"generate": GYM_ROOMS})["rooms"]
    gym_rooms = [room for rooms in generated for room in rooms]
    rng, events = random.Random(2026), Counter()
    levels = our_levels() + [level_from_grids(*room) for room in gym_rooms]
    episodes = [episode for level in levels for episode in episodes_of(level, rng, events)]
    requests = [episode["request"] for episode in episodes] + list(EXCEPTIONS.values())
    traces = run_gym_sokoban(gym_sokoban_python, {"episodes": requests})["traces"]
    for episode, trace in zip(episodes, traces):
        episode["gym"] = trace
    return {
        "gym_rooms": gym_rooms,
        "episodes": episodes,
        "events": events,
        "exceptions": dict(zip(EXCEPTIONS, traces[len(episodes) :])),
    }


def test_rooms_carry_over_both_ways(peer):
    """gym-sokoban's rooms, made our levels and back, are its grids again: both sides play one room."""
    assert len(peer["gym_rooms"]) == sum(n for _, _, n in GYM_ROOMS)
    for fixed, state in peer["gym_rooms"]:
        assert gym_grids(level_from_grids(fixed, state)) == (fixed, state)


def test_every_step_matches_gym_sokoban(peer):
    """Reward, done, success, the player moved or not, boxes on targets and the grid, word by word; and both
    stop at the same word."""
    for number, episode in enumerate(peer["episodes"]):
        ours, theirs = episode["ours"], episode["gym"]
        for index, (mine, gym) in enumerate(zip(ours, theirs)):
            assert mine == gym, mismatch(number, episode, index)
        assert len(ours) == len(theirs), mismatch(number, episode, min(len(ours), len(theirs)))


def mismatch(number: int, episode: dict, index: int) -> str:
    """Where an episode's traces part: the level, the words up to there (index 0 is the start) and both steps."""
    request = episode["request"]
    ours, theirs = episode["ours"], episode["gym"]
    words = request["words"][:index]
    shown = ("... " if len(words) > 20 else "") + " ".join(repr(word) for word in words[-20:])
    return (
        f"episode {number} ({episode['policy']}, max_steps={request['max_steps']}) differs after {index} "
        f"words: {shown or '(at the start)'}\nlevel:\n{episode['level']}\n"
        f"ours: {ours[index] if index < len(ours) else 'ended'}\n"
        f"gym-sokoban: {theirs[index] if index < len(theirs) else 'ended'}"
    )


def test_the_episodes_play_every_case(peer):
    """A comparison is only as good as what it played: each case, many times, in both worlds' rooms."""
    events = peer["events"]
    cases = [
        "walk into a wall",
        "box into a wall",
        "box into a box",
        "box onto a target",
        "box off a target",
        "box from a target onto a target",
        "finished",
        "out of steps",
        "invalid word",
    ]
    assert {case: events[case] for case in cases if events[case] < 5} == {}, events
    steps = sum(len(episode["ours"]) - 1 for episode in peer["episodes"])
    assert steps > 10_000, steps


def test_exception_gym_sokoban_counts_boxes_on_targets_from_zero_at_reset(peer):
    """gym-sokoban's reset (and RAGEN's) sets its count of boxes on targets to 0 whatever the room, and rewards
    the change of that count: its generated rooms never start with a box on a target, but a fixed level may,
    and there its first step is paid +1 for boxes that were already home (walking) or nothing for pushing one
    off. Ours counts from the room as it starts (docs/ENVIRONMENTS.md, "Peer test"); the peer comparison
    above starts gym-sokoban's count there too. Here, with its own reset value:"""
    walk = peer["exceptions"]["walk, count from 0"][1]
    push_off = peer["exceptions"]["push off, count from 0"][1]
    assert (walk["reward"], walk["boxes_on_target"]) == (pytest.approx(0.9), 2)
    assert (push_off["reward"], push_off["boxes_on_target"]) == (pytest.approx(-0.1), 0)
    _, [(grid, reward, _, _)] = play(STARTS_ON_TARGETS, "Down")
    assert (grid, reward) == (walk["grid"], pytest.approx(-0.1))
    _, [(grid, reward, _, _)] = play(ONE_BOX_ON_ITS_TARGET, "Right")
    assert (grid, reward) == (push_off["grid"], pytest.approx(-1.1))


def test_exception_gym_sokoban_steps_on_after_done(peer):
    """gym-sokoban's env takes steps after done: past max_steps its done is False again (it checks
    max_steps == steps taken), and a finished room pays the finish again on every step. RAGEN's manager
    never steps a done environment; ours refuses (RuntimeError), so an episode ends once."""
    past_max = [step["done"] for step in peer["exceptions"]["past max_steps"][1:]]
    assert past_max == [False, True, False, False]
    past_finish = [(step["reward"], step["done"]) for step in peer["exceptions"]["past the finish"][1:]]
    assert past_finish == [
        (pytest.approx(10.9), True),
        (pytest.approx(9.9), True),
        (pytest.approx(9.9), True),
    ]
    env, _ = play(STARTS_ON_TARGETS, "Down", "Down", max_steps=2)
    with pytest.raises(RuntimeError, match="the episode is over"):
        env.step("Up")
    env, _ = play(SOLVED_BY_ONE_PUSH, "Right")
    with pytest.raises(RuntimeError, match="the episode is over"):
        env.step("Left")


def play(level_text: str, *words: str, **params):
    env = envs.make("sokoban", level=level_text, **params)
    env.reset(seed=0)
    return env, [env.step(word) for word in words]
