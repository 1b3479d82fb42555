"""Parameter descriptions shared by the registry, the environments and the web form.

Every environment lists its parameters as `Param`s; `validate` turns user input (often the strings a
web form posts) into typed values or raises `ParamError` naming the field, so the form can put the
message next to it.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from diagnostics.quoting import quoted

PARAM_TYPES = ("int", "float", "bool", "choice", "str")
_TRUE_WORDS = {"true", "1", "yes", "on"}
_FALSE_WORDS = {"false", "0", "no", "off", ""}


class ParamError(ValueError):
    """A bad parameter value; `field` is the parameter's name (or "name" for an unknown environment)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: Any
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    help: str = ""
    lines: bool = False  # text of several lines (a map, a level): a form gives it a text area
    label: str = ""  # as a form names it; the name, spaced, when empty (an environment registered elsewhere)

    @property
    def title(self) -> str:
        return self.label or self.name.replace("_", " ").capitalize()

    def validate(self, value: Any, owner: str) -> Any:
        """The value converted to this parameter's type; ParamError("owner.name ...") when it does not fit."""
        label = f"{owner}.{self.name}"
        converted = _CONVERTERS[self.type](value, label, self)
        if self.type in ("int", "float") and (
            (self.min is not None and converted < self.min) or (self.max is not None and converted > self.max)
        ):
            raise ParamError(
                self.name, f"{label} must be between {self.min} and {self.max}, got {quoted(value)}"
            )
        choices = self.choices or ()
        if self.type == "choice" and converted not in choices:
            options = ", ".join(repr(choice) for choice in choices)
            raise ParamError(self.name, f"{label} must be one of {options}, got {quoted(value)}")
        return converted


def _to_int(value: Any, label: str, param: Param) -> int:
    # bool is an int subclass; a checkbox value in an int field is a mistake, not 0 or 1.
    if isinstance(value, bool):
        raise ParamError(param.name, f"{label} must be an integer, got {quoted(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ParamError(param.name, f"{label} must be an integer, got {quoted(value)}")


def _to_float(value: Any, label: str, param: Param) -> float:
    if isinstance(value, bool):
        raise ParamError(param.name, f"{label} must be a number, got {quoted(value)}")
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ParamError(param.name, f"{label} must be a number, got {quoted(value)}") from None
    if not math.isfinite(number):
        raise ParamError(param.name, f"{label} must be a finite number, got {quoted(value)}")
    return number


def _to_bool(value: Any, label: str, param: Param) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    raise ParamError(param.name, f"{label} must be true or false, got {quoted(value)}")


# The longest text a parameter takes (a map, a level, an arm's name, a file's path). Every run's config is
# validated with its parameters, parsed each time: 5 MB of blank lines before a map held an experiment of 64
# runs for 47 s, a level's 3 MB title line for 36 s.
MAX_TEXT = 10_000


def _to_str(value: Any, label: str, param: Param) -> str:
    if not isinstance(value, str):
        raise ParamError(param.name, f"{label} must be text, got {quoted(value)}")
    if param.type == "str" and len(value) > MAX_TEXT:  # a choice is one of its few, named as refused
        raise ParamError(param.name, f"{label} is {len(value):,} characters long; at most {MAX_TEXT:,}")
    return value


_CONVERTERS: dict[str, Callable[[Any, str, Param], Any]] = {
    "int": _to_int,
    "float": _to_float,
    "bool": _to_bool,
    "choice": _to_str,
    "str": _to_str,
}


def keep_params(params: dict) -> dict:
    return params


def no_cross_checks(owner: str, params: dict) -> dict:
    return params


@dataclass(frozen=True)
class EnvSpec:
    """One registered environment: what the web form shows and how `envs.make` builds it.

    `prepare` turns convenient Python inputs into the declared types before validation (a list of map
    rows into text, a parsed level into XSB). `check` runs once every single parameter is valid and
    handles rules between parameters and the parsing of structured text; it returns the normalised dict
    or raises ParamError.
    """

    name: str
    description: str
    params: list[Param]
    env_class: type
    prepare: Callable[[dict], dict] = keep_params
    check: Callable[[str, dict], dict] = no_cross_checks
    rollout: dict = field(default_factory=dict)

    def validate(self, params: dict) -> dict:
        params = self.prepare(params)
        known = {param.name: param for param in self.params}
        for key in params:
            if key not in known:
                raise ParamError(key, f"{self.name}.{key} is not a parameter (known: {', '.join(known)})")
        values = {
            name: param.validate(params[name], self.name) if name in params else param.default
            for name, param in known.items()
        }
        return self.check(self.name, values)
