"""Sokoban: gym-sokoban's rules and rewards, XSB levels, the solver and the room generator."""

import itertools
import random

import pytest

import envs
from envs.sokoban import GenerationError, generate_room, is_solvable, parse_xsb, replay, solve, to_xsb
from envs.sokoban.env import LevelFiles

ONE_PUSH_TO_WIN = "#####\n#@$.#\n#####"


def play(level_text, *actions, **params):
    env = envs.make("sokoban", level=level_text, **params)
    env.reset(seed=0)
    return env, [env.step(action) for action in actions]


def test_pushing_the_last_box_home_pays_step_plus_target_plus_finish():
    env, [(observation, reward, done, info)] = play(ONE_PUSH_TO_WIN, "Right")
    assert reward == pytest.approx(-0.1 + 1 + 10)
    assert done and info["success"] and info["action_is_effective"]
    assert observation == "#####\n#_P√#\n#####"


def test_box_onto_a_target_without_finishing():
    _, [(_, reward, done, info)] = play("########\n#@$. $.#\n########", "Right")
    assert reward == pytest.approx(0.9) and not done and not info["success"]


def test_pushing_a_box_off_a_target_costs_one():
    _, [(_, reward, done, _)] = play("#######\n#@* $.#\n#######", "Right")
    assert reward == pytest.approx(-1.1) and not done


def test_moving_a_box_from_target_to_target_earns_nothing_extra():
    # gym-sokoban rewards changes in the count of boxes on targets, and this push keeps it at one.
    _, [(observation, reward, _, _)] = play("######\n#@*. #\n#  $ #\n######", "Right")
    assert reward == pytest.approx(-0.1)
    assert observation.splitlines()[1] == "#_S√_#"  # the player now stands on the vacated target


@pytest.mark.parametrize(
    "level",
    [
        "######\n#@$# #\n#   .#\n######",  # wall behind the box
        "#######\n#@$$..#\n#######",  # a second box behind the box
    ],
)
def test_blocked_push_changes_nothing_but_costs_a_step(level):
    env, [(observation, reward, done, info)] = play(level, "Right")
    assert observation == envs.make("sokoban", level=level).reset(seed=0)
    assert reward == pytest.approx(-0.1) and not done
    assert info["action_is_valid"] and not info["action_is_effective"]


def test_walking_into_a_wall_costs_a_step():
    _, [(_, reward, _, info)] = play(ONE_PUSH_TO_WIN, "Up")
    assert reward == pytest.approx(-0.1) and not info["action_is_effective"]


def test_episode_ends_unsolved_after_max_steps_and_invalid_words_do_not_count():
    env, steps = play("#######\n#@ $ .#\n#######", "Left", "Jump", "Left", max_steps=2)
    assert [done for _, _, done, _ in steps] == [False, False, True]
    assert steps[1][1] == 0.0 and not steps[2][3]["success"]


def test_symbols_and_alternate_vocabulary():
    text = "######\n#+$ *#\n#    #\n######"
    assert envs.make("sokoban", level=text).reset(seed=0) == "######\n#SX_√#\n#____#\n######"
    env = envs.make("sokoban", level=text, vocabulary="alternate")
    assert env.reset(seed=0) == "WWWWWW\nW@B.CW\nW....W\nWWWWWW"
    env.step("Right")
    assert env.render() == "WWWWWW\nWGABCW\nW....W\nWWWWWW"
    assert env.symbols == {
        "W": "wall",
        ".": "empty floor",
        "G": "target",
        "B": "box",
        "C": "box on target",
        "A": "player",
        "@": "player on target",
    }
    assert "W wall" in env.instruction


LEVEL_SET = """; a small set
Tiny
#####
#@$.#
#####

----#####
-####  .#
-#  $ # #
##@ $   #
#.  ##  #
#########
Title: Two boxes

  #####
###___#
#.@$__#
###_$.#
#.##$_#
#_#_._##
#$_*$$.#
#___.__#
########
"""


def test_xsb_levels_with_titles_comments_and_floor_variants():
    levels = parse_xsb(LEVEL_SET)
    assert [level.title for level in levels] == ["Tiny", "Two boxes", ""]
    assert [len(level.boxes) for level in levels] == [1, 2, 7]
    tiny = levels[0]
    assert (tiny.width, tiny.height, tiny.position(tiny.player)) == (5, 3, (1, 1))


