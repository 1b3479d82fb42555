"""An ExperimentSpec -> one validated trainer config per run. `plan(spec)` expands seeds x grid
combinations and validates every run's config with the trainer and this server's limits
(settings.RUN_LIMITS) before anything is saved; SpecError lists every problem, keyed by the input that
caused it."""

import copy
import dataclasses
import itertools
import json
import math
from typing import Any

import yaml
from django.conf import settings

import envs
from diagnostics.quoting import quoted
from trainer.config import ConfigError, TrainConfig
from trainer.overrides import deep_merge, flatten, get_dotted, set_dotted
from webapp import environment
from webapp.core import jsonsafe
from webapp.core.wording import counted
from webapp.experiments.spec_parsing import resolve_model, resolve_warm_start
from webapp.experiments.specs import (
    GRID_PRESET_KEY,
    MAX_LABEL_LENGTH,
    MAX_RUNS,
    MAX_STEPS,
    OWN_FIELDS,
    ExperimentSpec,
    PlannedRun,
    SpecError,
)


def resolve_model_fields(config) -> None:
    """A TrainConfig's model name and warm start through the one resolver, in place, however they came
    (field, grid, overrides, a complete config; the worker asks again before loading): never a folder
    outside MODEL_ROOT. ConfigError names the field."""
    try:
        config.model.name = resolve_model(config.model.name)
    except ValueError as error:
        raise ConfigError({"model.name": str(error)}) from None
    if config.model.warm_start:
        try:
            config.model.warm_start = resolve_warm_start(config.model.warm_start)
        except ValueError as error:
            raise ConfigError({"model.warm_start": str(error)}) from None


def combinations(grid: dict[str, list]) -> list[dict]:
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[key] for key in keys))]


def run_label(seed: int, combination: dict) -> str:
    return " ".join([f"seed={seed}"] + [f"{key}={format_value(value)}" for key, value in combination.items()])


def format_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()


def resolve(spec: ExperimentSpec, assignments: dict[str, Any]) -> TrainConfig:
    """One run's config: the spec with dotted assignments (a grid combination and the seed) applied."""
    if spec.config is not None:
        if GRID_PRESET_KEY in assignments:
            raise ConfigError({GRID_PRESET_KEY: "only an experiment that starts from a preset can vary it"})
        config = copy.deepcopy(spec.config)
        for key, value in assignments.items():
            set_dotted(config, key, value)
        return TrainConfig.from_dict(config)
    user = copy.deepcopy(spec.overrides)
    deep_merge(
        user,
        {
            "env": {"name": spec.env["name"], "params": dict(spec.env.get("params", {}))},
            "model": {"name": spec.model},
        },
    )
    if spec.steps is not None:
        deep_merge(user, {"schedule": {"steps": spec.steps}})
    preset = spec.preset
    for key, value in assignments.items():
        if key == GRID_PRESET_KEY:
            preset = value
        else:
            set_dotted(user, key, value)
    return TrainConfig.preset(preset, **user)


