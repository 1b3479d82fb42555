"""Environment speed: steps per second per environment, and Sokoban rooms per second against gym-sokoban.

    .venv/bin/python bench/envs.py [--gym-sokoban-python /tmp/gymsok-venv/bin/python] [--seconds 20]

gym-sokoban needs old gym and numpy, so it runs in its own venv (see docs/ENVIRONMENTS.md); this script
times it there in a child process, right after timing ours, so both share the machine's state.
"""

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import envs  # noqa: E402
from envs.sokoban import generate_room  # noqa: E402

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
    result = subprocess.run([python, "-c", GYM_SOKOBAN_TIMER, str(dim), str(boxes), str(seconds)],
                            capture_output=True, text=True, check=True)
    timing = json.loads(result.stdout.strip().splitlines()[-1])
    return timing["rooms"] / timing["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gym-sokoban-python", default="/tmp/gymsok-venv/bin/python",
                        help="python of a venv with gym-sokoban installed")
    parser.add_argument("--seconds", type=float, default=10.0, help="time per measurement")
    args = parser.parse_args()

    print(f"{'environment':<16}{'steps/s':>12}")
    for name in ("bandit", "sokoban", "sokoban-large", "frozenlake"):
        print(f"{name:<16}{steps_per_second(name, args.seconds / 5):>12,.0f}")

    have_gym_sokoban = Path(args.gym_sokoban_python).exists()
    print(f"\n{'room generation':<16}{'ours rooms/s':>14}{'gym-sokoban rooms/s':>22}{'ratio':>9}")
    for dim, boxes in ROOM_PRESETS:
        ours = our_rooms_per_second(dim, boxes, args.seconds)
        label = f"{dim}x{dim}, {boxes} box{'es' if boxes > 1 else ''}"
        if have_gym_sokoban:
            theirs = gym_sokoban_rooms_per_second(args.gym_sokoban_python, dim, boxes, args.seconds)
            ratio = f"{ours / theirs:,.0f}x" if theirs else "n/a (0 rooms)"
            print(f"{label:<16}{ours:>14,.1f}{theirs:>22,.2f}{ratio:>9}")
        else:
            print(f"{label:<16}{ours:>14,.1f}{'not installed':>22}")


if __name__ == "__main__":
    main()
