"""The Sokoban text environment: gym-sokoban's rules and rewards over generated or fixed levels."""

from pathlib import Path

from diagnostics.quoting import quoted
from envs.base import TextEnv
from envs.sokoban.generator import generate_room
from envs.sokoban.level import DIRECTIONS, XSB_FLOOR, Level, parse_xsb, to_xsb
from envs.sokoban.solver import solve
from envs.spec import Param, ParamError

# wall, floor, goal, box, box on goal, player, player on goal
VOCABULARIES = {
    "default": "#_OX√PS",
    "alternate": "W.GBCA@",
}
SYMBOL_MEANINGS = ("wall", "empty floor", "target", "box", "box on target", "player", "player on target")

# gym-sokoban's rewards
STEP_PENALTY = -0.1
BOX_ON_TARGET_REWARD = 1.0
BOX_OFF_TARGET_PENALTY = -1.0
FINISH_REWARD = 10.0

PARAMS = [
    Param(
        "dim_room",
        "int",
        6,
        min=5,
        max=12,
        label="Room size",
        help="Width and height of a generated room, walls included (5 is the smallest with room to pull).",
    ),
    Param(
        "num_boxes", "int", 1, min=1, max=4, label="Boxes", help="Boxes (and targets) in a generated room."
    ),
    Param(
        "search_budget",
        "int",
        10_000,
        min=10,
        max=300_000,
        label="Generator's search budget",
        help="Generator effort: most reverse-play states explored per room layout (gym-sokoban: 300000 "
        "single moves); a smaller budget generates faster but may give easier rooms.",
    ),
    Param(
        "max_steps",
        "int",
        100,
        min=1,
        max=10_000,
        label="Most actions an episode",
        help="The episode ends, unsolved, after this many valid actions.",
    ),
    Param(
        "vocabulary",
        "choice",
        "default",
        choices=tuple(VOCABULARIES),
        label="Grid symbols",
        help="Grid symbols: default '# _ O X √ P S', alternate 'W . G B C A @' "
        "(to test that learning is not tied to the symbols).",
    ),
    Param(
        "level",
        "str",
        "",
        label="Fixed level",
        help="A fixed level in XSB text (# wall, @ player, + player on goal, $ box, * box on goal, "
        ". goal, space/-/_ floor), rows separated by new lines or |, instead of generated rooms.",
        lines=True,
    ),
    Param(
        "levels",
        "str",
        "",
        label="Level set file",
        help="Path to an .xsb file with a level set; each seed draws one level from it "
        "(on a server: a file in its LEVELS_ROOT).",
    ),
]

ACTIONS = ["Up", "Down", "Left", "Right"]


class LevelFiles:
    """Where a `levels` file may be read from. `root` None (the trainer's CLI on one's own machine): any
    path. A server sets its folder (the web app: LEVELS_ROOT), so that a form cannot make it read other
    files; there a relative path is read inside the folder, and every refusal reads the same, whether or
    not a file outside exists."""

    root: Path | None = None


def _level_file(value: str, owner: str) -> Path:
    root = LevelFiles.root
    if root is None:
        if not Path(value).is_file():
            raise ParamError("levels", f"{owner}.levels: no such file {quoted(value)}")
        return Path(value)
    path = (root / value).resolve()  # an absolute value stands for itself
    if not path.is_relative_to(root) or not path.is_file():
        raise ParamError(
            "levels",
            f"{owner}.levels: there is no level file {quoted(value)} in this server's level folder "
            "(LEVELS_ROOT; level sets are .xsb files inside it)",
        )
    return path


def prepare_params(params: dict) -> dict:
    """A parsed Level is accepted for `level` and stored as its XSB text, which is what the form and the
    database hold."""
    if isinstance(params.get("level"), Level):
        return {**params, "level": to_xsb(params["level"])}
    return params


def check_params(owner: str, params: dict) -> dict:
    """Cross-parameter rules; a fixed level is parsed now so XSB errors reach the form, not the worker."""
    if params["num_boxes"] > (params["dim_room"] - 2) ** 2 // 4:
        raise ParamError(
            "num_boxes",
            f"{owner}.num_boxes={params['num_boxes']} does not fit a "
            f"{params['dim_room']}x{params['dim_room']} room; use fewer boxes",
        )
    # One line of text (an API value, a grid cell, a CLI override) gives its rows between | (RLE Sokoban's
    # row separator), as frozenlake's map takes commas: stored one row per line.
    level, levels = params["level"].replace("|", "\n"), params["levels"]
    if level and levels:
        raise ParamError("levels", f"{owner}: give either level or levels, not both")
    if level:
        _check_level_size(level, owner)
        parsed = _parse(level, "level", owner)
        if len(parsed) != 1:
            raise ParamError(
                "level",
                f"{owner}.level must hold one level, got {len(parsed)} (use levels=<path> for a level set)",
            )
        params = {**params, "level": level}
    if levels:
        path = _level_file(levels, owner)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ParamError(
                "levels", f"{owner}.levels: cannot read {quoted(levels)} as text ({error})"
            ) from None
        _parse(text, "levels", owner)
        if LevelFiles.root is not None:
            return {**params, "levels": str(path)}
    return params


