"""The metric keys: one entry per key the trainer writes, the one place that says what a key means.

The trainer writes its keys by the constants below, and everything else reads them from here: the run
page's charts (`CHARTS`, drawn in this order), the compare page and API, the alert email's chart
(`OUTCOME_KEYS`, `TRAIN_REWARD_STD_IN_GROUP`), the detector's rules (the key constants), the renaming of
other trainers' names (`aliases.ALIASES`) and the key tables of docs/METRICS.md and docs/DETECTOR.md
(`python -m diagnostics.metrics_tables`).

A key with a part that varies (the validation environment of `val/<env>/success`) is registered once
as a pattern; `registered(key)` finds the entry of any key, patterns included.
"""

import functools
import math
import re
from dataclasses import dataclass, replace

# The trainers whose names for our quantities we know, as the docs name them.
RAGEN, VERL, TRL = "RAGEN", "veRL", "TRL"
# TRL logs to W&B with a "train/" prefix and to MLflow without: each TRL alias is renamed in both spellings.
TRL_PREFIX = "train/"


@dataclass(frozen=True)
class Chart:
    """One chart of the run page's Training section; a `<env>` in id or title is the validation env."""

    id: str
    title: str


@dataclass(frozen=True)
class Alias:
    """A name another trainer logs for one of our quantities.

    `renamed`: `aliases.canonical()` renames it to our key when it reads another trainer's metrics.
    Names that measure something close but not the same (veRL's timings cover other spans of the step)
    are listed for readers only, and files keep them under their own names.
    """

    source: str  # RAGEN, VERL, TRL, or "" for generic names no one trainer owns
    name: str
    renamed: bool = True
    note: str = ""  # shown after the name in the docs, e.g. "older veRL"

    @property
    def is_pattern(self) -> bool:
        """A name with a part that varies (RAGEN's train/<env>/success), matched as Metric.key patterns are."""
        return "<" in self.name

    def spellings(self) -> tuple[str, ...]:
        """Every spelling a file may carry: TRL's with and without its "train/" prefix."""
        return (self.name, TRL_PREFIX + self.name) if self.source == TRL else (self.name,)


# Units of a share of something: a value outside 0..1 is no value of the key (a success rate of 7.5).
FRACTION_UNITS = ("fraction", "fraction of tokens")


@dataclass(frozen=True)
class Metric:
    key: str
    meaning: str
    unit: str = ""  # "" for numbers without one (losses, norms, ratios of unlike things)
    chart: Chart | None = None  # the run-page chart that draws it, None when none does
    log: bool = False  # drawn on a log axis: the values span orders of magnitude
    aliases: tuple[Alias, ...] = ()
    known_as: str = ""  # what other trainers show for it that is not a key name, for the docs

    @property
    def is_pattern(self) -> bool:
        return "<" in self.key

    @property
    def bounds(self) -> tuple[float, float] | None:
        """The values the key can take, where they are bounded: a fraction's 0 to 1."""
        return (0.0, 1.0) if self.unit in FRACTION_UNITS else None

    def fill(self, **parts: str) -> str:
        """The key with its <part>s filled in: val/<env>/success, env="sokoban" -> val/sokoban/success."""
        return _fill(self.key, parts)

    def matches(self, key: str) -> bool:
        return key == self.key or (self.is_pattern and _pattern(self.key).fullmatch(key) is not None)


def _fill(text: str, parts: dict[str, str]) -> str:
    for name, value in parts.items():
        text = text.replace(f"<{name}>", value)
    return text


_PARTS = re.compile(r"(<[a-z_]+>)")


def _pattern(key: str) -> re.Pattern[str]:
    """A key's pattern: each <part> is one path segment, the rest is literal."""
    return re.compile(
        "".join("[^/]+" if part.startswith("<") else re.escape(part) for part in _PARTS.split(key))
    )


