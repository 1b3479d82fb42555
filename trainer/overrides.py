"""Dotted settings on plain config dicts, before any TrainConfig exists: merge a section in, set or read
"section.field", apply "section.field=value" strings. The web app builds every run's config from a
user's inputs with these (webapp/experiments), the CLI from its --set flags, TrainConfig.preset from its
keywords.

ConfigError lives here because these helpers raise it too: errors = {"dotted.field": "message"}, the
shape every config check in the project reports (trainer.config re-exports it).
"""

from __future__ import annotations

import copy
import re
import sys

import yaml

from diagnostics.quoting import quoted

# The most values a YAML document may stand for once its aliases are followed: a config has a few
# hundred; nine lines of aliases nine times over ("billion laughs") stand for 9^9, which every later
# walk of the document (checks, merges, storing it) would visit one by one.
MAX_YAML_VALUES = 100_000


class _Loader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1, where `1e-4` is a string (a float needs a dot: `1.0e-4`); learning rates are
    written `1e-4`, so numbers with an exponent and no dot are floats here, as in YAML 1.2."""

    def construct_document(self, node):
        """Aliases (`*base`, merge keys) are fine, as long as the document they make stays config-sized."""
        if _expanded_size(node, {}) > MAX_YAML_VALUES:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"its aliases (*name) make it stand for more than {MAX_YAML_VALUES:,} values",
                node.start_mark,
            )
        return super().construct_document(node)

    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # Python reads no decimal integer past its limit: said as YAML's error, placed
            limit = sys.get_int_max_str_digits()
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of more than {limit:,} digits", node.start_mark
            ) from None

    def construct_mapping(self, node, deep=False):
        """A key written twice in one mapping is an error, not its last value without a word (`lr` set
        twice in an overrides box: which one was meant?). Merge keys (`<<`) may still be overridden."""
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # unhashable: the base class says so
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the key {quoted(str(key))} appears twice in one mapping",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def _expanded_size(node, sizes: dict) -> int:
    """How many values `node` stands for with every alias followed, each node counted once per path to it
    but computed once (`sizes`, by node): linear in the text, however far the aliases multiply it. An
    alias inside its own anchor (`a: &a [*a]`) stands for an endless document: refused."""
    if id(node) in sizes and sizes[id(node)] is None:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            "an alias (*name) inside the value it names makes the document endless",
            node.start_mark,
        )
    if id(node) not in sizes:
        sizes[id(node)] = None  # being counted
        if isinstance(node, yaml.SequenceNode):
            sizes[id(node)] = 1 + sum(_expanded_size(child, sizes) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            sizes[id(node)] = 1 + sum(
                _expanded_size(key, sizes) + _expanded_size(value, sizes) for key, value in node.value
            )
        else:
            sizes[id(node)] = 1
    return sizes[id(node)]


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def load_yaml(text):
    """yaml.safe_load, with `1e-4` a float: every YAML a user writes (files, overrides, --set, grids)."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader


class ConfigError(ValueError):
    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{field}: {message}" for field, message in self.errors.items()))


def deep_merge(dst: dict, src: dict) -> dict:
    """src into dst, section by section; an env's `params` mapping is merged one level only."""
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict) and key != "params":
            deep_merge(dst[key], value)
        elif isinstance(value, dict) and isinstance(dst.get(key), dict):
            dst[key] = {**dst[key], **value}
        else:
            dst[key] = copy.deepcopy(value)  # never alias the caller's dicts
    return dst


def set_dotted(values: dict, key: str, value) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        values = values.setdefault(part, {})
        if not isinstance(values, dict):
            raise ConfigError({key: f"cannot set a field inside the non-mapping {quoted(part)}"})
    values[parts[-1]] = value


def flatten(mapping: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}, "c": [1, 2]} -> {"a.b": 1, "c": [1, 2]}; lists and empty dicts are leaves."""
    out = {}
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def get_dotted(mapping, dotted: str):
    """mapping["a"]["b"] for "a.b", or None where a part is missing or not a mapping."""
    for part in dotted.split("."):
        if not isinstance(mapping, dict) or part not in mapping:
            return None
        mapping = mapping[part]
    return mapping


def apply_overrides(values: dict, overrides: list[str]) -> dict:
    """Apply "a.b=value" strings (value parsed as YAML: 8 -> int, true -> bool, [x, y] -> list)."""
    errors = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            errors[key.strip() or item] = f"override {quoted(item)} must look like section.field=value"
            continue
        try:
            value = load_yaml(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        set_dotted(values, key.strip(), value)
    if errors:
        raise ConfigError(errors)
    return values
