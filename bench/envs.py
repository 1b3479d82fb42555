"""Environment speed: steps per second per environment, and Sokoban rooms per second against gym-sokoban;
then the rooms themselves beside gym-sokoban's: optimal moves and pushes, wall density, player next to a box.

    .venv/bin/python bench/envs.py [--gym-sokoban-python /tmp/gymsok-venv/bin/python] [--seconds 10] \
        [--samples 5] [--rooms 200] [--only-rooms]

gym-sokoban needs old gym and numpy, so it runs in its own venv (see docs/ENVIRONMENTS.md); this script
times it there in a child process (each sample its own child, timed inside it, so the child's start-up is
not counted). Rooms per second: after one short untimed sample of each, --samples samples per side of
--seconds / --samples seconds each, the two sides taking turns and the side that goes first alternating;
the ratio is the median over the pairs of samples, with its range.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import envs  # noqa: E402
from envs.sokoban import Level, generate_room, solve  # noqa: E402

ROOM_PRESETS = [(6, 1), (8, 2)]  # (dim_room, num_boxes): the paper's default and its larger variant

# Runs inside gym-sokoban's venv. Failed layouts (gym-sokoban raises when reverse play scores 0 or the
# floor is too small) are retried with the next seed, as RAGEN does, and their time counts.
GYM_SOKOBAN_TIMER = """
import json, random, sys, time
import numpy as np
from gym_sokoban.envs.room_utils import generate_room
dim, boxes, budget = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
rooms, attempts, start = 0, 0, time.perf_counter()
while time.perf_counter() - start < budget:
    random.seed(attempts); np.random.seed(attempts); attempts += 1
    try:
        generate_room(dim=(dim, dim), num_steps=int(1.7 * (dim + dim)), num_boxes=boxes)
        rooms += 1
    except (RuntimeError, RuntimeWarning):
        pass
print(json.dumps({"rooms": rooms, "seconds": time.perf_counter() - start}))
"""


# Runs inside gym-sokoban's venv: the first `n` rooms it generates (failed layouts retried with the next seed)
# as [structure, state] grids (structure: 0 wall, 2 target; state: 3/4 box, 5 player).
GYM_SOKOBAN_ROOMS = """
import json, random, sys
import numpy as np
from gym_sokoban.envs.room_utils import generate_room
dim, boxes, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rooms, attempt = [], 0
while len(rooms) < n:
    random.seed(attempt); np.random.seed(attempt); attempt += 1
    try:
        structure, state, _ = generate_room(dim=(dim, dim), num_steps=int(1.7 * (dim + dim)), num_boxes=boxes)
    except (RuntimeError, RuntimeWarning):
        continue
    rooms.append([structure.astype(int).tolist(), state.astype(int).tolist()])
