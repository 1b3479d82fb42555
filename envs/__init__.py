"""EchoLab's text environments (pure Python): Bandit, Sokoban and FrozenLake behind one registry.

env = envs.make("frozenlake", size=4)
obs = env.reset(seed=123)
obs, reward, done, info = env.step("Left")
"""

from envs.base import TextEnv
from envs.registry import make, oracle_success, register, registry, validate_params
from envs.spec import EnvSpec, Param, ParamError

__all__ = [
    "EnvSpec",
    "Param",
    "ParamError",
    "TextEnv",
    "make",
    "oracle_success",
    "register",
    "registry",
    "validate_params",
]
