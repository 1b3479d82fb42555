"""The one registry of environments: names, parameters (for the web form), construction and oracles."""

from diagnostics.quoting import quoted
from envs import bandit, frozenlake
from envs.base import TextEnv
from envs.sokoban import env as sokoban
from envs.spec import EnvSpec, Param, ParamError, keep_params, no_cross_checks

_REGISTRY: dict[str, EnvSpec] = {}


def register(
    name: str,
    description: str,
    env_class: type,
    params: list[Param],
    defaults: dict | None = None,
    prepare=keep_params,
    check=no_cross_checks,
    rollout: dict | None = None,
) -> None:
    """Add an environment; `defaults` makes a preset by changing some parameters' defaults; `rollout` is
    the episode shape a training preset starts from (see EnvSpec)."""
    defaults = defaults or {}
    params = [
        Param(**{**vars(param), "default": defaults.get(param.name, param.default)}) for param in params
    ]
    _REGISTRY[name] = EnvSpec(name, description, params, env_class, prepare, check, dict(rollout or {}))


def registry() -> dict[str, EnvSpec]:
    return dict(_REGISTRY)


def validate_params(name: str, params: dict) -> dict:
    """Every parameter of `name`, typed and checked, defaults filled in; ParamError (with .field) otherwise."""
    if name not in _REGISTRY:
        raise ParamError("name", f"unknown environment {quoted(name)} (known: {', '.join(_REGISTRY)})")
    return _REGISTRY[name].validate(params)


def make(name: str, **params) -> TextEnv:
    params = validate_params(name, params)
    return _REGISTRY[name].env_class(**params)


def oracle_success(name: str, params: dict, seeds, max_actions: int | None = None) -> float:
    """Mean success of the optimal policy over `seeds` (the "optimal" line of the dashboards).

    Bandit and Sokoban play the optimal choice / solution through the environment. FrozenLake gives the
    exact expected success per map (value iteration), not a sampled playout, so it has no sampling noise.
    `max_actions` limits the actions per episode (e.g. the trainer's cap); None means the env's own limit.
    """
    seeds = list(seeds)
    if not seeds:
        raise ValueError("oracle_success needs at least one seed")
    env = make(name, **params)
    total = 0.0
    for seed in seeds:
        env.reset(seed=seed)
        total += env.optimal_success(max_actions)
    return total / len(seeds)


def _register_all() -> None:
    for key, (low, high) in bandit.NAME_PAIRS.items():
        suffix = "" if key == "phoenix-dragon" else f"-{key}"
        for reversed_roles in (False, True):
            # Reversed: the intuitively risky name is the safe arm, so name-based reasoning misleads.
            low_name, high_name = (high, low) if reversed_roles else (low, high)
            name = f"bandit{suffix}{'-reversed' if reversed_roles else ''}"
            register(
                name,
                f"Two-armed bandit, one pull: {low_name} (pays a constant) or {high_name} (pays 1 with "
                f"probability 0.25); the better arm must be inferred from the names.",
                bandit.BanditEnv,
                bandit.PARAMS,
                {"low_risk_name": low_name, "high_risk_name": high_name},
                check=bandit.check_params,
                rollout=bandit.ROLLOUT,
            )
    register(
        "sokoban",
        "Sokoban, generated 6x6 rooms with 1 box: push every box onto a target (irreversible).",
        sokoban.SokobanEnv,
        sokoban.PARAMS,
        prepare=sokoban.prepare_params,
        check=sokoban.check_params,
    )
    register(
        "sokoban-alternate",
        "Sokoban as `sokoban` (the same room for a seed), drawn with the alternate "
        "symbols W . G B C A @: does what was learned carry over to new symbols?",
        sokoban.SokobanEnv,
        sokoban.PARAMS,
        {"vocabulary": "alternate"},
        prepare=sokoban.prepare_params,
        check=sokoban.check_params,
    )
    register(
        "sokoban-large",
        "Sokoban, generated 8x8 rooms with 2 boxes.",
        sokoban.SokobanEnv,
        sokoban.PARAMS,
        {"dim_room": 8, "num_boxes": 2},
        prepare=sokoban.prepare_params,
        check=sokoban.check_params,
    )
    register(
        "frozenlake",
        "FrozenLake, random 4x4 maps on slippery ice: reach the goal, avoid the holes.",
        frozenlake.FrozenLakeEnv,
        frozenlake.PARAMS,
        prepare=frozenlake.prepare_params,
        check=frozenlake.check_params,
    )


_register_all()
