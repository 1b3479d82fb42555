"""From what a user asked for (the form or the JSON API) to validated trainer configs, one per run.

An `ExperimentSpec` is either a trainer preset plus the choices a user makes (environment, model,
steps, overrides) or a complete TrainConfig dict. `plan(spec)` expands seeds x grid combinations and
validates every run's config with the trainer before anything is saved; problems come back as
`SpecError.errors`, keyed by the name of the input that caused them ("env.params.size", "model",
"steps", "grid", "seeds", "algorithm.kl_coef", ...), so the form and the API name the same field.
"""

import copy
import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from trainer.config import PRESETS, TINY_MODEL, ConfigError, TrainConfig, deep_merge, set_dotted
from webapp import environment
from webapp.core import jsonsafe

MAX_RUNS = 64
MAX_SEED = 2**31 - 1
MAX_STEPS = 10_000_000
MAX_LABEL_LENGTH = 300  # Run.label
DEFAULT_PRESET = "starpo"
GRID_PRESET_KEY = "preset"
# The inputs that have a field of their own; the rest of a config is edited as overrides.
OWN_FIELDS = {"env.name": "env", "model.name": "model", "schedule.steps": "steps", "seed": "seeds"}
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")


class SpecError(ConfigError):
    """Problems with an experiment's own inputs (seeds, grid, model, ...), keyed by field like the
    trainer's ConfigError."""


@dataclass
class ExperimentSpec:
    name: str
    seeds: list[int] = field(default_factory=lambda: [1])
    grid: dict[str, list] = field(default_factory=dict)
    preset: str = DEFAULT_PRESET  # ignored when `config` is given
    env: dict = field(default_factory=lambda: {"name": "", "params": {}})
    model: str = TINY_MODEL
    steps: int | None = None
    overrides: dict = field(default_factory=dict)
    config: dict | None = None  # a complete TrainConfig dict instead of preset + choices
    detector_overrides: dict = field(default_factory=dict)
    alert_recipients: list[str] = field(default_factory=list)
    alert_on_warnings: bool = False
    description: str = ""


@dataclass
class PlannedRun:
    label: str
    config: dict


# ---- parsing user input (text from the form, or JSON values from the API) -------------------------


def parse_seeds(value) -> list[int]:
    """ "1, 2,3" or [1, 2, 3] -> [1, 2, 3]; each a distinct integer >= 0."""
    items = value if isinstance(value, list) else [item for item in re.split(r"[,\s]+", str(value)) if item]
    if not items:
        raise ValueError("enter at least one seed, e.g. 1 or 1,2,3")
    seeds = []
    for item in items:
        whole = isinstance(item, int) or (isinstance(item, str) and item.isdigit())
        if isinstance(item, bool) or not whole:
            raise ValueError(f"{item!r} is not a whole number >= 0")
        if int(item) > MAX_SEED:
            raise ValueError(f"seed {item} is too large (at most {MAX_SEED})")
        if int(item) in seeds:
            raise ValueError(f"seed {int(item)} is listed twice")
        seeds.append(int(item))
    return seeds


def parse_grid(value) -> dict[str, list]:
    """Lines like "algorithm.filter_ratio = 0.25, 0.5" (values read as YAML), or a JSON mapping."""
    if isinstance(value, dict):
        grid = value
    elif isinstance(value, str):
        grid = {}
        for number, line in enumerate(value.splitlines(), start=1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            key, sep, raw = line.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"line {number}: expected 'section.field = value1, value2', got {line!r}")
            if key.strip() in grid:
                raise ValueError(f"line {number}: {key.strip()} is listed twice")
            grid[key.strip()] = [
                _yaml_scalar(item.strip(), number) for item in _top_level_items(raw) if item.strip()
            ]
    else:
        raise ValueError("expected an object of field -> list of values")
    for key, values in grid.items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][\w.]*", key):
            raise ValueError(f"{key!r} is not a config field name like algorithm.filter_ratio")
        if key == "seed":
            raise ValueError("list seeds in the seeds field, not in the grid")
        if not isinstance(values, list) or not values:
            raise ValueError(f"{key}: give at least one value")
        if len({repr(v) for v in values}) != len(values):
            raise ValueError(f"{key}: a value is listed twice")
    return grid


