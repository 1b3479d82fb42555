"""FrozenLake with gymnasium FrozenLake-v1 dynamics, random maps per seed, rendered in the paper's symbols.

Maps use gymnasium's letters: S start, F frozen, H hole, G goal. On slippery ice an action goes the
intended way with probability 1/3 and to each perpendicular side with probability 1/3; a move into the
border leaves the player in place.
"""

import functools
from collections import deque

from envs.base import TextEnv
from envs.spec import Param, ParamError

# Index order is gymnasium's action numbering: 0 Left, 1 Down, 2 Right, 3 Up.
ACTIONS = ["Left", "Down", "Right", "Up"]
MOVES = [(0, -1), (1, 0), (0, 1), (-1, 0)]
MAP_LETTERS = "SFHG"

SYMBOLS = {
    "P": "player",
    "_": "frozen ice",
    "O": "hole",
    "G": "goal",
    "X": "player fallen in a hole",
    "√": "player on the goal",
}

# The most rows, and tiles a row, of a fixed map. Every run's config is checked with a search of its map
# (goal_reachable), twice: a map of 1,000 x 1,000 tiles held one request for 15 s, and 300 x 300 in an
# experiment of 64 runs (a 90 KB body) for 45 s. A random map is at most 12 wide.
MAX_MAP_SIDE = 64

PARAMS = [
    Param("size", "int", 4, min=2, max=12, label="Map size", help="Width and height of a random map."),
    Param(
        "frozen_prob",
        "float",
        0.8,
        min=0.1,
        max=1.0,
        label="Chance a tile is frozen",
        help="Probability that a tile of a random map is frozen rather than a hole.",
    ),
    Param(
        "slippery",
        "bool",
        True,
        label="Slippery ice",
        help="Slippery ice: 1/3 intended direction, 1/3 each perpendicular one (gymnasium's is_slippery).",
    ),
    Param(
        "map",
        "str",
        "",
        label="Fixed map",
        help="A fixed map instead of random ones: rows of S, F, H, G (one S, at least one G), separated "
        f"by new lines or commas, at most {MAX_MAP_SIDE} x {MAX_MAP_SIDE}; overrides the map size and the "
        "chance a tile is frozen.",
        lines=True,
    ),
]


def prepare_params(params: dict) -> dict:
    """A map given as a list of rows (gymnasium's `desc`) is stored as text, one row per line."""
    if isinstance(params.get("map"), (list, tuple)):
        return {**params, "map": "\n".join(str(row) for row in params["map"])}
    return params


def check_params(owner: str, params: dict) -> dict:
    if params["map"]:
        rows = parse_map(params["map"], owner)
        # as random maps are redrawn: every episode on it would fail
        if not _fixed_map_reachable(tuple(rows)):
            raise ParamError("map", f"{owner}.map: no path over frozen tiles leads from S to a G")
        return {**params, "map": "\n".join(rows)}
    return params


def parse_map(text: str, owner: str = "frozenlake") -> list[str]:
    """Rows of a map from text with new lines or commas between rows; ParamError naming `map`."""
    rows = [row.strip() for row in text.replace(",", "\n").splitlines() if row.strip()]
    if len(rows) > MAX_MAP_SIDE:
        raise ParamError("map", f"{owner}.map has {len(rows)} rows; at most {MAX_MAP_SIDE}")
    if rows and len(rows[0]) > MAX_MAP_SIDE:
        raise ParamError("map", f"{owner}.map row 1 has {len(rows[0])} tiles; at most {MAX_MAP_SIDE}")
    for number, row in enumerate(rows, start=1):
        if len(row) != len(rows[0]):
            raise ParamError(
                "map", f"{owner}.map row {number} has {len(row)} tiles, row 1 has {len(rows[0])}"
            )
        unknown = set(row) - set(MAP_LETTERS)
        if unknown:
            raise ParamError(
                "map", f"{owner}.map row {number}: unknown tile {sorted(unknown)[0]!r} (use S, F, H, G)"
            )
    tiles = "".join(rows)
    if tiles.count("S") != 1:
        raise ParamError("map", f"{owner}.map needs exactly one start S, got {tiles.count('S')}")
    if "G" not in tiles:
        raise ParamError("map", f"{owner}.map needs a goal G")
    return rows


