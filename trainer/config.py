"""One typed training config: nested dataclasses, validated as a whole, with presets.

Validation collects every problem into ConfigError.errors = {"dotted.field": "message"}. The dict helpers
(deep_merge, set_dotted, apply_overrides) and ConfigError itself are trainer/overrides.py's.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from dataclasses import dataclass, field

import yaml

from diagnostics.quoting import quoted
from trainer.overrides import ConfigError, apply_overrides, deep_merge, load_yaml, set_dotted

TINY_MODEL = "tiny"  # the embedded model, built locally by trainer.tiny_model


@dataclass
class EnvConfig:
    name: str = "bandit"
    params: dict = field(default_factory=dict)


@dataclass
class ModelConfig:
    name: str = TINY_MODEL  # hub id, local directory, or "tiny"
    warm_start: str = ""  # weights to start from (`python -m trainer sft` output); "" = name's
    dtype: str = "auto"  # auto = bfloat16 on CUDA, float32 on CPU
    lora_rank: int = 0  # 0 = full fine-tuning
    lora_alpha: int = 64
    lora_dropout: float = 0.0
    lora_target_modules: list = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    gradient_checkpointing: bool = False


@dataclass
class RolloutConfig:
    env_groups: int = 8  # P: distinct initial states per step
    group_size: int = 16  # N: rollouts per initial state
    max_turns: int = 5
    max_actions_per_turn: int = 5
    max_actions_per_episode: int = 10
    max_new_tokens: int = 400  # per turn
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    thinking: bool = True
    format_penalty: float = -0.1
    val_temperature: float = 0.5
    val_seeds: int = 256
    val_envs: list = field(default_factory=list)  # more registered envs validated: val/<env>/success


@dataclass
class AlgorithmConfig:
    advantage: str = "ppo"  # ppo (critic + GAE) | grpo | drgrpo
    gamma: float = 1.0
    lam: float = 1.0
    whiten_advantages: bool = True  # PPO: whiten over all assistant tokens of the batch
    eps_low: float = 0.2
    eps_high: float = 0.2
    dual_clip: float = 3.0  # 0 = off
    value_clip: float = 0.5
    kl_coef: float = 0.001
    kl_estimator: str = "k1"  # k1 | k3
    entropy_coef: float = 0.001
    filter: str = "none"  # none | top_ratio | top_k_abs | top_p | min_p (trainer/filter.py)
    filter_ratio: float = 0.25  # top_ratio: int(ratio * P) groups kept
    filter_top_k: int = 2  # top_k_abs: groups kept
    filter_top_p: float = 0.9  # top_p: share of the summed in-group reward std kept
    filter_top_p_mode: str = "linear"  # linear (RAGEN-2's recommended rule) | softmax
    filter_min_p: float = 0.5  # min_p: keep groups scoring >= min_p * the best score
    filter_include_zero: bool = True  # False: groups with equal rewards are never kept (RAGEN-2 top-p)
    filter_empty_stop_steps: int = 5  # stop after this many consecutive steps with no group kept; 0 = never
    loss_agg: str = "seq-mean-token-mean"  # | token-mean | seq-mean-token-sum

    @property
    def filter_value(self) -> float:
        """The number the chosen filter reads (RAGEN's rollout_filter_value)."""
        return 1.0 if self.filter == "none" else getattr(self, f"filter_{FILTER_VALUES[self.filter][0]}")


@dataclass
class OptimConfig:
    actor_lr: float = 1e-6
    critic_lr: float = 1e-5
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    mini_batch_size: int = 32  # trajectories per optimizer step
    micro_batch_size: int = 8  # trajectories per forward/backward (gradient accumulation)
    updates_per_batch: int = 1  # epochs over each rollout batch


@dataclass
class ScheduleConfig:
    steps: int = 200
    val_every: int = 10  # 0 = no validation
    checkpoint_every: int = 10  # 0 = only at the end
    keep_checkpoints: int = 3
    samples_per_step: int = 4


@dataclass
class DiagnosticsConfig:
    collapse_every: int = 5  # template-collapse MI estimate at step 1 and every N steps; 0 = off
    collapse_samples: int = 64  # (prompt, reasoning) pairs cross-scored per measurement
    # Trajectory-variant draws (any turn, collapse/traj/*); 0 = off. On multi-turn runs nearly every
    # context is distinct (draws x draws sequences), affordable because each context is computed once per
    # micro-batch: 6.6% of step time on FrozenLake at the default schedule (docs/BENCHMARKS.md).
    collapse_traj_samples: int = 64


@dataclass
class TrainConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)
    seed: int = 0
    deterministic: bool = False

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, values: dict) -> TrainConfig:
        errors: dict[str, str] = {}
        cfg = _build(cls, values if values is not None else {}, "", errors)
        if not errors:
            errors.update(cfg.validate_errors())
        if errors:
            raise ConfigError(errors)
        return cfg

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_yaml(cls, text: str) -> TrainConfig:
        try:
            values = load_yaml(text)
        except yaml.YAMLError as error:
            raise ConfigError({"config": f"is not valid YAML: {str(error).splitlines()[0]}"}) from None
        if values is not None and not isinstance(values, dict):
            raise ConfigError({"config": "must be a mapping"})
        return cls.from_dict(values or {})

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def preset(cls, name: str, *dotted: str, **overrides) -> TrainConfig:
        """Preset + the environment's episode shape + per-model profile + overrides.

        overrides: section dicts (rollout={"group_size": 8}) or "section__field" keywords;
        dotted: "rollout.group_size=8" strings.
        """
        if name not in PRESETS:
            raise ConfigError({"preset": f"unknown preset {quoted(name)}; choose from {', '.join(PRESETS)}"})
        user: dict = {}
        for key, value in overrides.items():
            if isinstance(value, dict):
                deep_merge(user, {key: value})
            else:
                set_dotted(user, key.replace("__", "."), value)
        apply_overrides(user, list(dotted))
        model_name = (
            user.get("model", {}).get("name", TINY_MODEL)
            if isinstance(user.get("model"), dict)
            else TINY_MODEL
        )
        values = cls().to_dict()
        env_name = (
            user["env"].get("name", values["env"]["name"])
            if isinstance(user.get("env"), dict)
            else values["env"]["name"]
        )
        deep_merge(values, PRESETS[name])
        deep_merge(values, {"rollout": env_rollout_defaults(env_name)})
        if model_name == TINY_MODEL:
            deep_merge(values, TINY_PROFILE)
        deep_merge(values, user)
        return cls.from_dict(values)

    # ---- cross-field checks ---------------------------------------------------------------------
    def validate_errors(self) -> dict[str, str]:
        errors: dict[str, str] = {}
        model, rollout, algorithm = self.model, self.rollout, self.algorithm
        optim, schedule = self.optim, self.schedule

        def need(ok: bool, key: str, msg: str) -> None:
            """Record msg for key when the check fails; a key keeps the first failure's message."""
            if not ok and key not in errors:
                errors[key] = msg

        need(model.dtype in DTYPES, "model.dtype", f"must be one of {', '.join(DTYPES)}")
        need(bool(model.name.strip()), "model.name", "must not be empty")
        need(model.lora_rank >= 0, "model.lora_rank", "must be >= 0 (0 = full fine-tuning)")
        need(model.lora_alpha > 0, "model.lora_alpha", "must be > 0")
        need(0 <= model.lora_dropout < 1, "model.lora_dropout", "must be in [0, 1)")
        need(
            all(isinstance(module, str) for module in model.lora_target_modules),
            "model.lora_target_modules",
            "must be a list of module names",
        )
        need(
            model.lora_rank == 0 or len(model.lora_target_modules) > 0,
            "model.lora_target_modules",
            "must not be empty when lora_rank > 0",
        )
        for field_name in (
            "env_groups",
            "group_size",
            "max_turns",
            "max_actions_per_turn",
            "max_actions_per_episode",
            "max_new_tokens",
        ):
            need(getattr(rollout, field_name) >= 1, f"rollout.{field_name}", "must be >= 1")
        need(rollout.temperature >= 0, "rollout.temperature", "must be >= 0 (0 = greedy)")
        need(rollout.val_temperature >= 0, "rollout.val_temperature", "must be >= 0 (0 = greedy)")
        need(0 < rollout.top_p <= 1, "rollout.top_p", "must be in (0, 1]")
        need(rollout.format_penalty <= 0, "rollout.format_penalty", "must be <= 0")
        need(rollout.val_seeds >= 0, "rollout.val_seeds", "must be >= 0")
        need(self.diagnostics.collapse_every >= 0, "diagnostics.collapse_every", "must be >= 0 (0 = off)")
        need(self.diagnostics.collapse_samples >= 2, "diagnostics.collapse_samples", "must be >= 2")
        need(
            self.diagnostics.collapse_traj_samples == 0 or self.diagnostics.collapse_traj_samples >= 2,
            "diagnostics.collapse_traj_samples",
            "must be 0 (off) or >= 2",
        )
        need(
            rollout.val_seeds > 0 or schedule.val_every == 0,
            "rollout.val_seeds",
            "must be >= 1 when schedule.val_every > 0 (0 turns validation off)",
        )
        need(
            all(isinstance(name, str) for name in rollout.val_envs)
            and len(set(rollout.val_envs)) == len(rollout.val_envs),
            "rollout.val_envs",
            "must be a list of distinct environment names",
        )
        need(
            not rollout.val_envs or schedule.val_every > 0,
            "rollout.val_envs",
            "needs schedule.val_every > 0 (validation is off)",
        )
        need(
            algorithm.advantage in ADVANTAGES,
            "algorithm.advantage",
            f"must be one of {', '.join(ADVANTAGES)}",
        )
        need(
            algorithm.kl_estimator in KL_ESTIMATORS,
            "algorithm.kl_estimator",
            f"must be one of {', '.join(KL_ESTIMATORS)}",
        )
        need(algorithm.filter in FILTERS, "algorithm.filter", f"must be one of {', '.join(FILTERS)}")
        need(algorithm.loss_agg in LOSS_AGGS, "algorithm.loss_agg", f"must be one of {', '.join(LOSS_AGGS)}")
        need(0 <= algorithm.gamma <= 1, "algorithm.gamma", "must be in [0, 1]")
        need(0 <= algorithm.lam <= 1, "algorithm.lam", "must be in [0, 1]")
        need(0 <= algorithm.eps_low < 1, "algorithm.eps_low", "must be in [0, 1)")
        need(algorithm.eps_high >= 0, "algorithm.eps_high", "must be >= 0")
        need(
            algorithm.dual_clip == 0 or algorithm.dual_clip > 1,
            "algorithm.dual_clip",
            "must be 0 (off) or > 1",
        )
        need(algorithm.value_clip > 0, "algorithm.value_clip", "must be > 0")
        need(algorithm.kl_coef >= 0, "algorithm.kl_coef", "must be >= 0")
        need(algorithm.entropy_coef >= 0, "algorithm.entropy_coef", "must be >= 0")
        need(0 < algorithm.filter_ratio <= 1, "algorithm.filter_ratio", "must be in (0, 1]")
        need(0 < algorithm.filter_top_p <= 1, "algorithm.filter_top_p", "must be in (0, 1]")
        need(algorithm.filter_top_k >= 1, "algorithm.filter_top_k", "must be >= 1")
        need(0 < algorithm.filter_min_p <= 1, "algorithm.filter_min_p", "must be in (0, 1]")
        need(
            algorithm.filter_top_p_mode in TOP_P_MODES,
            "algorithm.filter_top_p_mode",
            f"must be one of {', '.join(TOP_P_MODES)}",
        )
        need(
            algorithm.filter_empty_stop_steps >= 0,
            "algorithm.filter_empty_stop_steps",
            "must be >= 0 (0 = never stop)",
        )
        need(
            algorithm.filter == "none" or rollout.group_size >= 2,
            "rollout.group_size",
            "must be >= 2 when a rollout filter is on",
        )
        need(
            algorithm.advantage == "ppo" or rollout.group_size >= 2,
            "rollout.group_size",
            f"must be >= 2 for {algorithm.advantage} (group-normalised advantages)",
        )
        # AdamW moves each weight by up to about lr a step: beyond 1 no model trains (a typo, e.g. 1e3 for 1e-3).
        need(0 < optim.actor_lr <= 1, "optim.actor_lr", "must be in (0, 1]")
        need(0 < optim.critic_lr <= 1, "optim.critic_lr", "must be in (0, 1]")
        need(optim.weight_decay >= 0, "optim.weight_decay", "must be >= 0")
        need(optim.grad_clip > 0, "optim.grad_clip", "must be > 0")
        need(optim.mini_batch_size >= 1, "optim.mini_batch_size", "must be >= 1")
        need(optim.micro_batch_size >= 1, "optim.micro_batch_size", "must be >= 1")
        need(
            optim.mini_batch_size % max(optim.micro_batch_size, 1) == 0,
            "optim.mini_batch_size",
            f"must be a multiple of optim.micro_batch_size ({optim.micro_batch_size})",
        )
        need(optim.updates_per_batch >= 1, "optim.updates_per_batch", "must be >= 1")
        need(schedule.steps >= 0, "schedule.steps", "must be >= 0")
        need(schedule.val_every >= 0, "schedule.val_every", "must be >= 0 (0 = off)")
        need(
            schedule.checkpoint_every >= 0, "schedule.checkpoint_every", "must be >= 0 (0 = only at the end)"
        )
        need(schedule.keep_checkpoints >= 1, "schedule.keep_checkpoints", "must be >= 1")
        need(schedule.samples_per_step >= 0, "schedule.samples_per_step", "must be >= 0")
        need(self.seed >= 0, "seed", "must be >= 0")
        errors.update(_env_errors(self.env))
        if "rollout.val_envs" not in errors:
            errors.update(_val_env_errors(rollout.val_envs))
        return errors

    def inert_fields(self) -> dict[str, str]:
        """The fields training does not read with the rest of this config, each with what makes it so ("...
        is not read while <reason>"): a grid whose cells differ only in these trains the same runs again
        (the web app refuses it)."""
        algorithm = self.algorithm
        inert: dict[str, str] = {}

        def unread(fields: list[str], reason: str) -> None:
            inert.update(dict.fromkeys(fields, reason))

        read_by = {
            f"algorithm.filter_{name}": mode for mode, names in FILTER_VALUES.items() for name in names
        }
        if algorithm.filter == "none":
            unread(
                [*read_by, "algorithm.filter_include_zero", "algorithm.filter_empty_stop_steps"],
                "algorithm.filter is 'none' (every group is kept; the starpo-s presets filter)",
            )
        else:
            reads = f"algorithm.filter_{FILTER_VALUES[algorithm.filter][0]}"
            unread(
                [name for name, mode in read_by.items() if mode != algorithm.filter],
                f"algorithm.filter is {quoted(algorithm.filter)} (it reads {reads})",
            )
        if algorithm.advantage != "ppo":
            unread(
                [
                    "algorithm.gamma",
                    "algorithm.lam",
                    "algorithm.whiten_advantages",
                    "algorithm.value_clip",
                    "optim.critic_lr",
                ],
                f"algorithm.advantage is {quoted(algorithm.advantage)} (group-normalised advantages, no critic)",
            )
        if algorithm.kl_coef == 0:
            unread(["algorithm.kl_estimator"], "algorithm.kl_coef is 0 (no KL term)")
        if self.model.lora_rank == 0:
            unread(
                ["model.lora_alpha", "model.lora_dropout", "model.lora_target_modules"],
                "model.lora_rank is 0 (full fine-tuning)",
            )
        if self.rollout.temperature == 0 and (
            self.schedule.val_every == 0 or self.rollout.val_temperature == 0
        ):
            unread(
                ["rollout.top_p"],
                "every rollout is greedy (rollout.temperature 0, and validation off or at 0)",
            )
        if self.schedule.val_every == 0:
            unread(
                ["rollout.val_temperature", "rollout.val_seeds"],
                "schedule.val_every is 0 (no validation)",
            )
        if self.diagnostics.collapse_every == 0:
            unread(
                ["diagnostics.collapse_samples", "diagnostics.collapse_traj_samples"],
                "diagnostics.collapse_every is 0 (no template-collapse measurement)",
            )
        return inert


