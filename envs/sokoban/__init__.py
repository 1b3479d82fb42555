"""Sokoban: the environment, its room generator, the XSB level format and the solver."""

from envs.sokoban.env import SokobanEnv
from envs.sokoban.generator import GenerationError, generate_room
from envs.sokoban.level import Level, parse_xsb, to_xsb
from envs.sokoban.solver import is_solvable, replay, solve

__all__ = [
    "GenerationError",
    "Level",
    "SokobanEnv",
    "generate_room",
    "is_solvable",
    "parse_xsb",
    "replay",
    "solve",
    "to_xsb",
]