def test_xsb_round_trip():
    levels = parse_xsb(LEVEL_SET)
    text = to_xsb(levels)
    assert parse_xsb(text) == levels
    assert to_xsb(parse_xsb(text)) == text
    assert text.splitlines()[:4] == ["Title: Tiny", "#####", "#@$.#", "#####"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("Title: x\n\n#####\n#$. #\n#####", "XSB line 3: no player"),
        ("#####\n#@$.#\n#$  #\n#####", "XSB line 1: 2 boxes but 1 goals"),
        ("#####\n#@$.#\n#  .#\n#####", "XSB line 1: 1 boxes but 2 goals"),
        ("#####\n#@$. \n#####", "XSB line 2: the walls are not closed"),
        ("#####\n#@$.#\n#  \n####", "XSB line 3: the walls are not closed"),
        ("#####\n#@$.#\n#x  #\n#####", "XSB line 3: unknown character 'x' at column 2"),
        ("#####\n#@$.#\n#@  #\n#####", "XSB line 3: a second player"),
        ("; only comments", "XSB text contains no level"),
    ],
)
def test_malformed_xsb_names_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        parse_xsb(text)
    with pytest.raises(envs.ParamError, match=f"sokoban.level: {message}") as caught:
        envs.make("sokoban", level=text)
    assert caught.value.field == "level"


def room(rows, columns):
    """A closed room of that size, its player, box and goal in the top row inside."""
    inside = "#@$." + " " * (columns - 5) + "#"
    return "\n".join(["#" * columns, inside, *["#" + " " * (columns - 2) + "#"] * (rows - 3), "#" * columns])


@pytest.mark.parametrize(
    "text, message",
    [
        (room(65, 10), "sokoban.level has 65 rows; at most 64"),
        (room(10, 65), "sokoban.level has a row of 65 columns; at most 64"),
        (room(10, 65).replace("\n", "|"), "a row of 65 columns"),  # one line: rows between bars
    ],
)
def test_a_fixed_level_larger_than_64_either_way_is_refused_before_it_is_parsed(text, message):
    assert len(parse_xsb(text.replace("|", "\n"))) == 1  # a level, only too large
    with pytest.raises(envs.ParamError, match=message) as caught:
        envs.validate_params("sokoban", {"level": text})
    assert caught.value.field == "level"
    assert envs.validate_params("sokoban", {"level": room(64, 64)})["level"] == room(64, 64)


def shortest_by_brute_force(level, longest):
    """Length of the shortest winning move sequence up to `longest`, trying every sequence."""
    for length in range(longest + 1):
        for moves in itertools.product(("Left", "Up", "Right", "Down"), repeat=length):
            state = level
            for move in moves:
                state = state.moved(move)
            if state.is_solved:
                return length
    return None


@pytest.mark.parametrize(
    "text", ["######\n#  . #\n# $  #\n#  @ #\n######", "#######\n#.  $ #\n#  @  #\n#######"]
)
def test_solver_is_optimal_and_its_solution_replays(text):
    level = parse_xsb(text)[0]
    solution = solve(level)
    assert replay(level, solution).is_solved
    assert len(solution) == shortest_by_brute_force(level, len(solution))


def test_solutions_of_the_level_set_replay():
    for level in parse_xsb(LEVEL_SET)[:2]:
        assert replay(level, solve(level)).is_solved


def test_solver_gives_lurd_with_pushes_in_upper_case():
    assert solve(parse_xsb(ONE_PUSH_TO_WIN)[0]) == "R"
    assert solve(parse_xsb("######\n#@ $.#\n######")[0]) == "rR"
    assert solve(parse_xsb("#####\n#.  #\n#$  #\n#@  #\n#####")[0]) == "U"
    assert solve(parse_xsb("#####\n#@$.#\n#####".replace("@$.", ".$@"))[0]) == "L"


def test_solver_reports_unsolvable_and_exhausted_budgets():
    cornered = parse_xsb("#####\n#$ .#\n#@  #\n#####")[0]
    assert solve(cornered) is None and not is_solvable(cornered)
    solvable = parse_xsb(LEVEL_SET)[1]
    assert solve(solvable, max_states=5) is None