def plan(spec: ExperimentSpec) -> list[PlannedRun]:
    """Every run of the experiment, each config validated; SpecError lists every problem found."""
    check_storable(spec)
    # Counted before any is built: 200 keys of two values each are 2**200 combinations
    combination_count = math.prod(len(values) for values in (spec.grid or {}).values())
    total = combination_count * len(spec.seeds)
    if total > MAX_RUNS:
        where = "grid" if spec.grid else "seeds"
        combos, seeds = counted(combination_count, "combination"), counted(len(spec.seeds), "seed")
        runs = counted(total, "run")
        raise SpecError(
            {where: f"this makes {runs} ({combos} x {seeds}); the limit is {MAX_RUNS} per experiment"}
        )
    overridden = _grid_keys_overridden(spec)
    if overridden:
        raise SpecError(overridden)
    combos = combinations(spec.grid) if spec.grid else [{}]
    errors: dict[str, str] = {}
    runs = []
    inert = []  # (combination, the fields its config does not read), one per run
    for combination in combos:
        for seed in spec.seeds:
            try:
                config = _checked_config(spec, {**combination, "seed": seed})
            except ValueError as error:  # ConfigError from the trainer, the resolver or the limits
                for where, message in _attributed(spec, combination, error.errors):
                    errors.setdefault(where, message)
                continue
            label = run_label(seed, combination)
            if len(label) > MAX_LABEL_LENGTH:
                errors.setdefault(
                    "grid",
                    f"the run label {quoted(label)} is longer than "
                    f"{MAX_LABEL_LENGTH} characters: use fewer or shorter grid values",
                )
            if not 1 <= config.schedule.steps <= MAX_STEPS:  # the trainer takes 0; a run here trains
                problem = f"must be from 1 to {MAX_STEPS}"
                if "schedule.steps" in combination:
                    grid_value = format_value(combination["schedule.steps"])
                    errors.setdefault("grid", f"schedule.steps = {grid_value}: {problem}")
                else:
                    errors.setdefault(input_name(spec, "schedule.steps"), problem)
            # Every environment parameter, defaults filled in: two runs with the same environment store the
            # same params however they were asked for (the form lists every field, the API only some), so
            # a config diff shows real differences only.
            config.env.params = envs.validate_params(config.env.name, config.env.params)
            preset = "" if spec.config is not None else combination.get(GRID_PRESET_KEY, spec.preset)
            runs.append(PlannedRun(label, config.to_dict(), preset))
            inert.append((combination, config.inert_fields()))
    if "grid" in errors:
        cells, bad_keys = _grid_cell_problems(spec)
        errors = {**_problems_without(spec, bad_keys), **errors, **cells}
    if not errors:
        errors = {**_unread_overrides(spec, inert), **_no_effect_problems(runs, inert)}
    if errors:
        raise SpecError(errors)
    return runs


def _grid_keys_overridden(spec: ExperimentSpec) -> dict[str, str]:
    """A grid key the overrides also set: the grid's values would replace the override in every run, so
    the override is refused rather than silently dropped."""
    overridden = set(flatten(spec.overrides or {}))
    clashes = [key for key in spec.grid or {} if any(o == key or o.startswith(key + ".") for o in overridden)]
    if not clashes:
        return {}
    names = ", ".join(clashes)
    return {
        "overrides": f"{names} {'is' if len(clashes) == 1 else 'are'} also in the grid, whose values replace "
        "the override in every run: set it in one place"
    }


def _unread_overrides(spec: ExperimentSpec, inert: list) -> dict[str, str]:
    """Overrides no run reads (filter_ratio under a preset that does not filter): taken silently, the
    experiment would look like it tested the setting (a tester's filter_ratio 0.5 under starpo). Unless the
    overrides turn it off themselves: `val_every: 0` beside `val_seeds` is validation switched off on purpose."""
    keys = list(flatten(spec.overrides or {}))
    unread = [
        key
        for key in keys
        if inert
        and all(key in fields for _, fields in inert)
        and not any(other != key and other in inert[0][1][key] for other in keys)  # the reason names it
    ]
    if not unread:
        return {}
    why = "; ".join(f"{key} is not read while {inert[0][1][key]}" for key in unread)
    return {"overrides": f"{why}: leave it out, or change what turns it off"}


def _no_effect_problems(runs: list[PlannedRun], inert: list) -> dict[str, str]:
    """Grid cells that train the same runs (same seed, same config but for fields their configs do not
    read, such as filter_ratio under a preset that does not filter): copies that spend compute and read
    as "the field has no effect"."""
    errors: dict[str, str] = {}
    first_of: dict[str, dict] = {}
    for run, (combination, unread) in zip(runs, inert):
        effective = run.config
        for key in unread:
            effective = _without(effective, key)
        same = first_of.setdefault(json.dumps(effective, sort_keys=True), combination)  # seed included
        if same is not combination:
            varied = [key for key in combination if combination[key] != same[key]]
            values = "; ".join(
                f"{key} = {format_value(same[key])} and {format_value(combination[key])}" for key in varied
            )
            why = "; ".join(f"{key} is not read while {unread[key]}" for key in varied if key in unread)
            cells = ", ".join(
                f"{key} = {format_value(value)}" for key, value in same.items() if key not in varied
            )
            where = f" where {cells}" if cells else ""
            errors.setdefault("grid", f"{values} train the same runs{where}" + (f": {why}" if why else ""))
    for key in inert[0][0] if inert else ():  # no run reads it: a one-value line labels the runs with it
        if key != GRID_PRESET_KEY and all(key in unread for _, unread in inert):
            errors.setdefault("grid", f"{key} is not read while {inert[0][1][key]}")
    return errors