DTYPES = ("auto", "float32", "bfloat16", "float16")
ADVANTAGES = ("ppo", "grpo", "drgrpo")
KL_ESTIMATORS = ("k1", "k3")
FILTERS = ("none", "top_ratio", "top_k_abs", "top_p", "min_p")  # rules in trainer/filter.py
# The algorithm.filter_* fields each rule reads, its value first (filter_include_zero: every rule).
FILTER_VALUES = {
    "top_ratio": ("ratio",),
    "top_k_abs": ("top_k",),
    "top_p": ("top_p", "top_p_mode"),
    "min_p": ("min_p",),
}
TOP_P_MODES = ("linear", "softmax")
LOSS_AGGS = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum")

# Algorithm presets: only what differs from the paper defaults in the dataclasses above.
PRESETS: dict[str, dict] = {
    "starpo": {
        "algorithm": {"advantage": "ppo", "kl_coef": 0.001, "eps_low": 0.2, "eps_high": 0.2, "filter": "none"}
    },
    "starpo-s": {
        "algorithm": {
            "advantage": "ppo",
            "kl_coef": 0.0,
            "eps_low": 0.2,
            "eps_high": 0.28,
            "filter": "top_ratio",
            "filter_ratio": 0.25,
        }
    },
    "grpo": {
        "algorithm": {
            "advantage": "grpo",
            "kl_coef": 0.001,
            "eps_low": 0.2,
            "eps_high": 0.2,
            "filter": "none",
        }
    },
    "starpo-s-grpo": {
        "algorithm": {
            "advantage": "grpo",
            "kl_coef": 0.0,
            "eps_low": 0.2,
            "eps_high": 0.28,
            "filter": "top_ratio",
            "filter_ratio": 0.25,
        }
    },
}