def _top_level_items(text: str) -> list[str]:
    """Split on the commas outside brackets, braces and quotes, so that a value may be a YAML flow list
    or mapping: `rollout = {env_groups: 32, group_size: 4}, {env_groups: 16, group_size: 8}`."""
    items, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        else:
            depth += (char in "[{") - (char in "]}")
            if char == "," and depth == 0:
                items.append(text[start:i])
                start = i + 1
    return items + [text[start:]]


def _yaml_scalar(text: str, line: int):
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, RecursionError):  # ValueError: an integer of over 4,300 digits
        raise ValueError(f"line {line}: {text[:100]!r} is not a valid value") from None


def parse_mapping(value, example: str) -> dict:
    """A YAML/JSON mapping typed in a textarea (or already a dict from the API); empty means {}."""
    if isinstance(value, dict):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if not isinstance(value, str):
        raise ValueError(f"expected a mapping like {example}")
    try:
        loaded = yaml.safe_load(value)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ValueError(f"not valid YAML{where}: {problem}") from None
    except (ValueError, RecursionError) as error:  # an integer of over 4,300 digits; nesting too deep
        raise ValueError(f"not valid YAML: {str(error)[:200] or 'nested too deeply'}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError(f"expected a mapping like {example}, got {type(loaded).__name__}")
    if jsonsafe.depth(loaded) > jsonsafe.MAX_DEPTH:
        raise ValueError(f"nested more than {jsonsafe.MAX_DEPTH} levels deep")
    _check_keys(loaded, "")
    return loaded


def _check_keys(mapping: dict, prefix: str):
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise ValueError(f"{prefix}{key!r}: keys must be names, not {type(key).__name__}")
        if isinstance(value, dict):
            _check_keys(value, f"{prefix}{key}.")


def parse_overrides(value) -> dict:
    """Trainer settings on top of the preset; the fields with inputs of their own are refused here,
    so that no value is silently ignored."""
    overrides = parse_mapping(value, "{algorithm: {kl_coef: 0.0}}")
    if "env" in overrides:
        raise ValueError("env: choose the environment and its parameters with their own fields")
    for dotted, name in OWN_FIELDS.items():
        if dotted != "env.name" and dotted_get(overrides, dotted) is not None:
            raise ValueError(f"{dotted}: set it in the {name} field instead")
    if dotted_get(overrides, "model.warm_start"):  # a model folder: the model field's own checks
        try:
            overrides["model"]["warm_start"] = resolve_model(str(overrides["model"]["warm_start"]))
        except ValueError as error:
            raise ValueError(f"model.warm_start: {error}") from None
    return overrides


def dotted_get(mapping, dotted: str):
    for part in dotted.split("."):
        if not isinstance(mapping, dict) or part not in mapping:
            return None
        mapping = mapping[part]
    return mapping


def parse_recipients(value) -> list[str]:
    if not isinstance(value, list):
        value = [item for item in re.split(r"[,;\s]+", str(value or "")) if item]
    items = value
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"{item!r} is not an email address")
        try:
            validate_email(item)
        except ValidationError:
            raise ValueError(f"{item!r} is not a valid email address") from None
    return [item.strip() for item in items]


def check_detector_overrides(overrides: dict) -> dict:
    from diagnostics import Detector

    Detector(overrides=overrides)  # ValueError naming rule.param
    return overrides


def resolve_model(value: str) -> str:
    """The one resolver for every way a model name enters (form, API, grids, YAML import, re-run,
    ablations, and the worker before it loads): "tiny", a Hugging Face hub id, or a folder strictly
    inside MODEL_ROOT after resolving symlinks (returned as an absolute path), never inside
    CHECKPOINT_ROOT (other runs' checkpoints). Every refused local path gets the same message, so an
    error never tells whether a path outside MODEL_ROOT exists."""
    value = (value or "").strip() if isinstance(value, str) else value
    if not isinstance(value, str) or not value:
        raise ValueError(
            f"enter '{TINY_MODEL}', a hub id like Qwen/Qwen2.5-0.5B-Instruct, or a folder in MODEL_ROOT"
        )
    if value == TINY_MODEL:
        return value
    root = Path(settings.MODEL_ROOT).resolve()
    candidate = Path(value)
    local = (
        candidate.is_absolute()
        or value.startswith((".", "~"))
        or ".." in candidate.parts
        or "\\" in value
        or (root / candidate).is_dir()
    )
    if not local:
        if HUB_ID.fullmatch(value):
            return value
        raise ValueError(
            f"{value[:100]!r} is neither '{TINY_MODEL}', a hub id like org/name, nor a folder in MODEL_ROOT"
        )
    path = (root / candidate).resolve()
    checkpoints = Path(settings.CHECKPOINT_ROOT).resolve()
    if path == root or not path.is_relative_to(root) or path.is_relative_to(checkpoints) or not path.is_dir():
        raise ValueError(
            f"there is no model folder {value[:100]!r} inside MODEL_ROOT "
            "(local models are folders inside MODEL_ROOT)"
        )
    return str(path)