# Every key, spelled as the key is ("/" -> "_", upper case): what reads or writes a key by name uses these.
TRAIN_SUCCESS = "train/success"
TRAIN_REWARD_MEAN = "train/reward_mean"
TRAIN_REWARD_STD_IN_GROUP = "train/reward_std_in_group"
TRAIN_REWARD_STD_HIST = "train/reward_std_hist"
TRAIN_FRAC_ZERO_STD_GROUPS = "train/frac_zero_std_groups"
TRAIN_FORMAT_VALID = "train/format_valid"
TRAIN_ACTIONS_VALID = "train/actions_valid"
TRAIN_FILTER_KEPT_RATIO = "train/filter_kept_ratio"
TRAIN_FILTER_ZERO_GROUPS = "train/filter_zero_groups"
TRAIN_FILTER_SKIPPED = "train/filter_skipped"
ACTOR_ENTROPY = "actor/entropy"
ACTOR_GRAD_NORM = "actor/grad_norm"
ACTOR_CLIP_FRAC = "actor/clip_frac"
ACTOR_CLIP_FRAC_HIGH = "actor/clip_frac_high"
ACTOR_APPROX_KL = "actor/approx_kl"
ACTOR_KL_REF = "actor/kl_ref"
ACTOR_PG_LOSS = "actor/pg_loss"
ACTOR_SKIPPED_STEPS = "actor/skipped_steps"
ACTOR_ENTROPY_ADV_COV = "actor/entropy_adv_cov"
CRITIC_VF_LOSS = "critic/vf_loss"
CRITIC_EXPLAINED_VAR = "critic/explained_var"
CRITIC_GRAD_NORM = "critic/grad_norm"
CRITIC_SKIPPED_STEPS = "critic/skipped_steps"
RESPONSE_THINK_TOKENS_MEAN = "response/think_tokens_mean"
RESPONSE_TOKENS_MEAN = "response/tokens_mean"
VAL_SUCCESS = "val/success"
VAL_ENV_SUCCESS = "val/<env>/success"
TIME_ROLLOUT_S = "time/rollout_s"
TIME_UPDATE_S = "time/update_s"
TIME_STEP_S = "time/step_s"
TIME_COLLAPSE_S = "time/collapse_s"
PERF_TOKENS_PER_S = "perf/tokens_per_s"
PERF_MAX_MEMORY_ALLOCATED_GB = "perf/max_memory_allocated_gb"
PERF_MAX_MEMORY_RESERVED_GB = "perf/max_memory_reserved_gb"
PERF_RSS_GB = "perf/rss_gb"
COLLAPSE_MI_ESTIMATE = "collapse/mi_estimate"
COLLAPSE_MI_ESTIMATE_SEQ = "collapse/mi_estimate_seq"
COLLAPSE_CONDITIONAL_ENTROPY = "collapse/conditional_entropy"
COLLAPSE_REASONING_ENTROPY = "collapse/reasoning_entropy"
COLLAPSE_RETRIEVAL_ACC = "collapse/retrieval_acc"
COLLAPSE_RETRIEVAL_CHANCE = "collapse/retrieval_chance"
COLLAPSE_RETRIEVAL_ABOVE_CHANCE = "collapse/retrieval_above_chance"
COLLAPSE_MI_ZSCORE = "collapse/mi_zscore"
COLLAPSE_MI_ZSCORE_EMA = "collapse/mi_zscore_ema"
COLLAPSE_VALID_THINKING_RATE = "collapse/valid_thinking_rate"
COLLAPSE_NUM_PROMPTS = "collapse/num_prompts"
COLLAPSE_NUM_SAMPLES = "collapse/num_samples"
# The trajectory variant of template collapse logs every collapse/<name> above as collapse/traj/<name>.
COLLAPSE_PREFIX = "collapse/"
COLLAPSE_TRAJ_PREFIX = "collapse/traj/"


def collapse_traj(key: str) -> str:
    """The trajectory variant's key of a first-turn collapse key: collapse/mi_estimate -> collapse/traj/mi_estimate."""
    return COLLAPSE_TRAJ_PREFIX + key.removeprefix(COLLAPSE_PREFIX)


# The run's outcome, as the detector's success trend and the alert email's chart pick it: the first of
# these the run logs (success; a run without it, validation success; then mean reward).
OUTCOME_KEYS = (TRAIN_SUCCESS, VAL_SUCCESS, TRAIN_REWARD_MEAN)

