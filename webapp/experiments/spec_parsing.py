"""The form's text or the API's JSON -> an ExperimentSpec (webapp.experiments.specs). Each parse_* takes
one input (a string from the form, or a JSON value from the API) and returns it parsed or raises
ValueError saying what is wrong; spec_from_json collects every field's problem into SpecError.errors.
resolve_model is the one resolver for every way a model name enters."""

import difflib
import json
import re
from pathlib import Path

import yaml
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from huggingface_hub import constants

import envs
from diagnostics.quoting import quoted
from trainer.config import PRESETS, TINY_MODEL, TrainConfig, typed
from trainer.overrides import ConfigError, deep_merge, get_dotted, load_yaml, set_dotted
from webapp.core import jsonsafe
from webapp.core.wording import counted
from webapp.experiments.specs import (
    MAX_DESCRIPTION,
    MAX_NAME,
    MAX_RUNS,
    MAX_SEED,
    MAX_STEPS,
    OWN_FIELDS,
    ExperimentSpec,
    SpecError,
)

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")


def parse_seeds(value) -> list[int]:
    """ "1, 2,3" or [1, 2, 3] -> [1, 2, 3]; each a distinct integer >= 0."""
    value = _whole(value)
    if isinstance(value, bool) or not isinstance(value, (list, str, int)):
        raise ValueError(
            f"expected a list of whole numbers or text like 1,2,3, got {jsonsafe.json_type(value)}"
        )
    if isinstance(value, str) and re.search(r"(^|,)\s*,", value.strip()):
        raise ValueError(f"an empty seed between commas in {quoted(value.strip())}; write them like 1,2,3")
    items = value if isinstance(value, list) else [item for item in re.split(r"[,\s]+", str(value)) if item]
    if not items:
        raise ValueError("enter at least one seed, e.g. 1 or 1,2,3")
    if len(items) > MAX_RUNS:  # one run per seed at least: say so before reading a million of them
        seeds, runs = counted(len(items), "seed"), counted(len(items), "run")
        raise ValueError(f"{seeds} make at least {runs}; the limit is {MAX_RUNS} per experiment")
    seeds = {}  # insertion-ordered; a set's lookups
    for index, item in enumerate(items):
        if isinstance(value, list) and isinstance(item, str):  # a list is JSON's or YAML's: numbers
            raise ValueError(f"seeds[{index}]: expected a whole number, got the text {quoted(item)}")
        seed = _seed(_whole(item))
        if seed in seeds:
            raise ValueError(f"seed {seed} is listed twice")
        seeds[seed] = None
    return list(seeds)


def _seed(item) -> int:
    """One seed: a JSON integer, or text of digits."""
    if isinstance(item, str) and re.fullmatch(r"[0-9]+", item):
        # Measured as text: Python converts no text of more than 4,300 digits to a number.
        seed = int(item) if len(item.lstrip("0")) <= len(str(MAX_SEED)) else MAX_SEED + 1
    elif isinstance(item, int) and not isinstance(item, bool) and item >= 0:
        seed = item
    else:
        raise ValueError(f"{quoted(item)} is not a whole number >= 0")
    if seed > MAX_SEED:
        raise ValueError(f"seed {quoted(item)} is too large (at most {MAX_SEED})")
    return seed


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
                raise ValueError(
                    f"line {number}: expected 'section.field = value1, value2', got {quoted(line)}"
                )
            key = key.strip()
            if key in grid:
                raise ValueError(f"line {number}: {quoted(key)} is listed twice")
            items = [item.strip() for item in _top_level_items(raw)]
            if len(items) > 1 and items[-1] == "":  # a trailing comma
                items.pop()
            if len(items) > 1 and "" in items:
                raise ValueError(
                    f"line {number}: {quoted(key)} has an empty value between commas (write null for no value)"
                )
            grid[key] = [_yaml_scalar(item, number) for item in items if item]
    else:
        raise ValueError("expected an object of field -> list of values")
    _check_text(grid)
    for key, values in grid.items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][\w.]*", key):
            raise ValueError(f"{quoted(key)} is not a config field name like algorithm.filter_ratio")
        if key == "seed":
            raise ValueError("list seeds in the seeds field, not in the grid")
        if not isinstance(values, list):
            raise ValueError(f"{key}: expected a list of values, got {jsonsafe.json_type(values)}")
        if not values:
            raise ValueError(f"{key}: give at least one value")
        seen = set()
        for value in values:
            # 1 and 1.0 are one value (two runs of the same config); true and 1 are not
            same = (
                ("number", value)
                if isinstance(value, (int, float)) and not isinstance(value, bool)
                else repr(value)
            )
            if same in seen:
                raise ValueError(f"{key}: the value {quoted(value)} is listed twice")
            seen.add(same)
    return grid


