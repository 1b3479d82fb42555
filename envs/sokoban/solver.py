"""Sokoban search: an optimal solver (fewest moves) and a fast solvability check.

Both prune "dead" cells: a box on a cell from which no push sequence reaches a goal can never be solved,
so skipping such pushes loses no solution (and keeps `solve` optimal).

Box sets are bit masks (bit `cell` set when a box is there); set operations and flood fills on Python
ints are far cheaper than on frozensets, which is what makes generation fast.
"""

from envs.sokoban.level import DIRECTIONS, Level

DEFAULT_MAX_STATES = 200_000


def mask(cells) -> int:
    bits = 0
    for cell in cells:
        bits |= 1 << cell
    return bits


def flood(start: int, free: int, width: int) -> int:
    """Bit mask of the cells reachable from the `start` bits through the `free` bits."""
    reach = start
    while True:
        grown = reach | (((reach << 1) | (reach >> 1) | (reach << width) | (reach >> width)) & free)
        if grown == reach:
            return reach
        reach = grown


def live_cells(level: Level) -> frozenset[int]:
    """Cells from which a lone box can still be pushed onto some goal (found by pulling back from goals)."""
    deltas = [level.delta(direction) for direction in DIRECTIONS]
    live, frontier = set(level.goals), list(level.goals)
    while frontier:
        cell = frontier.pop()
        for delta in deltas:
            box_from, player_at = cell - delta, cell - 2 * delta
            if box_from in level.floor and player_at in level.floor and box_from not in live:
                live.add(box_from)
                frontier.append(box_from)
    return frozenset(live)


def solve(level: Level, max_states: int = DEFAULT_MAX_STATES) -> str | None:
    """An optimal solution as a LURD string (lower case move, upper case push), or None.

    Breadth-first search over (boxes, player) states, one move per edge, so the first solution found has
    the fewest moves. None means no solution exists or none was found within `max_states` states.
    """
    if level.is_solved:
        return ""
    live = live_cells(level)
    moves = [(level.delta(direction), direction[0].lower()) for direction in DIRECTIONS]
    goals = mask(level.goals)
    start = (mask(level.boxes), level.player)
    parents: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    frontier = [start]
    while frontier:
        next_frontier = []
        for state in frontier:
            boxes, player = state
            for delta, letter in moves:
                ahead = player + delta
                if ahead not in level.floor:
                    continue
                if boxes >> ahead & 1:
                    behind = ahead + delta
                    if behind not in live or boxes >> behind & 1:
                        continue
                    new_state = (boxes ^ (1 << ahead) | (1 << behind), ahead)
                    step = letter.upper()
                else:
                    new_state, step = (boxes, ahead), letter
                if new_state in parents:
                    continue
                parents[new_state] = (state, step)
                if new_state[0] == goals:
                    return _path_to(new_state, parents)
                if len(parents) >= max_states:
                    return None
                next_frontier.append(new_state)
        frontier = next_frontier
    return None


def _path_to(state, parents) -> str:
    steps = []
    while parents[state] is not None:
        state, step = parents[state]
        steps.append(step)
    return "".join(reversed(steps))


def is_solvable(level: Level, max_states: int = 1_000_000) -> bool:
    """Whether some solution exists (not necessarily short): depth-first search over pushes.

    A state is the box mask plus the region the player can walk to, so walking is never searched.
    """
    width = level.width
    floor, goals = mask(level.floor), mask(level.goals)
    pushable_to = mask(live_cells(level))
    start_boxes = mask(level.boxes)
    stack = [(start_boxes, flood(1 << level.player, floor & ~start_boxes, width))]
    seen = set()
    while stack:
        boxes, reach = stack.pop()
        if boxes == goals:
            return True
        key = (boxes, reach & -reach)  # the lowest reachable cell names the player's region
        if key in seen:
            continue
        seen.add(key)
        if len(seen) >= max_states:
            return False
        targets = pushable_to & ~boxes
        for shift in (1, width):
            # Push towards higher cell numbers (right, down): player at b - shift, box at b, b + shift free.
            pushes = (reach << shift) & boxes & (targets >> shift)
            while pushes:
                box = pushes & -pushes
                pushes ^= box
                moved = boxes ^ box | (box << shift)
                stack.append((moved, flood(box, floor & ~moved, width)))
            # And towards lower numbers (left, up).
            pushes = (reach >> shift) & boxes & (targets << shift)
            while pushes:
                box = pushes & -pushes
                pushes ^= box
                moved = boxes ^ box | (box >> shift)
                stack.append((moved, flood(box, floor & ~moved, width)))
    return False


def replay(level: Level, lurd: str) -> Level:
    """The level after playing a LURD string; ValueError at the first blocked or mislabelled step.

    Upper case letters must push a box and lower case letters must not, as the format defines.
    """
    direction_of = {direction[0]: direction for direction in DIRECTIONS}
    for index, letter in enumerate(lurd, start=1):
        direction = direction_of.get(letter.upper())
        if direction is None:
            raise ValueError(f"LURD step {index}: {letter!r} is not one of l, u, r, d (or upper case)")
        after = level.moved(direction)
        if after is level:
            raise ValueError(f"LURD step {index}: {letter!r} is blocked")
        pushed = after.boxes != level.boxes
        if pushed != letter.isupper():
            raise ValueError(
                f"LURD step {index}: {letter!r} "
                + ("pushes a box; write it in upper case" if pushed else "pushes no box")
            )
        level = after
    return level