# The most rows, and columns a row, of a fixed level (a generated room is at most 12 wide). Every run's config
# parses its level three times, walking its floor: a 99 x 99 level held an experiment of 64 runs for 20 s.
MAX_LEVEL_SIDE = 64


def _check_level_size(text: str, owner: str) -> None:
    """ParamError when the level's board (its rows of walls, as parse_xsb finds them) is larger than
    MAX_LEVEL_SIDE either way; checked before the level is parsed."""
    rows = [line.rstrip() for line in text.splitlines() if line.lstrip(XSB_FLOOR).startswith("#")]
    if len(rows) > MAX_LEVEL_SIDE:
        raise ParamError("level", f"{owner}.level has {len(rows)} rows; at most {MAX_LEVEL_SIDE}")
    widest = max(rows, key=len, default="")
    if len(widest) > MAX_LEVEL_SIDE:
        raise ParamError(
            "level", f"{owner}.level has a row of {len(widest)} columns; at most {MAX_LEVEL_SIDE}"
        )


def _parse(text: str, field: str, owner: str) -> list[Level]:
    try:
        return parse_xsb(text)
    except ValueError as error:
        raise ParamError(field, f"{owner}.{field}: {error}") from None


class SokobanEnv(TextEnv):
    actions = ACTIONS
    success_means = "every box was pushed onto a target"

    def __init__(self, dim_room, num_boxes, search_budget, max_steps, vocabulary, level, levels):
        super().__init__()
        self.dim_room = dim_room
        self.num_boxes = num_boxes
        self.search_budget = search_budget
        self.max_steps = max_steps
        self.vocabulary = VOCABULARIES[vocabulary]
        self.symbols = dict(zip(self.vocabulary, SYMBOL_MEANINGS))
        if levels:
            level = Path(levels).read_text(encoding="utf-8")
        self.fixed_levels = parse_xsb(level) if level else []  # empty: generate a room per seed
        self.instruction = self._instruction()
        self._level: Level | None = None
        self.steps_taken = 0

    @property
    def level(self) -> Level:
        """The room as it stands now; only exists once reset() has drawn it."""
        if self._level is None:
            raise RuntimeError("call reset() before reading the level")
        return self._level

    def _instruction(self) -> str:
        legend = ", ".join(f"{symbol} {meaning}" for symbol, meaning in self.symbols.items())
        return (
            "You are solving a Sokoban puzzle. You are the player; push every box onto a target. "
            "Moving into a box pushes it one cell if the cell behind it is empty floor or a target; you cannot "
            "pull boxes, push two boxes at once, or walk through walls. Some pushes cannot be undone. "
            f"Symbols: {legend}. Actions: {', '.join(self.actions)}; "
            "write several actions separated by ||, e.g. Right || Right || Up."
        )

    def _reset(self) -> None:
        if self.fixed_levels:
            self._level = self.rng.choice(self.fixed_levels)
        else:
            self._level = generate_room(self.rng, self.dim_room, self.num_boxes, self.search_budget)
        self.steps_taken = 0

    def _step(self, action: str) -> tuple[float, bool, dict]:
        before = self.level
        self._level = before.moved(action)
        self.steps_taken += 1
        reward = STEP_PENALTY
        # As gym-sokoban: rewards follow the count of boxes on targets, so moving a box from one target to
        # another earns nothing.
        if self.level.boxes_on_goals > before.boxes_on_goals:
            reward += BOX_ON_TARGET_REWARD
        elif self.level.boxes_on_goals < before.boxes_on_goals:
            reward += BOX_OFF_TARGET_PENALTY
        solved = self.level.is_solved
        if solved:
            reward += FINISH_REWARD
        done = solved or self.steps_taken >= self.max_steps
        return reward, done, {"success": solved, "action_is_effective": self.level is not before}

    def render(self) -> str:
        return self.level.render(self.vocabulary)

    def oracle_action(self) -> str:
        """The first move of an optimal solution (BFS); Up when the room cannot be solved from here."""
        solution = solve(self.level)
        if not solution:
            return "Up"
        return {direction[0]: direction for direction in DIRECTIONS}[solution[0].upper()]

    def optimal_success(self, max_actions: int | None = None) -> float:
        """1.0 when the optimal solution exists and fits the step limits, checked by playing it here."""
        solution = solve(self.level)
        limit = self.max_steps if max_actions is None else min(self.max_steps, max_actions)
        if solution is None or len(solution) > limit:
            return 0.0
        direction_of = {direction[0]: direction for direction in DIRECTIONS}
        success = self.level.is_solved
        for letter in solution:
            _, _, _, info = self.step(direction_of[letter.upper()])
            success = info["success"]
        return float(success)
