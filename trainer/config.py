"""One typed training config: nested dataclasses, validated as a whole, with presets.

Validation collects every problem into ConfigError.errors = {"dotted.field": "message"}. The dict helpers
(deep_merge, set_dotted, apply_overrides) and ConfigError itself are trainer/overrides.py's.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field

import yaml

from trainer.overrides import ConfigError, apply_overrides, deep_merge, set_dotted

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
        return {
            "top_ratio": self.filter_ratio,
            "top_k_abs": self.filter_top_k,
            "top_p": self.filter_top_p,
            "min_p": self.filter_min_p,
        }.get(self.filter, 1.0)


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
    def from_dict(cls, d: dict) -> TrainConfig:
        errors: dict[str, str] = {}
        cfg = _build(cls, d if d is not None else {}, "", errors)
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
            d = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError({"config": f"is not valid YAML: {str(e).splitlines()[0]}"}) from None
        if d is not None and not isinstance(d, dict):
            raise ConfigError({"config": "must be a mapping"})
        return cls.from_dict(d or {})

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def preset(cls, name: str, *dotted: str, **overrides) -> TrainConfig:
        """Preset + the environment's episode shape + per-model profile + overrides.

        overrides: section dicts (rollout={"group_size": 8}) or "section__field" keywords;
        dotted: "rollout.group_size=8" strings.
        """
        if name not in PRESETS:
            raise ConfigError({"preset": f"unknown preset {name!r}; choose from {', '.join(PRESETS)}"})
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
        d = cls().to_dict()
        env_name = (
            user["env"].get("name", d["env"]["name"])
            if isinstance(user.get("env"), dict)
            else d["env"]["name"]
        )
        deep_merge(d, PRESETS[name])
        deep_merge(d, {"rollout": env_rollout_defaults(env_name)})
        if model_name == TINY_MODEL:
            deep_merge(d, TINY_PROFILE)
        deep_merge(d, user)
        return cls.from_dict(d)

    # ---- cross-field checks ---------------------------------------------------------------------
    def validate_errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        r, a, o, s, m = self.rollout, self.algorithm, self.optim, self.schedule, self.model

        def need(ok: bool, key: str, msg: str) -> None:
            if not ok and key not in e:
                e[key] = msg

        need(m.dtype in DTYPES, "model.dtype", f"must be one of {', '.join(DTYPES)}")
        need(bool(m.name.strip()), "model.name", "must not be empty")
        need(m.lora_rank >= 0, "model.lora_rank", "must be >= 0 (0 = full fine-tuning)")
        need(m.lora_alpha > 0, "model.lora_alpha", "must be > 0")
        need(0 <= m.lora_dropout < 1, "model.lora_dropout", "must be in [0, 1)")
        need(
            all(isinstance(t, str) for t in m.lora_target_modules),
            "model.lora_target_modules",
            "must be a list of module names",
        )
        need(
            m.lora_rank == 0 or len(m.lora_target_modules) > 0,
            "model.lora_target_modules",
            "must not be empty when lora_rank > 0",
        )
        for k in (
            "env_groups",
            "group_size",
            "max_turns",
            "max_actions_per_turn",
            "max_actions_per_episode",
            "max_new_tokens",
        ):
            need(getattr(r, k) >= 1, f"rollout.{k}", "must be >= 1")
        need(r.temperature >= 0, "rollout.temperature", "must be >= 0 (0 = greedy)")
        need(r.val_temperature >= 0, "rollout.val_temperature", "must be >= 0 (0 = greedy)")
        need(0 < r.top_p <= 1, "rollout.top_p", "must be in (0, 1]")
        need(r.format_penalty <= 0, "rollout.format_penalty", "must be <= 0")
        need(r.val_seeds >= 0, "rollout.val_seeds", "must be >= 0")
        need(self.diagnostics.collapse_every >= 0, "diagnostics.collapse_every", "must be >= 0 (0 = off)")
        need(self.diagnostics.collapse_samples >= 2, "diagnostics.collapse_samples", "must be >= 2")
        need(
            r.val_seeds > 0 or s.val_every == 0,
            "rollout.val_seeds",
            "must be >= 1 when schedule.val_every > 0 (0 turns validation off)",
        )
        need(
            all(isinstance(n, str) for n in r.val_envs) and len(set(r.val_envs)) == len(r.val_envs),
            "rollout.val_envs",
            "must be a list of distinct environment names",
        )
        need(
            not r.val_envs or s.val_every > 0,
            "rollout.val_envs",
            "needs schedule.val_every > 0 (validation is off)",
        )
        need(a.advantage in ADVANTAGES, "algorithm.advantage", f"must be one of {', '.join(ADVANTAGES)}")
        need(
            a.kl_estimator in KL_ESTIMATORS,
            "algorithm.kl_estimator",
            f"must be one of {', '.join(KL_ESTIMATORS)}",
        )
        need(a.filter in FILTERS, "algorithm.filter", f"must be one of {', '.join(FILTERS)}")
        need(a.loss_agg in LOSS_AGGS, "algorithm.loss_agg", f"must be one of {', '.join(LOSS_AGGS)}")
        need(0 <= a.gamma <= 1, "algorithm.gamma", "must be in [0, 1]")
        need(0 <= a.lam <= 1, "algorithm.lam", "must be in [0, 1]")
        need(0 <= a.eps_low < 1, "algorithm.eps_low", "must be in [0, 1)")
        need(a.eps_high >= 0, "algorithm.eps_high", "must be >= 0")
        need(a.dual_clip == 0 or a.dual_clip > 1, "algorithm.dual_clip", "must be 0 (off) or > 1")
        need(a.value_clip > 0, "algorithm.value_clip", "must be > 0")
        need(a.kl_coef >= 0, "algorithm.kl_coef", "must be >= 0")
        need(a.entropy_coef >= 0, "algorithm.entropy_coef", "must be >= 0")
        need(0 < a.filter_ratio <= 1, "algorithm.filter_ratio", "must be in (0, 1]")
        need(0 < a.filter_top_p <= 1, "algorithm.filter_top_p", "must be in (0, 1]")
        need(a.filter_top_k >= 1, "algorithm.filter_top_k", "must be >= 1")
        need(0 < a.filter_min_p <= 1, "algorithm.filter_min_p", "must be in (0, 1]")
        need(
            a.filter_top_p_mode in TOP_P_MODES,
            "algorithm.filter_top_p_mode",
            f"must be one of {', '.join(TOP_P_MODES)}",
        )
        need(
            a.filter_empty_stop_steps >= 0,
            "algorithm.filter_empty_stop_steps",
            "must be >= 0 (0 = never stop)",
        )
        need(
            a.filter == "none" or r.group_size >= 2,
            "rollout.group_size",
            "must be >= 2 when a rollout filter is on",
        )
        need(
            a.advantage == "ppo" or r.group_size >= 2,
            "rollout.group_size",
            f"must be >= 2 for {a.advantage} (group-normalised advantages)",
        )
        need(o.actor_lr > 0, "optim.actor_lr", "must be > 0")
        need(o.critic_lr > 0, "optim.critic_lr", "must be > 0")
        need(o.weight_decay >= 0, "optim.weight_decay", "must be >= 0")
        need(o.grad_clip > 0, "optim.grad_clip", "must be > 0")
        need(o.mini_batch_size >= 1, "optim.mini_batch_size", "must be >= 1")
        need(o.micro_batch_size >= 1, "optim.micro_batch_size", "must be >= 1")
        need(
            o.mini_batch_size % max(o.micro_batch_size, 1) == 0,
            "optim.mini_batch_size",
            f"must be a multiple of optim.micro_batch_size ({o.micro_batch_size})",
        )
        need(o.updates_per_batch >= 1, "optim.updates_per_batch", "must be >= 1")
        need(s.steps >= 0, "schedule.steps", "must be >= 0")
        need(s.val_every >= 0, "schedule.val_every", "must be >= 0 (0 = off)")
        need(s.checkpoint_every >= 0, "schedule.checkpoint_every", "must be >= 0 (0 = only at the end)")
        need(s.keep_checkpoints >= 1, "schedule.keep_checkpoints", "must be >= 1")
        need(s.samples_per_step >= 0, "schedule.samples_per_step", "must be >= 0")
        need(self.seed >= 0, "seed", "must be >= 0")
        e.update(_env_errors(self.env))
        if "rollout.val_envs" not in e:
            e.update(_val_env_errors(r.val_envs))
        return e


DTYPES = ("auto", "float32", "bfloat16", "float16")
ADVANTAGES = ("ppo", "grpo", "drgrpo")
KL_ESTIMATORS = ("k1", "k3")
FILTERS = ("none", "top_ratio", "top_k_abs", "top_p", "min_p")  # rules in trainer/filter.py
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
    "starpo-s": "PPO, no KL, clip 0.2/0.28, keep the top 25% of groups by in-group reward std. "
    + CLIP_HIGHER_NOTE,
    "grpo": "GRPO advantages (no critic), KL 0.001 as a loss term, clip 0.2/0.2, no filter.",
    "starpo-s-grpo": "StarPO-S with GRPO advantages. " + CLIP_HIGHER_NOTE,
}

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
def _build(cls, d, prefix: str, errors: dict[str, str]):
    if not isinstance(d, dict):
        errors[prefix.rstrip(".") or "config"] = "must be a mapping"
        return cls()
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for k in d:
        if k not in names:
            errors[f"{prefix}{k}"] = f"unknown key (known: {', '.join(sorted(names))})"
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in d:
            continue
        t, v, key = hints[f.name], d[f.name], f"{prefix}{f.name}"
        if dataclasses.is_dataclass(t):
            kwargs[f.name] = _build(t, v, key + ".", errors)
        else:
            ok, value = _coerce(t, v)
            if ok:
                kwargs[f.name] = value
            else:
                errors[key] = f"must be {_type_name(t)}, got {type(v).__name__} {v!r}"
    return cls(**kwargs)


def _coerce(t, v):
    if t is bool:
        return isinstance(v, bool), v
    if t is int:
        return isinstance(v, int) and not isinstance(v, bool), v
    if t is float:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        return ok, float(v) if ok else v
    if t is str:
        return isinstance(v, str), v
    if t is dict:
        return isinstance(v, dict) and all(isinstance(k, str) for k in v), dict(v) if isinstance(
            v, dict
        ) else v
    if t is list:
        return isinstance(v, list), list(v) if isinstance(v, list) else v
    return True, v


def _type_name(t) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        dict: "a mapping",
        list: "a list",
    }.get(t, str(t))


def _val_env_errors(names: list) -> dict[str, str]:
    import envs

    unknown = [n for n in names if n not in envs.registry()]
    if unknown:
        return {
            "rollout.val_envs": f"unknown environment {unknown[0]!r}; choose from "
            f"{', '.join(sorted(envs.registry()))}"
        }
    return {}


def _env_errors(env: EnvConfig) -> dict[str, str]:
    """Validate env params through envs' own validation; map its ValueError to env.params.<name>."""
    import envs

    registry = envs.registry()
    if env.name not in registry:
        return {"env.name": f"unknown environment {env.name!r}; choose from {', '.join(sorted(registry))}"}
    try:
        envs.make(env.name, **env.params)
    except (ValueError, TypeError) as e:
        message = str(e)
        spec_names = [p.name for p in getattr(registry[env.name], "params", [])]
        for name in sorted(set(env.params) | set(spec_names), key=len, reverse=True):
            if name in message:
                return {f"env.params.{name}": message}
        return {"env.params": message}
    return {}