def test_replay_rejects_blocked_and_mislabelled_steps():
    level = parse_xsb("######\n#@ $.#\n######")[0]
    with pytest.raises(ValueError, match="LURD step 1: 'u' is blocked"):
        replay(level, "u")
    with pytest.raises(ValueError, match="LURD step 2: 'r' pushes a box"):
        replay(level, "rr")
    with pytest.raises(ValueError, match="LURD step 1: 'R' pushes no box"):
        replay(level, "R")


@pytest.fixture
def any_level_file(monkeypatch):
    """The library as the trainer's CLI uses it: any path (the web app limits them to LEVELS_ROOT)."""
    monkeypatch.setattr(LevelFiles, "root", None)


def test_level_set_file_is_drawn_by_seed(tmp_path, any_level_file):
    path = tmp_path / "set.xsb"
    path.write_text(LEVEL_SET, encoding="utf-8")
    env = envs.make("sokoban", levels=str(path))
    first_rows = {env.reset(seed=seed) for seed in range(30)}
    assert len(first_rows) == 3
    assert env.reset(seed=4) == env.reset(seed=4)


def test_fixed_level_params(any_level_file):
    level = parse_xsb(ONE_PUSH_TO_WIN)[0]
    assert envs.validate_params("sokoban", {"level": level})["level"] == to_xsb(level)
    one_line = ONE_PUSH_TO_WIN.replace("\n", "|")  # an API value or a grid cell: rows between bars
    assert envs.validate_params("sokoban", {"level": one_line})["level"] == ONE_PUSH_TO_WIN
    with pytest.raises(envs.ParamError, match="must hold one level, got 3") as caught:
        envs.make("sokoban", level=LEVEL_SET)
    assert caught.value.field == "level"
    with pytest.raises(envs.ParamError, match="either level or levels") as caught:
        envs.make("sokoban", level=ONE_PUSH_TO_WIN, levels="set.xsb")
    assert caught.value.field == "levels"
    with pytest.raises(envs.ParamError, match="no such file") as caught:
        envs.make("sokoban", levels="/nonexistent/set.xsb")
    assert caught.value.field == "levels"


def test_a_server_reads_level_files_only_from_its_folder_and_refuses_the_rest_alike(tmp_path, monkeypatch):
    root, outside = tmp_path / "levels", tmp_path / "secret.txt"
    (root / "boxoban").mkdir(parents=True)
    (root / "boxoban" / "set.xsb").write_text(LEVEL_SET, encoding="utf-8")
    outside.write_text("password: hunter2\n")
    (root / "escape.xsb").symlink_to(outside)
    monkeypatch.setattr(LevelFiles, "root", root.resolve())
    params = envs.validate_params("sokoban", {"levels": "boxoban/set.xsb"})
    assert params["levels"] == str((root / "boxoban" / "set.xsb").resolve())
    assert len(envs.make("sokoban", **params).fixed_levels) == 3
    messages = set()
    for value in (str(outside), "../secret.txt", "escape.xsb", "/nonexistent.xsb", "boxoban", str(root)):
        with pytest.raises(envs.ParamError) as caught:
            envs.validate_params("sokoban", {"levels": value})
        assert caught.value.field == "levels"
        messages.add(str(caught.value).replace(repr(value), "<value>"))
    assert messages == {
        "sokoban.levels: there is no level file <value> in this server's level folder "
        "(LEVELS_ROOT; level sets are .xsb files inside it)"
    }


def test_same_seed_same_room():
    assert generate_room(random.Random(7), 8, 2, 10_000) == generate_room(random.Random(7), 8, 2, 10_000)
    assert len({generate_room(random.Random(seed), 6, 1, 10_000) for seed in range(20)}) > 15


@pytest.mark.parametrize("preset, dim, boxes", [("sokoban", 6, 1), ("sokoban-large", 8, 2)])
def test_a_thousand_generated_rooms_are_all_solvable(preset, dim, boxes):
    params = envs.validate_params(preset, {})
    for seed in range(1000):
        level = generate_room(random.Random(seed), dim, boxes, params["search_budget"])
        assert (level.width, level.height, len(level.boxes), len(level.goals)) == (dim, dim, boxes, boxes)
        assert not level.boxes & level.goals and level.player not in level.boxes
        border = {
            level.cell(r, c) for r in range(dim) for c in range(dim) if r in (0, dim - 1) or c in (0, dim - 1)
        }
        assert border <= level.walls
        assert is_solvable(level), to_xsb(level)
        if seed % 50 == 0:  # the optimal solver, slower, on a sample
            assert replay(level, solve(level)).is_solved


