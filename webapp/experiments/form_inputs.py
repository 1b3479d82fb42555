"""Back from a saved config to the form's inputs: "re-run with changes" and the YAML import fill the new
experiment form with what reproduces a config (describe), the grid as the form's text (grid_text, which
spec_parsing.parse_grid reads back), a local model as the path the user typed, mappings as YAML."""

import math
from pathlib import Path

import yaml
from django.conf import settings

from trainer.config import PRESETS, TINY_MODEL, ConfigError, TrainConfig
from webapp.experiments.run_planning import format_value
from webapp.experiments.specs import OWN_FIELDS


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