def _resolve_model_field(value: str) -> str:
    try:
        return resolve_model(value)
    except ValueError as error:
        raise ConfigError({"model.name": str(error)}) from None


def spec_from_json(body) -> ExperimentSpec:
    """The API's JSON body -> ExperimentSpec, or SpecError naming every bad field."""
    if not isinstance(body, dict):
        raise SpecError({"body": "expected a JSON object"})
    errors: dict[str, str] = {}
    known = {
        "name",
        "description",
        "seeds",
        "grid",
        "preset",
        "env",
        "model",
        "steps",
        "overrides",
        "config",
        "detector_overrides",
        "alert_recipients",
        "alert_on_warnings",
    }
    for key in body:
        if key not in known:
            errors[key] = f"unknown field (known: {', '.join(sorted(known))})"
    spec = ExperimentSpec(name="")

    def take(key, parse):
        if key in body:
            try:
                setattr(spec, key, parse(body[key]))
            except ValueError as error:
                errors[key] = str(error)

    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        errors["name"] = "required: a non-empty string"
    elif len(name) > 200:
        errors["name"] = "at most 200 characters"
    else:
        spec.name = name.strip()
    take("description", lambda v: _typed(v, str, "a string"))
    take("seeds", parse_seeds)
    take("grid", parse_grid)
    take(
        "detector_overrides",
        lambda v: check_detector_overrides(parse_mapping(v, "{grad_spike: {tolerance: 5}}")),
    )
    take("alert_recipients", parse_recipients)
    take("alert_on_warnings", lambda v: _typed(v, bool, "true or false"))
    if "config" in body:
        for key in ("preset", "env", "model", "steps", "overrides"):
            if key in body:
                errors[key] = "give either a complete 'config' or preset/env/model/steps/overrides, not both"
        take("config", lambda v: _typed(v, dict, "an object (a complete trainer config)"))
    else:
        take("preset", _check_preset)
        take("model", lambda v: resolve_model(_typed(v, str, "a string")))
        take("steps", _check_steps)
        take("overrides", parse_overrides)
        env = body.get("env")
        if not isinstance(env, dict) or not isinstance(env.get("name"), str):
            errors["env"] = 'required: an object like {"name": "frozenlake", "params": {"size": 4}}'
        elif not isinstance(env.get("params", {}), dict) or set(env) - {"name", "params"}:
            errors["env"] = 'expected {"name": ..., "params": {...}} and nothing else'
        else:
            spec.env = {"name": env["name"], "params": dict(env.get("params", {}))}
    if errors:
        raise SpecError(errors)
    return spec


def _typed(value, kind, description):
    if not isinstance(value, kind):
        raise ValueError(f"expected {description}, got {value!r}")
    return value


def _check_preset(value):
    if not isinstance(value, str) or value not in PRESETS:
        raise ValueError(f"unknown preset {value!r}; choose from {', '.join(PRESETS)}")
    return value


def _check_steps(value):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STEPS:
        raise ValueError(f"expected a whole number from 1 to {MAX_STEPS}, got {value!r}")
    return value