# The run page's Training charts, in the order it draws them; each draws its metrics in registry order.
SUCCESS_CHART = Chart("success", "Success (train and validation)")
REWARD_CHART = Chart("reward", "Reward mean")
REWARD_STD_CHART = Chart("reward_std", "In-group reward std")
ZERO_STD_CHART = Chart("zero_std", "Fraction of zero-std groups")
ENTROPY_CHART = Chart("entropy", "Entropy")
GRAD_NORM_CHART = Chart("grad_norm", "Gradient norm")
LENGTH_CHART = Chart("length", "Thinking and response length (tokens)")
FORMAT_CHART = Chart("format", "Format-valid rate")
CLIP_CHART = Chart("clip", "Clip fraction")
KL_CHART = Chart("kl", "KL")
CHART_ORDER = (
    SUCCESS_CHART,
    REWARD_CHART,
    REWARD_STD_CHART,
    ZERO_STD_CHART,
    ENTROPY_CHART,
    GRAD_NORM_CHART,
    LENGTH_CHART,
    FORMAT_CHART,
    CLIP_CHART,
    KL_CHART,
)
# One chart per environment of the run's rollout.val_envs, after the charts above.
VAL_ENV_CHART = Chart("val_<env>", "Validation success on <env>")

METRICS: tuple[Metric, ...] = (
    Metric(
        TRAIN_SUCCESS,
        'fraction of this step\'s P x N training episodes that succeeded (env `info["success"]`)',
        "fraction",
        SUCCESS_CHART,
        aliases=(
            Alias("", "success"),
            Alias("", "success_rate"),
            Alias("", "train/success_rate"),
            # RAGEN logs each training environment's success under its tag (train/SimpleSokoban/success)
            Alias(RAGEN, "train/<env>/success", note="one training environment"),
        ),
    ),
    Metric(
        TRAIN_REWARD_MEAN,
        "mean raw trajectory reward (env rewards + format penalties)",
        "reward",
        REWARD_CHART,
        aliases=(Alias(VERL, "critic/score/mean"), Alias(TRL, "reward")),
    ),
    Metric(
        TRAIN_REWARD_STD_IN_GROUP,
        "mean over the P groups of the within-group std (unbiased) of raw rewards",
        "reward",
        REWARD_STD_CHART,
        # Linear: a log axis cannot draw 0, and a std of 0 (every group one reward) is the collapse signal.
        # Not TRL's `reward_std`: since TRL 0.17 it is the std over the whole batch, every group's rewards
        # together (grpo_trainer: nanstd(rewards)), which stays up while every group agrees within itself.
        aliases=(Alias(RAGEN, "rollout/in_group_std"),),
    ),
    Metric(
        TRAIN_REWARD_STD_HIST,
        "every group's within-group std (unbiased) of raw rewards, P values per step, before the filter (its"
        " input): a record per step (Sink.records), not a point; the run page draws it as a heat strip",
        "reward",
    ),
    Metric(
        TRAIN_FRAC_ZERO_STD_GROUPS,
        "fraction of groups whose rewards are all equal (std < 1e-6)",
        "fraction",
        ZERO_STD_CHART,
        aliases=(Alias(TRL, "frac_reward_zero_std"),),
    ),
    Metric(
        TRAIN_FORMAT_VALID,
        "mean over trajectories of the fraction of turns whose reply parsed",
        "fraction",
        FORMAT_CHART,
        known_as="RAGEN format reward",
    ),
    Metric(
        TRAIN_ACTIONS_VALID,
        "valid action words / action words written (after the per-turn cut)",
        "fraction",
        aliases=(Alias(RAGEN, "action_is_valid", renamed=False),),
    ),
    Metric(
        TRAIN_FILTER_KEPT_RATIO,
        "groups kept by the StarPO-S filter / P (1.0 with no filter)",
        "fraction",
        known_as="RAGEN rollout filter ratio",
    ),
    Metric(
        TRAIN_FILTER_ZERO_GROUPS,
        "groups whose rewards have no spread (unbiased std <= 1e-10)",
        "groups",
        aliases=(Alias(RAGEN, "rollout/filter_zero_count", renamed=False),),
    ),
    Metric(
        TRAIN_FILTER_SKIPPED,
        "1 when the filter kept no group, so the step trained on nothing, else 0",
        "0 or 1",
        aliases=(Alias(RAGEN, "rollout/empty_after_filter", renamed=False),),
    ),
    Metric(
        ACTOR_ENTROPY,
        "mean per-token policy entropy over the model's tokens, during the update",
        "nats per token",
        ENTROPY_CHART,
        aliases=(
            Alias(VERL, "actor/entropy"),
            # older veRL logs the (positive) entropy under this name
            Alias(VERL, "actor/entropy_loss", note="older veRL"),
            Alias(TRL, "entropy"),
        ),
    ),
    Metric(
        ACTOR_GRAD_NORM,
        "mean actor gradient norm before clipping over the optimizer steps of this step (finite ones)",
        "",
        GRAD_NORM_CHART,
        log=True,
        aliases=(Alias(VERL, "actor/grad_norm"), Alias(TRL, "grad_norm")),
    ),
    Metric(
        ACTOR_CLIP_FRAC,
        "fraction of tokens where the clipped term was active",
        "fraction of tokens",
        CLIP_CHART,
        # TRL's region_mean: tokens clipped at either bound
        aliases=(Alias(VERL, "actor/pg_clipfrac"), Alias(TRL, "clip_ratio/region_mean")),
    ),
    Metric(
        ACTOR_CLIP_FRAC_HIGH,
        "fraction of tokens with A > 0 and ratio > 1 + eps_high",
        "fraction of tokens",
        CLIP_CHART,
        aliases=(Alias(TRL, "clip_ratio/high_mean"),),
    ),
    Metric(
        ACTOR_APPROX_KL,
        "mean (logp_old - logp), each clamped to +-20 as veRL, over the model's tokens: drift from the rollout policy",
        "nats per token",
        KL_CHART,
        aliases=(Alias(VERL, "actor/ppo_kl"),),
    ),
    Metric(
        ACTOR_KL_REF,
        "mean KL estimate (k1 or k3) to the reference policy; only when kl_coef > 0",
        "nats per token",
        KL_CHART,
        aliases=(
            Alias(VERL, "actor/kl_loss"),
            Alias(VERL, "critic/kl", renamed=False, note="the KL in veRL's token reward"),
            Alias(TRL, "kl"),
        ),
    ),
    Metric(
        ACTOR_PG_LOSS,
        "policy loss (incl. nothing else), summed over micro-batches, mean over mini-batches",
        aliases=(Alias(VERL, "actor/pg_loss"),),
    ),
    Metric(
        ACTOR_SKIPPED_STEPS,
        "optimizer steps skipped in this step because the gradient norm was not finite",
        "optimizer steps",
    ),
    Metric(
        ACTOR_ENTROPY_ADV_COV,
        "mean over the kept trajectories' response tokens of (A_t - mean A)(log pi_old,t - mean log pi_old):"
        " the covariance that moves the policy's entropy (positive: entropy falls); A as used in the loss"
        " (PPO: whitened GAE; GRPO: group-normalised)",
        known_as="veRL's Clip-Cov / KL-Cov act on it (Cui et al., \"The Entropy Mechanism of RL for Reasoning"
        ' LMs"); not charted by veRL or TRL',
    ),
    Metric(CRITIC_VF_LOSS, "clipped value loss, PPO only", aliases=(Alias(VERL, "critic/vf_loss"),)),
    Metric(
        CRITIC_EXPLAINED_VAR,
        "1 - Var(returns - V_old) / Var(returns) over the model's tokens, PPO only",
        "at most 1",
        aliases=(Alias(VERL, "critic/vf_explained_var", renamed=False),),
    ),
    Metric(
        CRITIC_GRAD_NORM,
        "critic gradient norm before clipping (mean over the steps taken), PPO only",
        aliases=(Alias(VERL, "critic/grad_norm"),),
    ),
    Metric(
        CRITIC_SKIPPED_STEPS,
        "critic optimizer steps skipped in this step because its gradient norm was not finite, PPO only",
        "optimizer steps",
    ),
    Metric(
        RESPONSE_THINK_TOKENS_MEAN,
        "tokens inside `<think>...</think>` per trajectory (reasoning length)",
        "tokens",
        LENGTH_CHART,
        known_as="RAGEN reasoning length",
    ),
    Metric(
        RESPONSE_TOKENS_MEAN,
        "generated tokens per trajectory (all turns)",
        "tokens",
        LENGTH_CHART,
        aliases=(Alias(VERL, "response_length/mean"), Alias(TRL, "completions/mean_length")),
    ),
    Metric(
        VAL_SUCCESS,
        "success on the fixed validation seeds 0..val_seeds-1 (temperature val_temperature); on steps 0, every"
        " val_every, and the last, measured after that step's update (so step 0 is one update in;"
        " bench/learning.py validates the untrained model separately)",
        "fraction",
        SUCCESS_CHART,
        aliases=(Alias(RAGEN, "val/success"), Alias("", "val/success_rate")),
    ),
    Metric(
        VAL_ENV_SUCCESS,
        "the same, in each environment of `rollout.val_envs` (its default parameters, the run's episode"
        " shape); the training environment's entry equals `val/success`",
        "fraction",
        VAL_ENV_CHART,
        aliases=(Alias(RAGEN, "val-env/<tag>/success", renamed=False),),
    ),
    Metric(
        TIME_ROLLOUT_S,
        "rollout (generation + environments)",
        "seconds",
        aliases=(Alias(VERL, "timing_s/gen", renamed=False),),
    ),
    Metric(
        TIME_UPDATE_S,
        "filtering, advantages and updates",
        "seconds",
        aliases=(Alias(VERL, "timing_s/update_actor", renamed=False),),
    ),
    Metric(
        TIME_STEP_S,
        "the whole step incl. validation",
        "seconds",
        aliases=(
            Alias(VERL, "timing_s/step", renamed=False),
            Alias(TRL, "step_time", renamed=False, note="an optimizer step, without evaluation"),
        ),
    ),
    Metric(
        TIME_COLLAPSE_S,
        "the template-collapse estimate (both samplings), on the steps it runs (counted in `time/update_s`"
        " and `time/step_s`)",
        "seconds",
    ),
    Metric(
        PERF_TOKENS_PER_S,
        "generated tokens / rollout seconds",
        "tokens/s",
        aliases=(Alias(VERL, "perf/throughput", renamed=False),),
    ),
    Metric(
        PERF_MAX_MEMORY_ALLOCATED_GB,
        "the accelerator memory the step's tensors took at most (CUDA `max_memory_allocated` since the step"
        " began); not logged on a CPU",
        "GiB",
        known_as="veRL: the same name",
    ),
    Metric(
        PERF_MAX_MEMORY_RESERVED_GB,
        "the accelerator memory PyTorch's allocator held at most during the step (CUDA"
        " `max_memory_reserved`: what an out-of-memory error counts); not logged on a CPU",
        "GiB",
        known_as="veRL: the same name",
    ),
    Metric(
        PERF_RSS_GB,
        "the training process's resident memory on the host at the step's end",
        "GiB",
        known_as="veRL `perf/cpu_memory_used_gb` (the whole machine's used memory; not renamed)",
    ),
    # Template collapse (trainer/collapse.py, RAGEN-2): our keys are RAGEN-2's names under collapse/.
    Metric(
        COLLAPSE_MI_ESTIMATE,
        "mean(matched) - mean(marginal): estimated I(X; Z) in nats, at most log J; ~0 for a template, and a "
        "little below 0 when a reasoning is by chance likelier under other prompts than its own",
        "nats",
    ),
    Metric(
        COLLAPSE_MI_ESTIMATE_SEQ,
        "the same with L summed over Z's tokens instead of averaged (RAGEN-2's `_seq` variant)",
        "nats",
    ),
    Metric(
        COLLAPSE_CONDITIONAL_ENTROPY,
        "-mean(matched): H(Z given its own prompt), per token",
        "nats per token",
    ),
    Metric(
        COLLAPSE_REASONING_ENTROPY,
        "-mean(marginal): H(Z) under the batch's prompt mixture, per token",
        "nats per token",
    ),
    Metric(COLLAPSE_RETRIEVAL_ACC, "share of sampled Z whose best-scoring prompt is its own", "fraction"),
    Metric(
        COLLAPSE_RETRIEVAL_CHANCE,
        "what guessing gives: 1 / J (the prompts are distinct, so one of J matches)",
        "fraction",
    ),
    Metric(COLLAPSE_RETRIEVAL_ABOVE_CHANCE, "`retrieval_acc - retrieval_chance`", "difference of fractions"),
    Metric(
        COLLAPSE_MI_ZSCORE,
        "mean((matched - marginal) / (sigma + 0.001)), sigma = population SD of marginal over the pairs",
    ),
    Metric(
        COLLAPSE_MI_ZSCORE_EMA,
        "the same with sigma_ema <- 0.9 sigma_ema + 0.1 sigma (first measurement: sigma); a resumed run"
        " starts it afresh",
    ),
    Metric(
        COLLAPSE_VALID_THINKING_RATE,
        "share of the batch's trajectories whose first turn has a non-empty Z",
        "fraction",
    ),
    Metric(COLLAPSE_NUM_PROMPTS, "J: the distinct prompts among the sampled pairs", "prompts"),
    Metric(COLLAPSE_NUM_SAMPLES, "the number of pairs scored", "pairs"),
)
# The trajectory variant (a uniform trajectory, then a uniform turn): the same quantities on its pairs.
_TRAJ_MEANINGS = {
    COLLAPSE_VALID_THINKING_RATE: "share of all the batch's turns (every trajectory, every turn) with a non-empty Z",
    COLLAPSE_NUM_SAMPLES: "the number of pairs drawn (a pair drawn twice counts twice, is scored once)",
}
METRICS += tuple(
    Metric(
        collapse_traj(m.key),
        _TRAJ_MEANINGS.get(m.key, f"`{m.key}` on the trajectory variant's pairs"),
        m.unit,
    )
    for m in METRICS
    if m.key.startswith(COLLAPSE_PREFIX)
)
# RAGEN-2 computes these under collapse/<name> but logs them under the name of the sampling
# (collapse_metrics.py, _prefix_metrics): collapse_first_turn_sample/<name> (ours: collapse/<name>) and
# collapse_trajectory_sample/<name> (ours: collapse/traj/<name>), a few with names of their own. Its
# collapse/valid_thinking_rate (over every turn) is not renamed: it is our key's name for the first turn.
RAGEN2_FIRST_TURN, RAGEN2_TRAJECTORY = "collapse_first_turn_sample/", "collapse_trajectory_sample/"
_RAGEN2_NAMES = {
    COLLAPSE_MI_ESTIMATE: "mi_estimate",
    COLLAPSE_MI_ESTIMATE_SEQ: "mi_seq_estimate",
    COLLAPSE_CONDITIONAL_ENTROPY: "conditional_entropy_est",
    COLLAPSE_REASONING_ENTROPY: "reasoning_entropy_est",
    COLLAPSE_RETRIEVAL_ACC: "retrieval_accuracy",
    COLLAPSE_RETRIEVAL_CHANCE: "retrieval_chance_level",
    COLLAPSE_RETRIEVAL_ABOVE_CHANCE: "retrieval_above_chance",
    COLLAPSE_MI_ZSCORE: "mi_zscore",
    COLLAPSE_MI_ZSCORE_EMA: "mi_zscore_ema",
}
_RAGEN2_ALIASES = {
    **{key: (Alias(RAGEN, RAGEN2_FIRST_TURN + name),) for key, name in _RAGEN2_NAMES.items()},
    **{collapse_traj(key): (Alias(RAGEN, RAGEN2_TRAJECTORY + name),) for key, name in _RAGEN2_NAMES.items()},
}
METRICS = tuple(replace(m, aliases=m.aliases + _RAGEN2_ALIASES.get(m.key, ())) for m in METRICS)