def _without(config: dict, dotted: str) -> dict:
    """A copy of config without one dotted field (the sections on its path copied, the rest shared)."""
    head, _, rest = dotted.partition(".")
    if not rest:
        return {key: value for key, value in config.items() if key != head}
    return {**config, head: _without(config[head], rest)}


def _checked_config(spec: ExperimentSpec, assignments: dict[str, Any]) -> TrainConfig:
    config = resolve(spec, assignments)
    resolve_model_fields(config)  # every mode (preset, complete config, grid) alike
    check_limits(config)
    return config


_CONFIG_SECTIONS = {field.name for field in dataclasses.fields(TrainConfig)}


def _attributed(spec: ExperimentSpec, combination: dict, problems: dict[str, str]):
    """(input, message) for each of a run's config problems: the grid for a grid key's problem, its
    section's (`nope.key`: "nope" is unknown), or a field's inside a grid value that is a whole section
    (`rollout = {group_size: 99999}`); else the input the key came from."""
    for key, message in problems.items():
        cell = next(
            (c for c in combination if c == key or c.startswith(key + ".") or key.startswith(c + ".")),
            None,
        )
        if cell is None and key.startswith("env.params.") and "env.name" in combination:
            # the environment's parameters as the form gives them, for another environment
            cell = "env.name"
            message += (
                f" (the parameters given are {spec.env['name']}'s: for a grid over environments, "
                "grid over env = {name: ..., params: {...}} instead)"
            )
        if cell is not None and spec.config is None and "." not in key and key not in _CONFIG_SECTIONS:
            message += f"; a grid also varies {GRID_PRESET_KEY}"  # the trainer's list lacks it
        if cell is not None:
            problem = message if cell == key else f"{key}: {message}"
            yield "grid", f"{cell} = {format_value(combination[cell])}: {problem}"
        else:
            yield input_name(spec, key), message


def _grid_cell_problems(spec: ExperimentSpec) -> tuple[dict[str, str], set[str]]:
    """Each grid value judged alone against the trainer's config (an unknown key, a value of the wrong
    type: one bad key failed every combination before a second bad value was looked at): every bad cell,
    up to five, in one message, and the keys that have one. Limits that depend on the other inputs
    (tokens per step) are the combinations' to judge, not a cell's."""
    found: list[str] = []
    bad_keys: set[str] = set()
    for key, values in spec.grid.items():
        cells: list[list[str]] = []
        for value in values:
            try:
                resolve(spec, {key: value, "seed": spec.seeds[0]})
            except ValueError as error:
                cell = [m for where, m in _attributed(spec, {key: value}, error.errors) if where == "grid"]
                cells.append([m.removeprefix(f"{key} = {format_value(value)}: ") for m in cell])
                found += cell
            else:
                cells.append([])
        if any(cells):
            bad_keys.add(key)
        if len(values) > 1 and all(cell and cell == cells[0] for cell in cells):
            # Every value fails alike (an unknown key): said once for the key, not once per value.
            found = [m for m in found if not m.startswith(f"{key} = ")] + [f"{key}: {m}" for m in cells[0]]
    unique = list(dict.fromkeys(found))
    more = f" (and {len(unique) - 5} more)" if len(unique) > 5 else ""
    return ({"grid": "; ".join(unique[:5]) + more} if unique else {}), bad_keys


def _problems_without(spec: ExperimentSpec, bad_keys: set[str]) -> dict[str, str]:
    """The other inputs' problems, planned without the grid keys that fail alone (a bad key fails every
    run first, hiding them); the grid's own are left to the caller."""
    if not bad_keys:
        return {}
    try:
        plan(dataclasses.replace(spec, grid={k: v for k, v in spec.grid.items() if k not in bad_keys}))
    except SpecError as planned:
        return {where: message for where, message in planned.errors.items() if where != "grid"}
    return {}