def test_tight_rooms_fail_with_a_clear_error():
    # A 5x5 room has a 3x3 inside; with 2 boxes most layouts leave no room to pull, yet some seeds work.
    rooms = [generate_room(random.Random(seed), 5, 2, 10_000) for seed in range(5)]
    assert all(is_solvable(room) for room in rooms)
    with pytest.raises(GenerationError, match="no solvable 5x5 room with 2 boxes"):
        generate_room(random.Random(0), 5, 2, search_budget=1)


def test_oracle_solves_every_room_and_respects_an_action_budget():
    assert envs.oracle_success("sokoban-large", {}, range(20)) == 1.0
    assert envs.oracle_success("sokoban-large", {}, range(20), max_actions=1) == 0.0
    env = envs.make("sokoban")
    lengths = []
    for seed in range(20):
        env.reset(seed=seed)
        lengths.append(len(solve(env.level)))
    budget = sorted(lengths)[10]
    expected = sum(length <= budget for length in lengths) / 20
    assert envs.oracle_success("sokoban", {}, range(20), max_actions=budget) == expected
    assert envs.oracle_success("sokoban", {"max_steps": budget}, range(20)) == expected


def _reachable_box_cells(floor: set[int], target: int, player: int, width: int) -> set[int]:
    """Every cell one box can be pulled to from its target (player walks freely, pulls one tile at a time)."""
    seen, todo = {(target, player)}, [(target, player)]
    while todo:
        box, player = todo.pop()
        for delta in (1, -1, width, -width):
            walk = player + delta
            if walk in floor and walk != box and (box, walk) not in seen:
                seen.add((box, walk))
                todo.append((box, walk))
            if (
                player == box + delta
                and box + 2 * delta in floor
                and (box + delta, box + 2 * delta) not in seen
            ):
                seen.add((box + delta, box + 2 * delta))  # the player steps away from the box, dragging it
                todo.append((box + delta, box + 2 * delta))
    return {box for box, _ in seen}


def test_one_box_rooms_score_by_displacement_alone():
    """RAGEN's gym-sokoban counts box swaps, not pulls: with one box every pulled state has one swap, so the
    room kept is a farthest one from the target (pulls x displacement preferred long detours)."""
    from envs.sokoban.generator import random_walk_floor, reverse_play

    rng, dim, checked = random.Random(3), 8, 0  # in 6x6 rooms both scores mostly agree
    for _ in range(300):
        floor = random_walk_floor(rng, dim, int(1.7 * 2 * dim))
        if len(floor) < 4:
            continue
        player, target = rng.sample(sorted(floor), 2)
        found = reverse_play(dim, floor, [target], player, 10_000)
        reachable = _reachable_box_cells(floor, target, player, dim) - {target}
        if found is None:
            assert not reachable
            continue
        distance = {
            cell: abs(cell // dim - target // dim) + abs(cell % dim - target % dim) for cell in reachable
        }
        assert distance[found[0][0]] == max(distance.values())
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("p_start", [0.8, 0.5])
def test_player_wander_follows_ragen(p_start):
    """In a corridor the walk cannot turn back (no revisits), so the distance walked is the number of steps:
    none with 1 - p_start; then 1, 2 or 3 steps with p_start * (1/2, 1/4, 1/4)."""
    from envs.sokoban.generator import wander

    width, n = 20, 8000
    corridor = {width + col for col in range(1, 19)}
    start = width + 10
    counts = [0, 0, 0, 0]
    for seed in range(n):
        end = wander(random.Random(seed), start, corridor, set(), width, p_start)
        counts[abs(end - start)] += 1
    expected = [1 - p_start, p_start / 2, p_start / 4, p_start / 4]
    for count, p in zip(counts, expected):
        assert abs(count / n - p) < 4 * (p * (1 - p) / n) ** 0.5
    boxed = wander(random.Random(0), start, corridor, {start - 1, start + 1}, width, 1.0)
    assert boxed == start  # boxes block the walk
