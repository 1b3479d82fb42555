"""What a user asks for, as one value: an `ExperimentSpec` is either a trainer preset plus the choices a
user makes (environment, model, steps, overrides) or a complete TrainConfig dict, with seeds and a grid.

Three modules work on it, one job each:
  spec_parsing   the form's text or the API's JSON -> an ExperimentSpec (parse_*, spec_from_json,
                 resolve_model, the one model-name resolver);
  run_planning   an ExperimentSpec -> one validated trainer config per run: seeds x grid combinations
                 (plan), each checked by the trainer and this server's limits before anything is saved;
  form_inputs    back from a saved config to the form's inputs ("re-run with changes", YAML import).
Problems come back as `SpecError.errors`, keyed by the name of the input that caused them
("env.params.size", "model", "steps", "grid", "seeds", "algorithm.kl_coef", ...), so the form and the
API name the same field.
"""

from dataclasses import dataclass, field

from trainer.config import TINY_MODEL, ConfigError

MAX_RUNS = 64
MAX_NAME = 200  # Experiment.name, without the spaces around it
MAX_SEED = 2**31 - 1
MAX_STEPS = 10_000_000
MAX_LABEL_LENGTH = 300  # Run.label
MAX_DESCRIPTION = 10_000  # an experiment's description, as a run's notes
DEFAULT_PRESET = "starpo"
GRID_PRESET_KEY = "preset"
# The inputs that have a field of their own; the rest of a config is edited as overrides.
OWN_FIELDS = {"env.name": "env", "model.name": "model", "schedule.steps": "steps", "seed": "seeds"}


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
    preset: str = ""  # the trainer preset it started from (a grid may vary it); "" for a complete config