# What each preset is, for the web form and `python -m trainer presets`.
CLIP_HIGHER_NOTE = (
    "Clip-higher (eps_high 0.28) only acts when a rollout batch is split into several "
    "optimizer steps: with the paper's layout the 2 kept groups x 16 = 32 trajectories are "
    "one mini-batch, the ratio is exactly 1 and nothing is clipped (RAGEN too). To let it "
    "act, lower optim.mini_batch_size or raise optim.updates_per_batch (the paper's 'more "
    "updates per rollout', see the ablations)."
)
PRESET_HELP: dict[str, str] = {
    "starpo": "PPO with a critic, KL 0.001 to the reference, clip 0.2/0.2, no filter.",
    "starpo-s": "PPO, no KL, clip 0.2/0.28, keep the top 25% of groups by in-group reward std.",
    "grpo": "GRPO advantages (no critic), KL 0.001 as a loss term, clip 0.2/0.2, no filter.",
    "starpo-s-grpo": "StarPO-S with GRPO advantages.",
}
# Every preset's help, then the clip-higher note once (it is true of both StarPO-S presets).
PRESETS_HELP_TEXT = " ".join(f"{name}: {text}" for name, text in PRESET_HELP.items()) + " " + CLIP_HIGHER_NOTE

# The tiny CPU model: the paper's batch layout, budgets and critic, a far higher actor lr, fewer validation
# seeds, 64 tokens per turn (its replies are ~30 tokens). Measured in docs/TRAINER.md and docs/BENCHMARKS.md.
TINY_PROFILE: dict = {
    "rollout": {"val_seeds": 64, "max_new_tokens": 64},
    "optim": {"actor_lr": 5e-4, "micro_batch_size": 16},
    "schedule": {"steps": 60, "val_every": 10, "checkpoint_every": 10},
}


