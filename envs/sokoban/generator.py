"""Room generation the gym-sokoban way, made fast.

As in gym-sokoban (`room_utils.generate_room`): a random walk stamps floor patterns into a walled room,
the player and the boxes (standing on their targets) are dropped on random floor cells, and a depth-first
reverse play pulls boxes away from their targets, keeping the state with the best score
`box swaps on the path x total Manhattan distance of the boxes from their own targets` among states with no
box on a target (a swap is a pull of a different box than the previous pull, the first pull included, as
RAGEN's copy of gym-sokoban counts them; with one box the score is the box's displacement). Then, as RAGEN,
the player wanders with probability 0.8 when the boxes moved one tile in all, else 0.5: up to 3 random
steps that never revisit a cell, continuing after each with probability 0.5. Our solver confirms the room.

The speed-up over gym-sokoban: the search explores pulls, not single player moves. A state is the box
positions plus the region the player can walk to (found by a bit-mask flood fill), so the thousands of
states that differ only in where the player stands inside one region collapse into one.
"""

import random

from envs.sokoban.level import Level
from envs.sokoban.solver import flood, is_solvable, mask

# gym-sokoban's floor stamps: a 3x3 pattern centred on the walker, given as (row, col) offsets.
FLOOR_PATTERNS = [
    [(0, -1), (0, 0), (0, 1)],
    [(-1, 0), (0, 0), (1, 0)],
    [(0, -1), (0, 0), (1, 0)],
    [(0, -1), (0, 0), (1, -1), (1, 0)],
    [(0, 0), (0, 1), (1, 0)],
]
WALK_DIRECTIONS = [(1, 0), (0, 1), (-1, 0), (0, -1)]
P_CHANGE_DIRECTION = 0.35
WANDER_MAX_STEPS = 3
WANDER_P_START_NEAR = 0.8  # boxes displaced one tile in all: the player starts right behind the box
WANDER_P_START = 0.5
WANDER_P_CONTINUE = 0.5
MAX_TOPOLOGIES = 1000


class GenerationError(ValueError):
    """No solvable room was found: the room is too small or crowded for the requested boxes."""


def generate_room(rng: random.Random, dim: int, num_boxes: int, search_budget: int) -> Level:
    """A solvable dim x dim room with `num_boxes` boxes; the same rng state gives the same room."""
    walk_steps = int(1.7 * (dim + dim))  # gym-sokoban's default num_gen_steps
    for _ in range(MAX_TOPOLOGIES):
        floor = random_walk_floor(rng, dim, walk_steps)
        if len(floor) <= num_boxes + 1:
            continue
        cells = sorted(floor)
        player = rng.choice(cells)
        targets = rng.sample([cell for cell in cells if cell != player], num_boxes)
        pulled = reverse_play(dim, floor, targets, player, search_budget)
        if pulled is None:
            continue
        boxes, player = pulled
        p_start = WANDER_P_START_NEAR if _displacement(boxes, targets, dim) == 1 else WANDER_P_START
        player = wander(rng, player, floor, set(boxes), dim, p_start)
        walls = frozenset(range(dim * dim)) - floor
        level = Level(dim, dim, walls, frozenset(floor), frozenset(targets), frozenset(boxes), player)
        if is_solvable(level):
            return level
    raise GenerationError(
        f"no solvable {dim}x{dim} room with {num_boxes} boxes in {MAX_TOPOLOGIES} tries; "
        f"use fewer boxes or a larger room"
    )


def random_walk_floor(rng: random.Random, dim: int, steps: int) -> set[int]:
    """Floor cells stamped along a random walk that changes direction with probability 0.35 per step."""
    direction = rng.choice(WALK_DIRECTIONS)
    row, col = rng.randint(1, dim - 1), rng.randint(1, dim - 1)
    floor = set()
    for _ in range(steps):
        if rng.random() < P_CHANGE_DIRECTION:
            direction = rng.choice(WALK_DIRECTIONS)
        row = max(min(row + direction[0], dim - 2), 1)
        col = max(min(col + direction[1], dim - 2), 1)
        for d_row, d_col in rng.choice(FLOOR_PATTERNS):
            r, c = row + d_row, col + d_col
            if 0 < r < dim - 1 and 0 < c < dim - 1:  # the outer ring always stays wall
                floor.add(r * dim + c)
    return floor


def reverse_play(
    width: int, floor_cells: set[int], targets: list[int], player: int, search_budget: int
) -> tuple[tuple[int, ...], int] | None:
    """(box positions, player) of the best-scoring state found by pulling boxes off their targets.

    Box i starts on targets[i]; None when no explored state has every box off the targets.
    """
    floor, on_targets = mask(floor_cells), mask(targets)
    explored: set[tuple[int, int]] = set()
    best, best_score = None, 0
    stack = [(tuple(targets), player, 0, -1)]  # boxes, player, box swaps, index of the last box pulled
    while stack and len(explored) < search_budget:
        boxes, player, swaps, last_box = stack.pop()
        box_mask = mask(boxes)
        free = floor & ~box_mask
        reach = flood(1 << player, free, width)
        key = (box_mask, reach & -reach)  # boxes + the player's region, as gym-sokoban hashes room states
        if key in explored:
            continue
        explored.add(key)
        if not box_mask & on_targets:
            score = swaps * _displacement(boxes, targets, width)
            if score > best_score:
                best, best_score = (boxes, player), score
        for delta in (1, -1, width, -width):
            # The player stands on `beside` (next to the box) and steps away to `away`, dragging the box.
            for index, box in enumerate(boxes):
                beside, away = box + delta, box + 2 * delta
                if reach >> beside & 1 and free >> away & 1:
                    stack.append(
                        (
                            boxes[:index] + (beside,) + boxes[index + 1 :],
                            away,
                            swaps + (index != last_box),
                            index,
                        )
                    )
    return best


def _displacement(boxes: tuple[int, ...], targets: list[int], width: int) -> int:
    total = 0
    for box, target in zip(boxes, targets):
        box_row, box_col = divmod(box, width)
        target_row, target_col = divmod(target, width)
        total += abs(box_row - target_row) + abs(box_col - target_col)
    return total


def wander(
    rng: random.Random, player: int, floor: set[int], boxes: set[int], width: int, p_start: float
) -> int:
    """RAGEN's random player movement: with probability p_start walk up to WANDER_MAX_STEPS random steps onto
    free cells not visited before, going on after each with probability WANDER_P_CONTINUE."""
    if rng.random() > p_start:
        return player
    visited = {player}
    for _ in range(WANDER_MAX_STEPS):
        options = [
            cell
            for cell in (player - width, player + width, player - 1, player + 1)
            if cell in floor and cell not in boxes and cell not in visited
        ]
        if not options:
            break
        player = rng.choice(options)
        visited.add(player)
        if len(visited) > WANDER_MAX_STEPS or rng.random() > WANDER_P_CONTINUE:
            break
    return player