BY_KEY = {metric.key: metric for metric in METRICS}


def registered(key: str) -> Metric | None:
    """The entry of `key`, a pattern's for keys like val/sokoban/success; None for a key not registered."""
    return BY_KEY.get(key) or next((m for m in METRICS if m.is_pattern and m.matches(key)), None)


# A fraction a little past 0 or 1 is another trainer's rounding, not a bad value: half precision's step
# near 1 is 0.008 (bf16)
BOUNDS_SLACK = 0.01


@functools.lru_cache(maxsize=4096)
def bounds(key: str) -> tuple[float, float] | None:
    """The values `key` can take (our key, a pattern's, or another trainer's name that canonical() renames
    to ours), where they are bounded; None for a key that has no bounds or is not registered. Every way in
    checks the same: a value the ingest API took (it stores keys as sent) must import back from its export."""
    metric = registered(alias_of(key) or key)
    return metric.bounds if metric is not None else None


def within(limits: tuple[float, float], value: float) -> bool:
    """Whether a value is one of a bounded key's; NaN and the infinities are no data, not out of bounds
    (charts draw a gap and rules skip them)."""
    return limits[0] - BOUNDS_SLACK <= value <= limits[1] + BOUNDS_SLACK or not math.isfinite(value)


def out_of_bounds(key: str, value: float) -> str | None:
    """Why `value` cannot be `key`'s (a success rate of 7.5), quoted as given, else None."""
    limits = bounds(key)
    if limits is None or within(limits, value):
        return None
    percent = "; a percentage? send it divided by 100" if 1 < value <= 100 else ""
    return f"must be between {limits[0]:g} and {limits[1]:g} ({key} is a fraction), got {value!r}{percent}"