# ---- expansion and validation ---------------------------------------------------------------------


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
    check_int64(spec)
    combos = combinations(spec.grid) if spec.grid else [{}]
    total = len(combos) * len(spec.seeds)
    if total > MAX_RUNS:
        where = "grid" if spec.grid else "seeds"
        raise SpecError(
            {
                where: f"this makes {total} runs ({len(combos)} combinations x "
                f"{len(spec.seeds)} seeds); the limit is {MAX_RUNS} per experiment"
            }
        )
    errors: dict[str, str] = {}
    runs = []
    for combination in combos:
        for seed in spec.seeds:
            try:
                config = resolve(spec, {**combination, "seed": seed})
                # Every mode (preset, complete config, grid) meets the same resolver.
                config.model.name = _resolve_model_field(config.model.name)
                check_limits(config)
            except ValueError as error:  # ConfigError from the trainer, the resolver or the limits
                problems = error.errors
                for key, message in problems.items():
                    if key in combination:
                        errors.setdefault("grid", f"{key} = {format_value(combination[key])}: {message}")
                    else:
                        errors.setdefault(input_name(spec, key), message)
                continue
            label = run_label(seed, combination)
            if len(label) > MAX_LABEL_LENGTH:
                errors.setdefault(
                    "grid",
                    f"the run label {label[:60]!r}... is longer than "
                    f"{MAX_LABEL_LENGTH} characters: use fewer or shorter grid values",
                )
            if config.schedule.steps > MAX_STEPS:
                errors.setdefault(input_name(spec, "schedule.steps"), f"must be at most {MAX_STEPS}")
            runs.append(PlannedRun(label, config.to_dict()))
    if errors:
        raise SpecError(errors)
    return runs


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
            over(name, dotted_get(config.to_dict(), name))
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


def check_int64(spec: ExperimentSpec) -> None:
    """SpecError naming the first integer beyond 64 bits in anything the experiment would store."""
    errors = {}
    inputs = {
        "grid": spec.grid,
        "overrides": spec.overrides,
        "config": spec.config,
        "env": spec.env,
        "detector_overrides": spec.detector_overrides,
    }
    for name, value in inputs.items():
        where = jsonsafe.beyond_int64(value)
        if where:
            errors[name] = f"{where}: integers must fit in 64 bits (at most {jsonsafe.INT64_MAX})"
    if errors:
        raise SpecError(errors)


def input_name(spec: ExperimentSpec, config_key: str) -> str:
    """The input a trainer error belongs to: its own field, or the dotted config key itself."""
    if spec.config is not None:
        return "seeds" if config_key == "seed" else f"config.{config_key}"
    return OWN_FIELDS.get(config_key, config_key)


# ---- back from a saved config to the form's inputs ("re-run with changes", YAML import) ----------


def describe(config: dict, preset: str = "", grid_keys=()) -> dict:
    """The inputs that reproduce `config`: preset, env, model, steps and the overrides on top of the
    preset. Without a preset, the one needing the fewest overrides is chosen. Fields the grid sets
    are left out of the overrides (the grid sets them again)."""
    env = config.get("env") or {}
    model = (config.get("model") or {}).get("name", TINY_MODEL)
    steps = (config.get("schedule") or {}).get("steps")
    inputs = {
        "env": {"name": env.get("name", ""), "params": dict(env.get("params") or {})},
        "model": model,
        "steps": steps,
    }
    candidates = [preset] if preset in PRESETS else list(PRESETS)
    best = None
    for name in candidates:
        try:
            base = TrainConfig.preset(
                name,
                env=inputs["env"],
                model={"name": model},
                schedule={"steps": steps} if isinstance(steps, int) else {},
            ).to_dict()
        except ConfigError:
            base = TrainConfig().to_dict()
        overrides = _difference(config, base, "", set(grid_keys))
        if best is None or _size(overrides) < _size(best[1]):
            best = (name, overrides)
    return {**inputs, "preset": best[0], "overrides": best[1]}


def _difference(config: dict, base: dict, prefix: str, ignore: set[str]) -> dict:
    out = {}
    for key, value in config.items():
        dotted = prefix + key
        if dotted in OWN_FIELDS or dotted == "env.params" or dotted in ignore:
            continue
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            nested = _difference(value, base[key], dotted + ".", ignore)
            if nested:
                out[key] = nested
        elif key not in base or not _same(base[key], value):
            out[key] = value
    return out


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _size(overrides: dict) -> int:
    return sum(_size(v) if isinstance(v, dict) else 1 for v in overrides.values())


def display_model(name: str) -> str:
    """A local model as the path relative to MODEL_ROOT the user typed."""
    root = Path(settings.MODEL_ROOT).resolve()
    path = Path(name)
    if path.is_absolute() and path.is_relative_to(root):
        return str(path.relative_to(root))
    return name


def grid_text(grid: dict[str, list]) -> str:
    return "\n".join(f"{key} = {', '.join(format_value(v) for v in values)}" for key, values in grid.items())


def dump_yaml(mapping: dict) -> str:
    return yaml.safe_dump(mapping, sort_keys=False) if mapping else ""