def _top_level_items(text: str, separators=",", brackets=("[{", "]}"), quotes="'\"") -> list[str]:
    """Split on the separators outside brackets and quotes, so that a grid's value may be a YAML flow list
    or mapping: `rollout = {env_groups: 32, group_size: 4}, {env_groups: 16, group_size: 8}` (and an
    address list's entry may be `"Smith, Eve" <eve@example.com>`)."""
    opening, closing = brackets
    items, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in quotes:
            quote = char
        else:
            depth += (char in opening) - (char in closing)
            if char in separators and depth == 0:
                items.append(text[start:i])
                start = i + 1
    return items + [text[start:]]


def _yaml_scalar(text: str, line: int):
    try:
        return load_yaml(text)
    except (yaml.YAMLError, ValueError, RecursionError):  # RecursionError: nested too deeply
        raise ValueError(f"line {line}: {quoted(text)} is not a valid value") from None


def parse_mapping(value, example: str) -> dict:
    """A YAML/JSON mapping typed in a textarea (or already a dict from the API); empty means {}."""
    if isinstance(value, dict):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if not isinstance(value, str):
        raise ValueError(f"expected a mapping like {example}")
    try:
        loaded = load_yaml(value)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ValueError(f"not valid YAML{where}: {problem}") from None
    except RecursionError:  # the parser goes one call deeper for each level
        raise ValueError(f"nested more than {jsonsafe.MAX_DEPTH} levels deep") from None
    except ValueError as error:  # a date that does not exist: 2024-13-45
        raise ValueError(f"not valid YAML: {error}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError(f"expected a mapping like {example}, got {type(loaded).__name__}")
    if jsonsafe.depth(loaded) > jsonsafe.MAX_DEPTH:
        raise ValueError(f"nested more than {jsonsafe.MAX_DEPTH} levels deep")
    _check_text(loaded)
    _check_keys(loaded, "")
    return loaded


def _check_text(value) -> None:
    """ValueError naming text a YAML escape made that is not valid Unicode: no message may quote it."""
    where = jsonsafe.unstorable_text(value)
    if where is not None:
        raise ValueError(f"{where}: {jsonsafe.UNSTORABLE_TEXT}" if where else jsonsafe.UNSTORABLE_TEXT)


def _check_keys(mapping: dict, prefix: str):
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise ValueError(f"{prefix}{quoted(key)}: keys must be names, not {type(key).__name__}")
        if isinstance(value, dict):
            _check_keys(value, f"{prefix}{key}.")


def parse_overrides(value) -> dict:
    """Trainer settings on top of the preset; the fields with inputs of their own are refused here,
    so that no value is silently ignored."""
    overrides = _nested(parse_mapping(value, "{algorithm: {kl_coef: 0.0}}"))
    if "env" in overrides:
        raise ValueError("env: choose the environment and its parameters with their own fields")
    for dotted, name in OWN_FIELDS.items():
        if dotted == "env.name":
            continue
        section, _, field = dotted.partition(".")
        if field and section in overrides and not isinstance(overrides[section], dict):
            # `schedule: 5` would replace the section the steps field fills, and be dropped with it
            raise ValueError(f"{section}: must be a mapping of its fields, as {{{field}: ...}}")
        if get_dotted(overrides, dotted) is not None:
            raise ValueError(f"{dotted}: set it in the {name} field instead")
    if get_dotted(overrides, "model.warm_start"):  # a model folder: the model field's own checks
        try:
            overrides["model"]["warm_start"] = resolve_warm_start(str(overrides["model"]["warm_start"]))
        except ValueError as error:
            raise ValueError(f"model.warm_start: {error}") from None
    return overrides


def _nested(overrides: dict) -> dict:
    """Top-level dotted keys as the sections they name ({"schedule.steps": 5} -> {"schedule": {"steps": 5}}),
    as the trainer reads them: checked in one spelling, a dotted key for a field with its own input was
    taken and then dropped."""
    nested: dict = {}
    for key, value in overrides.items():
        if "." in key:
            try:
                set_dotted(nested, key, value)
            except ConfigError as error:
                raise ValueError(str(error)) from None
        elif isinstance(value, dict) and isinstance(nested.get(key), dict):
            deep_merge(nested[key], value)
        else:
            nested[key] = value
    return nested


MAX_RECIPIENTS = 50
# The list as stored and shown in the alert form's field ("a@x.org, b@x.org"): the API's list and the
# form's text meet one limit, or a list the API took would not fit the form that shows it.
MAX_RECIPIENTS_TEXT = 2000


def _one_address(item) -> str:
    if not isinstance(item, str):
        raise ValueError(f"{quoted(item)} is not an email address")
    found = _written_addresses(item)
    if len(found) != 1:
        raise ValueError(f"{quoted(item.strip())} is not one email address")
    return found[0]


def _written_addresses(text: str) -> list[str]:
    """The addresses in text as people write lists of them: separated by commas, semicolons or spaces, or
    as a mail client copies them, "Bob <bob@example.com>, "Smith, Eve" <eve@example.com>" (the addresses
    are kept, the names dropped). An entry that is neither is named whole, as typed."""
    addresses = []
    for entry in _entries(text):
        named = re.fullmatch(r'(?:"[^"]*"|[^"<>])*<\s*([^<>\s]+)\s*>', entry)
        if named:
            addresses.append(named.group(1))
        elif any(char in entry for char in '<>"') or ("@" not in entry and len(entry.split()) > 1):
            raise ValueError(f"{quoted(entry)} is not an email address, nor a name and <address>")
        else:
            addresses.extend(entry.split())
    return addresses


def _entries(text: str) -> list[str]:
    """text split at the commas and semicolons outside double quotes and angle brackets (an apostrophe
    is a name's: O'Brien)."""
    return [entry.strip() for entry in _top_level_items(text, ",;", ("<", ">"), '"') if entry.strip()]


def parse_recipients(value) -> list[str]:
    if not isinstance(value, (list, str)):
        raise ValueError(
            f"expected a list of emails or text like a@example.com, b@example.com, got {jsonsafe.json_type(value)}"
        )
    # a list: each item one address, written as the text takes it ("Bob <bob@example.com>" too)
    value = [_one_address(item) for item in value] if isinstance(value, list) else _written_addresses(value)
    if len(value) > MAX_RECIPIENTS:
        raise ValueError(f"{len(value)} addresses; at most {MAX_RECIPIENTS}")
    addresses: dict[str, str] = {}  # lower-cased -> as written: one email per address
    for address in value:
        try:
            validate_email(address)
        except ValidationError:
            raise ValueError(f"{quoted(address)} is not a valid email address") from None
        if len(address.rpartition("@")[0]) > 64:  # RFC 5321's limit, which validate_email leaves open
            raise ValueError(f"{quoted(address)}: the part before @ is longer than 64 characters")
        addresses.setdefault(address.lower(), address)
    stored = len(", ".join(addresses.values()))
    if stored > MAX_RECIPIENTS_TEXT:
        raise ValueError(
            f"the addresses come to {stored:,} characters; at most {MAX_RECIPIENTS_TEXT:,} in all"
        )
    return list(addresses.values())


def check_detector_overrides(overrides: dict) -> dict:
    from diagnostics import Detector

    Detector(overrides=overrides)  # ValueError naming rule.param
    return overrides


def _not_a_typo(hub_id: str, root: Path) -> None:
    """A hub id without an organisation ("tinyy") that is nearly the name of a model here and is not in
    this machine's Hugging Face cache is a typo: refused with the name meant. It was queued, trained with
    a hub model's settings, and failed on a worker a minute later, unable to reach the hub."""
    if "/" in hub_id:
        return
    here = [TINY_MODEL, *(entry.name for entry in _children(root) if entry.is_dir())]
    near = difflib.get_close_matches(hub_id, here, n=1, cutoff=0.75)
    if near and not in_hub_cache(hub_id):
        raise ValueError(
            f"{quoted(hub_id)} is no model here and not in this machine's Hugging Face cache; did you mean "
            f"{quoted(near[0])}?"
        )


def resolve_warm_start(value: str) -> str:
    """resolve_model for model.warm_start: a folder in MODEL_ROOT (its help says so), or a hub checkpoint
    named org/name. A bare name that is no folder here is a folder mistyped or missing, not one of the hub's
    few organisation-less models (nobody warm-starts from gpt2): a tester's 'nonexistent_folder' was queued
    and failed on a worker, unable to reach the hub."""
    resolved = resolve_model(value)
    if is_hub_id(resolved) and "/" not in resolved and not in_hub_cache(resolved):
        raise ValueError(
            f"there is no model folder {quoted(value.strip())} inside MODEL_ROOT (a warm start is a folder "
            "there, or a Hugging Face checkpoint named org/name)"
        )
    return resolved


def in_hub_cache(hub_id: str) -> bool:
    """Whether this machine's Hugging Face cache holds the hub model (a worker sharing it loads it offline)."""
    return (Path(constants.HF_HUB_CACHE) / f"models--{hub_id.replace('/', '--')}").is_dir()


def is_hub_id(model: str) -> bool:
    """A resolved model name (resolve_model) that names a hub model, not the tiny one or a folder here."""
    return model != TINY_MODEL and not Path(model).is_absolute()


def _children(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:  # MODEL_ROOT not made yet
        return []


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
        or _is_dir(root / candidate)
    )
    if not local:
        if HUB_ID.fullmatch(value):
            _not_a_typo(value, root)
            return value
        raise ValueError(
            f"{quoted(value)} is neither '{TINY_MODEL}', a hub id like org/name, nor a folder in MODEL_ROOT"
        )
    path = (root / candidate).resolve()
    checkpoints = Path(settings.CHECKPOINT_ROOT).resolve()
    if path == root or not path.is_relative_to(root) or path.is_relative_to(checkpoints) or not _is_dir(path):
        raise ValueError(
            f"there is no model folder {quoted(value)} inside MODEL_ROOT "
            "(local models are folders inside MODEL_ROOT)"
        )
    # What save_pretrained writes for a model and its tokenizer: without them the run would fail when a
    # worker loads it, after queueing, instead of here.
    if not (path / "config.json").is_file() or not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ValueError(
            f"the folder {quoted(value)} in MODEL_ROOT is not a saved model: it needs config.json and a "
            "tokenizer (tokenizer.json or tokenizer_config.json), as save_pretrained writes them"
        )
    return str(path)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name longer than the file system allows: no folder there
        return False


# The fields of an experiment as the API creates it (and as an experiment's YAML export writes it).
EXPERIMENT_FIELDS = {
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


def is_experiment_body(mapping: dict) -> bool:
    """Whether an imported mapping describes an experiment (seeds, grid, a `config:` ...) rather than
    being a bare trainer config: it has a field that only an experiment has."""
    return bool(set(mapping) & (EXPERIMENT_FIELDS - set(TrainConfig.__dataclass_fields__)))


def spec_from_json(body) -> ExperimentSpec:
    """The API's JSON body -> ExperimentSpec, or SpecError naming every bad field."""
    spec, errors = read_experiment(body)
    if errors:
        raise SpecError(errors)
    return spec


def read_experiment(body) -> tuple[ExperimentSpec, dict[str, str]]:
    """The API's JSON body as a spec, its refused fields left at their defaults, and the problems found
    (field -> message; empty when the body is good)."""
    if not isinstance(body, dict):
        return ExperimentSpec(name=""), {"body": "expected a JSON object"}
    errors: dict[str, str] = {}
    for key in body:
        if key not in EXPERIMENT_FIELDS:
            errors[key] = f"unknown field (known: {', '.join(sorted(EXPERIMENT_FIELDS))})"
    spec = ExperimentSpec(name="")

    def take(key, parse):
        if key in body:
            try:
                setattr(spec, key, parse(body[key]))
            except ValueError as error:
                errors[key] = str(error)

    name = body["name"].strip() if isinstance(body.get("name"), str) else ""  # as stored
    if "name" in body and not isinstance(body["name"], str):
        errors["name"] = f"must be a string, got {jsonsafe.json_type(body['name'])}"
    elif not name:
        errors["name"] = "required: a non-empty string"
    elif len(name) > MAX_NAME:
        errors["name"] = f"at most {MAX_NAME} characters, got {len(name):,}"
    else:
        spec.name = name
    take("description", _check_description)
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
        take("config", _check_complete_config)
        if "seeds" not in body and isinstance(spec.config, dict) and "seed" in spec.config:
            try:  # the config's own seed, as the form reads one: not the default seed in its place
                if isinstance(spec.config["seed"], str):  # JSON's "1": refused as every config field's is
                    raise ValueError("must be an integer, got str")
                spec.seeds = [_seed(spec.config["seed"])]
            except ValueError as error:
                errors["config.seed"] = str(error)
    else:
        take("preset", _check_preset)
        take("model", lambda v: resolve_model(_typed(v, str, "a string")))
        take("steps", _check_steps)
        take("overrides", parse_overrides)
        env = body.get("env")
        if env is None:
            errors["env"] = 'required: an object like {"name": "frozenlake", "params": {"size": 4}}'
        elif isinstance(env, str):
            name = json.dumps(env if len(env) <= 40 else env[:40] + "…", ensure_ascii=False)
            errors["env"] = f'expected an object, got the text {name}: write {{"name": {name}}}'
        elif not isinstance(env, dict):
            errors["env"] = f'expected an object like {{"name": "frozenlake"}}, got {jsonsafe.json_type(env)}'
        elif not isinstance(env.get("name"), str):
            name = env.get("name")
            errors["env"] = 'expected an object like {"name": "frozenlake", "params": {"size": 4}}, got ' + (
                "one without a name" if name is None else f"one whose name is {jsonsafe.json_type(name)}"
            )
        elif not isinstance(env.get("params", {}), dict) or set(env) - {"name", "params"}:
            errors["env"] = 'expected {"name": ..., "params": {...}} and nothing else'
        else:
            params, problems = _typed_params(env["name"], env.get("params", {}))
            spec.env = {"name": env["name"], "params": params}
            errors.update(problems)
    return spec, errors


# envs.spec's parameter types, as the trainer's type hints
PARAM_HINTS = {"int": int, "float": float, "bool": bool, "choice": str, "str": str}


def _typed_params(env_name: str, params: dict) -> tuple[dict, dict[str, str]]:
    """`params` without those whose JSON type is not their parameter's, and `env.params.<name>` -> what is
    wrong with each of those. The environments read text as a form posts it ("false", "0.5"); a JSON
    body's value is what it says, never silently converted."""
    spec = envs.registry().get(env_name)
    if spec is None:  # the trainer names an unknown environment
        return dict(params), {}
    prepared = spec.prepare(params)  # what an environment takes in another form (a map as a list of rows)
    problems = {}
    for param in spec.params:
        if param.name in prepared:
            try:
                typed(PARAM_HINTS[param.type], prepared[param.name])
            except ValueError as error:
                problems[f"env.params.{param.name}"] = str(error)
    kept = {name: value for name, value in params.items() if f"env.params.{name}" not in problems}
    return kept, problems


# The sections that make a run what it is: a config without one would train on defaults nobody chose. (A
# field missing inside a section takes its default, so a config written by an earlier version still loads.)
CONFIG_SECTIONS = ("env", "model", "rollout", "algorithm", "optim", "schedule")


def _check_complete_config(value):
    config = _typed(value, dict, "an object (a complete trainer config)")
    missing = [name for name in CONFIG_SECTIONS if not isinstance(config.get(name), dict)]
    if missing:
        raise ValueError(
            f"not a complete trainer config: no {', '.join(missing)} section; send the whole config (as "
            "Export YAML or the trainer writes it), or preset, env, model, steps and overrides instead"
        )
    return config


def _typed(value, kind, description):
    if not isinstance(value, kind):
        raise ValueError(f"expected {description}, got {quoted(value)}")
    return value


def _check_description(value):
    text = _typed(value, str, "a string")
    if len(text) > MAX_DESCRIPTION:
        raise ValueError(f"at most {MAX_DESCRIPTION:,} characters, got {len(text):,}")
    return text


def _check_preset(value):
    if not isinstance(value, str) or value not in PRESETS:
        raise ValueError(f"unknown preset {quoted(value)}; choose from {', '.join(PRESETS)}")
    return value


def _whole(value):
    """A JSON number with no fraction (1.0) as the integer it is: JSON Schema's `integer`, which the OpenAPI
    document gives steps and seeds, takes it (as the metrics ingest does a step)."""
    return int(value) if type(value) is float and value.is_integer() else value


def _check_steps(value):
    value = _whole(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STEPS:
        raise ValueError(f"expected a whole number from 1 to {MAX_STEPS}, got {quoted(value)}")
    return value
