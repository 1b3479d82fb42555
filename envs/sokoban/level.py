"""A Sokoban level as immutable data, the move rules, and the XSB text format.

Cells are flat indices `row * width + col`, which keeps moves to one addition and lets the solver and
the generator use the same numbers as bit positions.
"""

import dataclasses
import functools
from dataclasses import dataclass

# Direction names in LURD order; a move's LURD letter is the first letter of its name.
DIRECTIONS = ("Left", "Up", "Right", "Down")

XSB_FLOOR = " -_"
XSB_CHARS = "#@+$*." + XSB_FLOOR


@dataclass(frozen=True)
class Level:
    width: int
    height: int
    walls: frozenset[int]
    floor: frozenset[int]  # cells inside the walls that the player can reach when boxes are ignored
    goals: frozenset[int]
    boxes: frozenset[int]
    player: int
    title: str = ""

    def cell(self, row: int, col: int) -> int:
        return row * self.width + col

    def position(self, cell: int) -> tuple[int, int]:
        return divmod(cell, self.width)

    def delta(self, direction: str) -> int:
        return {"Left": -1, "Up": -self.width, "Right": 1, "Down": self.width}[direction]

    @property
    def boxes_on_goals(self) -> int:
        return len(self.boxes & self.goals)

    @property
    def is_solved(self) -> bool:
        return self.boxes == self.goals

    def moved(self, direction: str) -> "Level":
        """The level after the player tries to go `direction`; the same object when the move is blocked.

        A box ahead is pushed when the cell behind it is free floor; a wall or a second box blocks.
        """
        delta = self.delta(direction)
        ahead = self.player + delta
        if ahead not in self.floor:
            return self
        if ahead not in self.boxes:
            return dataclasses.replace(self, player=ahead)
        behind = ahead + delta
        if behind not in self.floor or behind in self.boxes:
            return self
        return dataclasses.replace(self, player=ahead, boxes=(self.boxes - {ahead}) | {behind})

    def render(self, symbols: str) -> str:
        """Rows of text; `symbols` lists wall, floor, goal, box, box on goal, player, player on goal."""
        wall, floor, goal, box, box_on_goal, player, player_on_goal = tuple(symbols)
        rows = []
        for row in range(self.height):
            line = []
            for cell in range(row * self.width, (row + 1) * self.width):
                on_goal = cell in self.goals
                if cell == self.player:
                    line.append(player_on_goal if on_goal else player)
                elif cell in self.boxes:
                    line.append(box_on_goal if on_goal else box)
                elif cell in self.floor:
                    line.append(goal if on_goal else floor)
                else:
                    line.append(wall)  # walls, and the outside of hand-made levels, are equally impassable
            rows.append("".join(line))
        return "\n".join(rows)


def to_xsb(levels: "Level | list[Level]") -> str:
    """XSB text for one level or a list of levels (blank line between levels, titles as `Title:` lines)."""
    if isinstance(levels, Level):
        levels = [levels]
    return "\n\n".join(_level_to_xsb(level) for level in levels) + "\n"


def _level_to_xsb(level: Level) -> str:
    lines = [f"Title: {level.title}"] if level.title else []
    for row in range(level.height):
        line = []
        for cell in range(row * level.width, (row + 1) * level.width):
            on_goal = cell in level.goals
            if cell in level.walls:
                line.append("#")
            elif cell == level.player:
                line.append("+" if on_goal else "@")
            elif cell in level.boxes:
                line.append("*" if on_goal else "$")
            else:
                line.append("." if on_goal else " ")
        lines.append("".join(line).rstrip())
    return "\n".join(lines)


def parse_xsb(text: str) -> list[Level]:
    """Every level in an XSB text. Raises ValueError("XSB line N: ...") for a malformed level.

    A board line is one whose first character after leading floor characters is `#`. Lines starting
    with `;` are comments; other text lines are titles: a `Title:` line right below a board names that
    board, any other text line names the next board.
    """
    return list(_parsed_xsb(text))


# Levels are immutable, so a text parsed once stands for every later parse of it: an experiment's runs share
# their level, and each run's config is validated and its environment built (three parses a run: a 64 x 64
# level in 64 runs held the request for 7 s).
@functools.lru_cache(maxsize=16)
def _parsed_xsb(text: str) -> tuple[Level, ...]:
    levels: list[Level] = []
    board: list[tuple[int, str]] = []
    board_title = pending_title = ""
    last_board_line = -1
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if line.lstrip(XSB_FLOOR).startswith("#"):
            if not board:
                board_title, pending_title = pending_title, ""
            board.append((line_no, line))
            last_board_line = line_no
            continue
        if board:
            levels.append(_parse_board(board, board_title))
            board = []
        text_line = line.strip()
        if not text_line or text_line.startswith(";"):
            continue
        is_title_tag = text_line.lower().startswith("title:")
        title = text_line[len("title:") :].strip() if is_title_tag else text_line
        if is_title_tag and line_no == last_board_line + 1 and not levels[-1].title:
            levels[-1] = dataclasses.replace(levels[-1], title=title)
        else:
            pending_title = title
    if board:
        levels.append(_parse_board(board, board_title))
    if not levels:
        raise ValueError("XSB text contains no level (a level's rows start with '#')")
    return tuple(levels)


def _parse_board(board: list[tuple[int, str]], title: str) -> Level:
    first_line = board[0][0]
    height, width = len(board), max(len(row) for _, row in board)
    walls, goals, boxes, players = set(), set(), set(), []
    for row, (line_no, text) in enumerate(board):
        for col, char in enumerate(text):
            cell = row * width + col
            if char not in XSB_CHARS:
                raise ValueError(f"XSB line {line_no}: unknown character {char!r} at column {col + 1}")
            if char == "#":
                walls.add(cell)
            if char in "+*.":
                goals.add(cell)
            if char in "$*":
                boxes.add(cell)
            if char in "@+":
                players.append((line_no, cell))
    if not players:
        raise ValueError(f"XSB line {first_line}: no player")
    if len(players) > 1:
        raise ValueError(f"XSB line {players[1][0]}: a second player")
    if not boxes:
        raise ValueError(f"XSB line {first_line}: no boxes")
    if len(boxes) != len(goals):
        raise ValueError(
            f"XSB line {first_line}: {len(boxes)} boxes but {len(goals)} goals; "
            f"a level needs one goal per box"
        )
    player = players[0][1]
    floor = _enclosed_floor(player, walls, width, height, board)
    for cells, what in ((boxes, "box"), (goals, "goal")):
        outside = sorted(cells - floor)
        if outside:
            raise ValueError(f"XSB line {board[outside[0] // width][0]}: a {what} outside the walls")
    return Level(width, height, frozenset(walls), floor, frozenset(goals), frozenset(boxes), player, title)


def _enclosed_floor(
    player: int, walls: set[int], width: int, height: int, board: list[tuple[int, str]]
) -> frozenset[int]:
    """The non-wall cells reachable from the player; ValueError when they reach the edge of the board."""
    floor, frontier = {player}, [player]
    while frontier:
        cell = frontier.pop()
        row, col = divmod(cell, width)
        if row in (0, height - 1) or col in (0, width - 1) or col >= len(board[row][1]):
            raise ValueError(
                f"XSB line {board[row][0]}: the walls are not closed "
                f"(the player can walk out at column {col + 1})"
            )
        for neighbour in (cell - 1, cell + 1, cell - width, cell + width):
            if neighbour not in walls and neighbour not in floor:
                floor.add(neighbour)
                frontier.append(neighbour)
    return frozenset(floor)