def env_rollout_defaults(env_name) -> dict:
    """The episode shape the environment is played with in the reference ({} for an unknown name)."""
    import envs

    spec = envs.registry().get(env_name) if isinstance(env_name, str) else None
    return dict(spec.rollout) if spec else {}


def preset_table() -> dict[str, dict]:
    """The presets as users see them (with the tiny profile and with a hub model)."""
    out = {}
    for name in PRESETS:
        out[name] = {
            "tiny": TrainConfig.preset(name).to_dict(),
            "hub": TrainConfig.preset(name, model={"name": "Qwen/Qwen2.5-0.5B-Instruct"}).to_dict(),
        }
    return out


# ---- typed building --------------------------------------------------------------------------------
def _build(cls, values, prefix: str, errors: dict[str, str]):
    if not isinstance(values, dict):
        errors[prefix.rstrip(".") or "config"] = "must be a mapping"
        return cls()
    hints = typing.get_type_hints(cls)
    field_names = [config_field.name for config_field in dataclasses.fields(cls)]
    for name in values:
        if name not in field_names:
            close = difflib.get_close_matches(str(name), field_names, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            errors[f"{prefix}{name}"] = f"unknown key ({hint}known: {', '.join(sorted(field_names))})"
    kwargs = {}
    for name in field_names:
        if name not in values:
            continue
        hint, given, key = hints[name], values[name], f"{prefix}{name}"
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _build(hint, given, key + ".", errors)
        else:
            try:
                kwargs[name] = typed(hint, given)
            except ValueError as error:
                errors[key] = str(error)
    return cls(**kwargs)


def typed(hint, given):
    """`given` as a value of the type hint (an integer as a float), or ValueError saying what is wrong.
    Values are typed as JSON or YAML wrote them: text is never read as a number or a boolean ("false"
    is no false)."""
    ok, value = _coerce(hint, given)
    if not ok:
        raise ValueError(f"must be {_type_name(hint)}, got {type(given).__name__} {quoted(given)}")
    return value


def _coerce(hint, given):
    """(whether given is a value of the type hint, the value as that type)."""
    if hint is bool:
        return isinstance(given, bool), given
    if hint is int:
        return isinstance(given, int) and not isinstance(given, bool), given
    if hint is float:
        ok = isinstance(given, (int, float)) and not isinstance(given, bool) and math.isfinite(given)
        return ok, float(given) if ok else given
    if hint is str:
        return isinstance(given, str), given
    if hint is dict:
        ok = isinstance(given, dict) and all(isinstance(key, str) for key in given)
        return ok, dict(given) if isinstance(given, dict) else given
    if hint is list:
        return isinstance(given, list), list(given) if isinstance(given, list) else given
    return True, given


def _type_name(hint) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        dict: "a mapping",
        list: "a list",
    }.get(hint, str(hint))


def _val_env_errors(names: list) -> dict[str, str]:
    import envs

    unknown = [name for name in names if name not in envs.registry()]
    if unknown:
        return {
            "rollout.val_envs": f"unknown environment {quoted(unknown[0])}; choose from "
            f"{', '.join(sorted(envs.registry()))}"
        }
    return {}


def _env_errors(env: EnvConfig) -> dict[str, str]:
    """Validate env params through envs' own validation; map its error to env.params.<name>: the name a
    ParamError carries, else the parameter its message names."""
    import envs

    registry = envs.registry()
    if env.name not in registry:
        return {
            "env.name": f"unknown environment {quoted(env.name)}; choose from {', '.join(sorted(registry))}"
        }
    try:
        envs.make(env.name, **env.params)
    except envs.ParamError as error:  # names its parameter (an unknown one too)
        return {f"env.params.{error.field}": str(error)}
    except (ValueError, TypeError) as error:
        message = str(error)
        spec_names = [p.name for p in getattr(registry[env.name], "params", [])]
        for name in sorted(set(env.params) | set(spec_names), key=len, reverse=True):
            if name in message:
                return {f"env.params.{name}": message}
        return {"env.params": message}
    return {}