def chart_log(chart: Chart) -> bool:
    """Whether the chart's y axis is logarithmic: its metrics' `log`, which must agree."""
    flags = {metric.log for metric in METRICS if metric.chart == chart}
    if len(flags) != 1:
        raise ValueError(f"chart {chart.id!r}: its metrics disagree on log scale, or it has none")
    return flags.pop()


def chart_spec(chart: Chart, **parts: str) -> dict:
    """One chart as the run and compare pages draw it: id, title, its keys, log: True on a log axis, and
    bounds: [low, high] when every key it draws is bounded alike (fractions: [0, 1])."""
    drawn: dict[str, object] = {
        "id": _fill(chart.id, parts),
        "title": _fill(chart.title, parts),
        "keys": [_fill(metric.key, parts) for metric in METRICS if metric.chart == chart],
    }
    bounds = {metric.bounds for metric in METRICS if metric.chart == chart}
    shared = bounds.pop() if len(bounds) == 1 else None
    if shared is not None:
        drawn["bounds"] = list(shared)
    return {**drawn, "log": True} if chart_log(chart) else drawn


# The standard charts every run page draws, in order, and the keys they draw (the compare API's default).
CHARTS = [chart_spec(each) for each in CHART_ORDER]
CHART_KEYS = list(dict.fromkeys(key for each in CHARTS for key in each["keys"]))