print(json.dumps(rooms))
"""


def level_from_grids(structure: list[list[int]], state: list[list[int]]) -> Level:
    dim = len(structure)
    cells = [(r * dim + c, structure[r][c], state[r][c]) for r in range(dim) for c in range(dim)]
    walls = frozenset(i for i, fixed, _ in cells if fixed == 0)
    return Level(
        dim,
        dim,
        walls,
        frozenset(i for i, fixed, _ in cells if fixed != 0),
        frozenset(i for i, fixed, _ in cells if fixed == 2),
        frozenset(i for i, _, now in cells if now in (3, 4)),
        next(i for i, _, now in cells if now == 5),
    )


def room_statistics(levels: list[Level]) -> dict[str, float]:
    """Means over the rooms: optimal moves and pushes (our optimal solver), walls among the inner cells,
    and the share of rooms whose player starts beside a box."""
    solutions = [solve(level) for level in levels]
    solved = [s for s in solutions if s is not None]
    inner = [(level.width - 2) * (level.height - 2) for level in levels]
    beside = [
        any(level.player + d in level.boxes for d in (1, -1, level.width, -level.width)) for level in levels
    ]
    return {
        "rooms": len(levels),
        "unsolved": len(levels) - len(solved),
        "moves": sum(map(len, solved)) / max(len(solved), 1),
        "pushes": sum(sum(ch.isupper() for ch in s) for s in solved) / max(len(solved), 1),
        "wall density": sum(
            (len(level.walls) - (2 * level.width + 2 * level.height - 4)) / n
            for level, n in zip(levels, inner)
        )
        / len(levels),
        "player beside a box": sum(beside) / len(levels),
    }


def gym_sokoban_levels(python: str, dim: int, boxes: int, n: int) -> list[Level]:
    result = subprocess.run(
        [python, "-c", GYM_SOKOBAN_ROOMS, str(dim), str(boxes), str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [level_from_grids(*room) for room in json.loads(result.stdout.strip().splitlines()[-1])]


def steps_per_second(name: str, seconds: float) -> float:
    env = envs.make(name)
    chooser = random.Random(0)
    seed, steps = 0, 0
    env.reset(seed=seed)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            _, _, done, _ = env.step(chooser.choice(env.actions))
            steps += 1
            if done:
                seed += 1
                env.reset(seed=seed)  # resets (and room generation) are part of playing
    return steps / (time.perf_counter() - start)


def our_rooms_per_second(dim: int, boxes: int, seconds: float) -> float:
    budget = envs.validate_params("sokoban", {})["search_budget"]
    rooms, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        generate_room(random.Random(rooms), dim, boxes, budget)
        rooms += 1
    return rooms / (time.perf_counter() - start)


def gym_sokoban_rooms_per_second(python: str, dim: int, boxes: int, seconds: float) -> float:
    result = subprocess.run(
        [python, "-c", GYM_SOKOBAN_TIMER, str(dim), str(boxes), str(seconds)],
        capture_output=True,
        text=True,
        check=True,
    )
    timing = json.loads(result.stdout.strip().splitlines()[-1])
    return timing["rooms"] / timing["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--gym-sokoban-python",
        default="/tmp/gymsok-venv/bin/python",
        help="python of a venv with gym-sokoban installed",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="time per measurement and side")
    parser.add_argument("--samples", type=int, default=5, help="alternating samples per side for rooms/s")
    parser.add_argument("--rooms", type=int, default=200, help="rooms per generator for the room statistics")
    parser.add_argument("--only-rooms", action="store_true", help="skip the speed measurements")
    args = parser.parse_args()
    have_gym_sokoban = Path(args.gym_sokoban_python).exists()
    if not args.only_rooms:
        speeds(args, have_gym_sokoban)
    print(
        f"\n{'rooms':<26}"
        + "".join(f"{k:>21}" for k in ("moves", "pushes", "wall density", "player beside a box", "unsolved"))
    )
    for dim, boxes in ROOM_PRESETS:
        budget = envs.validate_params("sokoban", {})["search_budget"]
        generators = {
            "ours": lambda: [
                generate_room(random.Random(seed), dim, boxes, budget) for seed in range(args.rooms)
            ]
        }
        if have_gym_sokoban:
            generators["gym-sokoban"] = lambda: gym_sokoban_levels(
                args.gym_sokoban_python, dim, boxes, args.rooms
            )
        for name, make in generators.items():
            stats = room_statistics(make())
            label = f"{dim}x{dim}, {boxes} box{'es' if boxes > 1 else ''}, {name}"
            print(
                f"{label:<26}"
                + "".join(
                    f"{stats[k]:>21.2f}" for k in ("moves", "pushes", "wall density", "player beside a box")
                )
                + f"{stats['unsolved']:>21}"
            )


def speeds(args, have_gym_sokoban: bool) -> None:
    print(f"{'environment':<16}{'steps/s':>12}")
    for name in ("bandit", "sokoban", "sokoban-large", "frozenlake"):
        print(f"{name:<16}{steps_per_second(name, args.seconds / 5):>12,.0f}")

    load_before = os.getloadavg()
    sample = args.seconds / args.samples
    print(
        f"\n{'room generation':<16}{'ours rooms/s':>14}{'gym-sokoban rooms/s':>22}{'ratio':>9}{'ratio range':>14}"
        f"   ({args.samples} alternating samples of {sample:g} s per side, medians)"
    )
    for dim, boxes in ROOM_PRESETS:
        label = f"{dim}x{dim}, {boxes} box{'es' if boxes > 1 else ''}"
        if not have_gym_sokoban:
            ours = statistics.median(our_rooms_per_second(dim, boxes, sample) for _ in range(args.samples))
            print(f"{label:<16}{ours:>14,.1f}{'not installed':>22}")
            continue
        sides = [
            lambda seconds: our_rooms_per_second(dim, boxes, seconds),
            lambda seconds: gym_sokoban_rooms_per_second(args.gym_sokoban_python, dim, boxes, seconds),
        ]
        for side in sides:
            side(min(1.0, sample))  # warm-up, untimed
        pairs = []
        for i in range(args.samples):
            rates = {}
            for index in (0, 1) if i % 2 == 0 else (1, 0):
                rates[index] = sides[index](sample)
            pairs.append((rates[0], rates[1]))
        ours = statistics.median(a for a, _ in pairs)
        theirs = statistics.median(b for _, b in pairs)
        ratios = [a / b for a, b in pairs if b]
        if ratios:
            ratio = f"{statistics.median(ratios):,.0f}x"
            spread = f"{min(ratios):,.0f}-{max(ratios):,.0f}x"
        else:
            ratio, spread = "n/a", "(0 rooms)"
        print(f"{label:<16}{ours:>14,.1f}{theirs:>22,.2f}{ratio:>9}{spread:>14}")
    print(
        f"load average before: {' '.join(f'{v:.2f}' for v in load_before)}, after: "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} ({os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