def every_problem(spec: ExperimentSpec, errors: dict[str, str]) -> dict[str, str]:
    """`errors` (the fields refused as read, the spec holding defaults in their place) and what planning
    the rest finds, so that one answer names every bad field; a field keeps its first problem."""
    if "env" in errors or "config" in errors or "body" in errors:
        return errors  # nothing to plan
    try:
        plan(spec)
    except SpecError as planned:
        return {**planned.errors, **errors}
    return errors


def check_limits(config: TrainConfig) -> None:
    """ConfigError naming each size above this server's limit (settings.RUN_LIMITS, LIMIT_<NAME>)."""
    limits = settings.RUN_LIMITS
    errors = {}

    def over(field: str, value: int, what: str = ""):
        if field in limits and value > limits[field] and field not in errors:
            errors[field] = (
                f"{what}{value} is above this server's limit of {limits[field]} "
                f"(the operator sets it with {environment.limit_variable(field)})"
            )

    for name in limits:
        if "." in name:
            over(name, get_dotted(config.to_dict(), name))
    if errors:  # the product below would blame max_new_tokens for a size already refused on its own
        raise ConfigError(errors)
    r = config.rollout
    over(
        "rollout_tokens",
        r.env_groups * r.group_size * r.max_turns * r.max_new_tokens,
        "env_groups x group_size x max_turns x max_new_tokens = ",
    )
    over(
        "rollout_tokens",
        r.val_seeds * r.max_turns * r.max_new_tokens,
        "val_seeds x max_turns x max_new_tokens = ",
    )
    if "rollout_tokens" in errors:  # named by the input a user sets
        errors.setdefault("rollout.max_new_tokens", errors.pop("rollout_tokens"))
        errors.pop("rollout_tokens", None)
    if errors:
        raise ConfigError(errors)


BEYOND_64_BITS = (
    f"numbers must fit in 64 bits (integers at most {jsonsafe.INT64_MAX}, floats at most about 1.8e308)"
)


def check_storable(spec: ExperimentSpec) -> None:
    """SpecError naming, in anything the experiment would store, the first integer beyond 64 bits and the
    first text that is not valid Unicode (a YAML or JSON escape can make a lone surrogate)."""
    errors: dict[str, str] = {}
    inputs = {
        "name": spec.name,
        "description": spec.description,
        "grid": spec.grid,
        "overrides": spec.overrides,
        "config": spec.config,
        "env": spec.env,
        "detector_overrides": spec.detector_overrides,
    }
    for name, value in inputs.items():
        where = jsonsafe.beyond_int64(value)
        if where:
            key, message = _storable_problem(spec, name, where, BEYOND_64_BITS)
            errors[key] = message
        where = jsonsafe.unstorable_text(value)
        if where is not None:
            key, message = _storable_problem(spec, name, where, jsonsafe.UNSTORABLE_TEXT)
            errors.setdefault(key, message)
    if errors:
        raise SpecError(errors)


# The inputs that are parts of a trainer config, with where each sits in one.
CONFIG_INPUTS = {"overrides": "", "env": "env.", "config": ""}


def _storable_problem(spec: ExperimentSpec, name: str, where: str, problem: str) -> tuple[str, str]:
    """(error key, message) for `problem` at `where` inside input `name`: a config part's problem keyed by
    its config field, as the trainer's problems with it are (`rollout.group_size`, `env.params.size`,
    `config.seed`); another input's keyed by the input, the message saying where."""
    if name not in CONFIG_INPUTS:
        return name, f"{where}: {problem}" if where else problem
    path = CONFIG_INPUTS[name] + where
    field = path.partition("[")[0]  # an element of a list is reported on the list's field
    return input_name(spec, field), problem if path == field else f"{path}: {problem}"


def input_name(spec: ExperimentSpec, config_key: str) -> str:
    """The input a trainer error belongs to: its own field, or the dotted config key itself."""
    if spec.config is not None:
        return "seeds" if config_key == "seed" else f"config.{config_key}"
    return OWN_FIELDS.get(config_key, config_key)