def val_env_charts(envs: list[str]) -> list[dict]:
    """One validation-success chart per environment, after CHARTS."""
    return [chart_spec(VAL_ENV_CHART, env=env) for env in envs]


# Foreign key -> our key, for every alias a file may carry that canonical() renames.
ALIASES = {
    spelling: metric.key
    for metric in METRICS
    for alias in metric.aliases
    if alias.renamed and not alias.is_pattern
    for spelling in alias.spellings()
    if spelling != metric.key
}
# The aliases with a part that varies (RAGEN's train/<env>/success): each <part> is one path segment.
PATTERN_ALIASES = tuple(
    (_pattern(spelling), metric.key)
    for metric in METRICS
    for alias in metric.aliases
    if alias.renamed and alias.is_pattern
    for spelling in alias.spellings()
)


@functools.lru_cache(maxsize=4096)
def alias_of(key: str) -> str | None:
    """Our key that `key`, another trainer's name, is renamed to (a pattern alias's included); None for our
    own keys and keys that are no alias."""
    if key in ALIASES:
        return ALIASES[key]
    if registered(key) is not None:
        return None
    return next((ours for pattern, ours in PATTERN_ALIASES if pattern.fullmatch(key)), None)


# The seconds-per-step keys the run page's training-time axis may sum, ours first: another trainer's are
# close to ours but span other parts of a step (not renamed), so the axis' title names the key it sums.
CLOCK_KEYS = (TIME_STEP_S, *(name for alias in BY_KEY[TIME_STEP_S].aliases for name in alias.spellings()))