# An experiment's runs share their map, and each run's config is checked twice: searched once (a 64 x 64 map in
# 64 runs took 2.7 s).
@functools.lru_cache(maxsize=16)
def _fixed_map_reachable(rows: tuple[str, ...]) -> bool:
    return goal_reachable(list(rows))


def goal_reachable(rows: list[str]) -> bool:
    start = next((r, c) for r, row in enumerate(rows) for c, tile in enumerate(row) if tile == "S")
    seen, queue = {start}, deque([start])
    while queue:
        row, col = queue.popleft()
        if rows[row][col] == "G":
            return True
        for d_row, d_col in MOVES:
            r, c = row + d_row, col + d_col
            if 0 <= r < len(rows) and 0 <= c < len(rows[0]) and (r, c) not in seen and rows[r][c] != "H":
                seen.add((r, c))
                queue.append((r, c))
    return False


ORACLE_DISCOUNT = 0.95


class FrozenLakeEnv(TextEnv):
    actions = ACTIONS
    success_means = "the goal G was reached"
    symbols = SYMBOLS
    instruction = (
        "You are walking on a frozen lake. Reach the goal without falling into a hole. The ice is slippery: "
        "you may slide to a side instead of going where you intended. Symbols: "
        + ", ".join(f"{symbol} {meaning}" for symbol, meaning in SYMBOLS.items())
        + f". Actions: {', '.join(ACTIONS)}; write several actions separated by ||, e.g. Left || Down."
    )

    def __init__(self, size, frozen_prob, slippery, map):
        super().__init__()
        self.size = size
        self.frozen_prob = frozen_prob
        self.slippery = slippery
        self.fixed_map = parse_map(map) if map else None
        if not slippery:
            self.instruction = self.instruction.replace(
                "The ice is slippery: you may slide to a side instead of going where you intended. ", ""
            )
        self.rows: list[str] = []
        self.position = (0, 0)

    def _reset(self) -> None:
        self.rows = self.fixed_map or self._random_map()
        self.position = next(
            (r, c) for r, row in enumerate(self.rows) for c, tile in enumerate(row) if tile == "S"
        )

    def _random_map(self) -> list[str]:
        """Tiles frozen with probability frozen_prob, random start and goal; redrawn until the goal is reachable."""
        cells = self.size * self.size
        while True:
            tiles = ["F" if self.rng.random() < self.frozen_prob else "H" for _ in range(cells)]
            start, goal = self.rng.sample(range(cells), 2)
            tiles[start], tiles[goal] = "S", "G"
            rows = ["".join(tiles[r * self.size : (r + 1) * self.size]) for r in range(self.size)]
            if goal_reachable(rows):
                return rows

    def _step(self, action: str) -> tuple[float, bool, dict]:
        intended = ACTIONS.index(action)
        direction = (intended + self.rng.choice((-1, 0, 1))) % 4 if self.slippery else intended
        before = self.position
        self.position = self._next_position(before, direction)
        tile = self.rows[self.position[0]][self.position[1]]
        reached_goal = tile == "G"
        info: dict = {"success": reached_goal, "action_is_effective": self.position != before}
        if direction != intended:  # the ice slid it sideways: the trajectory viewer says so
            info["went"] = ACTIONS[direction]
        return (1.0 if reached_goal else 0.0), tile in "GH", info

    def _next_position(self, position: tuple[int, int], direction: int) -> tuple[int, int]:
        row = min(max(position[0] + MOVES[direction][0], 0), len(self.rows) - 1)
        col = min(max(position[1] + MOVES[direction][1], 0), len(self.rows[0]) - 1)
        return row, col

    def _extra_info(self) -> dict:
        return {"position": self.position}

    def render(self) -> str:
        glyphs = {"S": "_", "F": "_", "H": "O", "G": "G"}
        player_glyphs = {"S": "P", "F": "P", "H": "X", "G": "√"}
        return "\n".join(
            "".join(
                (player_glyphs if (r, c) == self.position else glyphs)[tile] for c, tile in enumerate(row)
            )
            for r, row in enumerate(self.rows)
        )

    def transitions(self, position: tuple[int, int], action: str) -> dict[tuple[int, int], float]:
        """Next-position probabilities of one action, the model the oracle plans with."""
        intended = ACTIONS.index(action)
        directions = [(intended + turn) % 4 for turn in (-1, 0, 1)] if self.slippery else [intended]
        probabilities: dict[tuple[int, int], float] = {}
        for direction in directions:
            after = self._next_position(position, direction)
            probabilities[after] = probabilities.get(after, 0.0) + 1 / len(directions)
        return probabilities

    def optimal_success(self, max_actions: int | None = None) -> float:
        """The optimal policy's probability of reaching the goal (exact, by value iteration on the map).

        With `max_actions`, the probability of reaching it within that many actions; without, the limit
        of unbounded play (iterated until values change by less than 1e-12).
        """
        return self._values(max_actions)[self.position]

    def oracle_action(self) -> str:
        """The action with the highest probability of reaching the goal (value iteration); among equally
        safe actions the one that gets there soonest (values discounted by ORACLE_DISCOUNT): no waiting."""
        moves = self._moves()
        safe, soon = self._values(None, moves=moves), self._values(None, ORACLE_DISCOUNT, moves)

        def expected(value, action):
            return sum(p * value[after] for after, p in self.transitions(self.position, action).items())

        return max(ACTIONS, key=lambda action: (round(expected(safe, action), 9), expected(soon, action)))

    def oracle_plan(self, length: int, actions_after: int) -> list[str] | None:
        """On slippery ice the oracle's next action depends on where the last one slid, which a model
        writing a turn's actions at once does not see. The plan instead: of every sequence of `length`
        actions, the one whose end state (a distribution; the goal and holes end the episode) has the
        highest chance of reaching the goal with the `actions_after` actions left after the turn,
        played optimally; among equal chances (none at all, say, when the goal is out of reach in the
        budget) the one that gets there soonest without the budget, as oracle_action breaks its ties. On
        the 256 validation seeds (4x4, 5 actions a turn, 10 in all) these plans reach the goal in 43% of
        episodes, the step-by-step oracle in 50%, random play in 21% (bench/learning.py).
        The search visits every sequence, 4^length of them: on a 4x4 map about a tenth of a second a
        plan at 5 actions, half a second at 7."""
        if not self.slippery:
            return None
        moves = self._moves()
        value, soon = self._values(actions_after, moves=moves), self._values(None, ORACLE_DISCOUNT, moves)
        best: tuple[tuple[float, float], list[str]] = ((-1.0, -1.0), [])

        def search(where: dict[tuple[int, int], float], plan: list[str]) -> None:
            nonlocal best
            moving = {cell: p for cell, p in where.items() if cell in moves}
            if len(plan) == length or not moving:
                score = (
                    round(sum(p * value[cell] for cell, p in where.items()), 9),
                    sum(p * soon[cell] for cell, p in where.items()),
                )
                if score > best[0]:  # exact ties keep the first found, in ACTIONS order
                    best = (score, list(plan))
                return
            for action in ACTIONS:
                after = {cell: p for cell, p in where.items() if cell not in moving}
                for cell, p in moving.items():
                    for to, q in moves[cell][action].items():
                        after[to] = after.get(to, 0.0) + p * q
                plan.append(action)
                search(after, plan)
                plan.pop()

        search({self.position: 1.0}, [])
        return best[1]

    def _moves(self) -> dict[tuple[int, int], dict[str, dict[tuple[int, int], float]]]:
        """{cell on the ice: {action: next-position probabilities}}: the model value iteration and the
        plans search, built once per question."""
        return {
            (r, c): {action: self.transitions((r, c), action) for action in ACTIONS}
            for r, row in enumerate(self.rows)
            for c, tile in enumerate(row)
            if tile in "SF"
        }

    def _values(
        self, max_actions: int | None, discount: float = 1.0, moves: dict | None = None
    ) -> dict[tuple[int, int], float]:
        cells = [(r, c) for r in range(len(self.rows)) for c in range(len(self.rows[0]))]
        model = moves if moves is not None else self._moves()
        walkable = list(model)
        value = {cell: 1.0 if self.rows[cell[0]][cell[1]] == "G" else 0.0 for cell in cells}
        iteration = 0
        while max_actions is None or iteration < max_actions:
            iteration += 1
            updated = {
                **value,
                **{
                    cell: discount
                    * max(
                        sum(p * value[after] for after, p in outcomes.items())
                        for outcomes in model[cell].values()
                    )
                    for cell in walkable
                },
            }
            change = max(abs(updated[cell] - value[cell]) for cell in cells)
            value = updated
            if max_actions is None and change < 1e-12:
                break
        return value
