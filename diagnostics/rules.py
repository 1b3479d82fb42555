"""The Echo Trap rules: each turns one step of metrics into a Check (is the condition breached now?).

A rule knows nothing about pending periods, firing or resolving: `detector.Alert` does that for every
rule alike. A rule returns None when it cannot judge this step (its metric is missing, or it has not
seen enough of the run yet): no data is not a breach.

Every rule also sees the run's `SuccessTrend` (one per detector): whether success has a real peak, and
whether it is falling from it. A falling reward std, short thinking and entropy climbing back are also
what learning looks like, so those warnings hold their fire while success rises or holds a plateau
(`success_holds`); none of the guarded rules fires on a run that never learned.

Every rule keeps O(1) state per step (an EMA, a peak, a fixed-size window), so a run of any length
costs the same per step.

Defaults were calibrated on tests/data/detector/ (see docs/DETECTOR.md and bench/detector.py).
"""

import bisect
import math
import statistics
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .aliases import finite
from .metrics import (
    ACTOR_APPROX_KL,
    ACTOR_ENTROPY,
    ACTOR_GRAD_NORM,
    COLLAPSE_MI_ESTIMATE,
    COLLAPSE_RETRIEVAL_ABOVE_CHANCE,
    OUTCOME_KEYS,
    RESPONSE_THINK_TOKENS_MEAN,
    TRAIN_FORMAT_VALID,
    TRAIN_FRAC_ZERO_STD_GROUPS,
    TRAIN_REWARD_MEAN,
    TRAIN_REWARD_STD_IN_GROUP,
    TRAIN_SUCCESS,
    VAL_SUCCESS,
)

# One step's metrics under our names (see aliases.canonical); values are floats, NaN/inf included.
Metrics = Mapping[str, float]

# Every key a rule or the SuccessTrend reads from Metrics: a step's other keys cannot change any event, so a
# replay may load only these (tests/diagnostics/test_detector_inputs.py checks that on the labelled set).
READS = frozenset(
    {
        ACTOR_APPROX_KL,
        ACTOR_ENTROPY,
        ACTOR_GRAD_NORM,
        COLLAPSE_MI_ESTIMATE,
        COLLAPSE_RETRIEVAL_ABOVE_CHANCE,
        *OUTCOME_KEYS,
        RESPONSE_THINK_TOKENS_MEAN,
        TRAIN_FORMAT_VALID,
        TRAIN_FRAC_ZERO_STD_GROUPS,
        TRAIN_REWARD_MEAN,
        TRAIN_REWARD_STD_IN_GROUP,
        TRAIN_SUCCESS,
        VAL_SUCCESS,
    }
)


_NORMAL = statistics.NormalDist()  # SuccessTrend.FAMILY_RATE's thresholds


def param(default: Any, help: str, min: float | None = None, max: float | None = None) -> Any:
    """A dataclass field with the help text and bounds that the detector's form and validation read."""
    return field(default=default, metadata={"help": help, "min": min, "max": max})


@dataclass
class RuleParams:
    enabled: bool = param(True, "evaluate this rule at all")
    pending: int = param(3, "consecutive breached evaluations before the alert fires", min=1)
    recovery: int = param(10, "consecutive clear evaluations before a firing alert resolves", min=1)
    smoothing: float = param(
        0.6, "EMA weight of the past (0 = raw values), as TensorBoard's slider", min=0.0, max=0.99
    )


class Check(NamedTuple):
    breached: bool
    signals: dict  # the numbers the judgement used, for the event and the chart marker
    summary: str  # one line a person can read, true whether breached or not
    held: bool = False  # breached, but not to be announced yet (success is holding): the streak counts


class Ema:
    def __init__(self, smoothing: float) -> None:
        self.smoothing = smoothing
        self.value: float | None = None
        self.updates = 0  # values taken so far: a replay tells from it which steps moved the average

    def update(self, x: float) -> float:
        self.updates += 1
        self.value = x if self.value is None else self.smoothing * self.value + (1 - self.smoothing) * x
        return self.value


# What each of OUTCOME_KEYS measures, as an alert's headline names it: a reward-only run's collapse is
# a collapse of its mean reward, not of a success rate it never logged.
OUTCOME_NAMES = {
    TRAIN_SUCCESS: "Success",
    VAL_SUCCESS: "Validation success",
    TRAIN_REWARD_MEAN: "Mean reward",
}


class SuccessTrend:
    """The run's success, tracked once for all rules: where it started, its smoothed peak, its noise, and
    whether it is falling now.

    - noise: the standard deviation of one step's value around the trend, from step-to-step changes
      (mean |change| * sqrt(pi) / 2, exact for normal noise, over the last `NOISE_WINDOW` changes): a
      trend barely moves it. (A median would be more robust to jumps, but success rates of a few dozen
      episodes move in steps of 1/32 and its median then under-reads the noise.)
    - A peak is *real* when the mean of `PEAK_WINDOWS` values in a row once stood `k` standard errors
      (in the noise of that time) above the mean of the first `START_STEPS` values, beyond what the best
      of that many windows reaches by chance (`chance_excess`): a run that never learned (success noisy
      around 0.05-0.1) has no peak, however long it runs. The maximum of a noisy series grows with its
      length; judged as a fixed number of SDs, 8 in 20 flat 200-step runs at 0.07 had a "real" peak.
    - *Falling*: the mean of the last `RECENT` values, or the last value alone, is below the mean of the
      `BEFORE` values ahead of them by `k` standard errors (two-window z-tests: a plateau's noise rarely
      passes them, unlike "below the running peak", which a noisy plateau is half of the time), or the
      smoothed value is below half its peak by `k` standard errors of the smoothed value (a slow drift).
      Every branch is measured in the run's own noise: a single noisy step that takes the smoothed value
      just under half a peak (itself the maximum of a noisy series) is not a fall.
    The metric is the first of OUTCOME_KEYS the run logs, chosen at the first step that has one and then
    kept, so the peak is never compared across scales.
    """

    SMOOTHING = 0.3  # light: the half-peak test must not lag a sudden fall
    START_STEPS = 5
    # The levels a peak is judged by: means of this many values in a row, not one smoothed value; the
    # shorter for series logged sparsely (validation every 10 steps), the longer for noisy ones.
    PEAK_WINDOWS = (5, 10)
    NOISE_WINDOW = 30
    # The fall tests divide by the larger of the noise over NOISE_WINDOW changes and over this many: 30
    # changes give an estimate ~17% uncertain, and success rates of a few dozen episodes repeat values,
    # so a quiet stretch reads low and ordinary steps then look significant (bench/detector.py's simulated
    # plateaus: 2, 4 and 4 runs in 40 warned with the 30-change noise alone, 2, 2 and 1 with this).
    FALL_NOISE_WINDOW = 60
    RECENT, BEFORE = 5, 10
    # A start level below this has nothing to lose (see lost_start): the mean of five noisy steps of a run
    # that never learned (0.05-0.1) reads up to ~0.12, and its fall to 0 is then a few noise SDs.
    MIN_START = 0.2
    # Lost start (see lost_start): the last RECENT values average under this fraction of the start.
    LOST_FRACTION = 0.5
    # Flatlined (see flatlined()): at least this many success rates in a row at the run's lowest, a
    # stretch whose chance anywhere in the run, at the rate its earlier values sat there, is below
    # FLAT_CHANCE; the earlier values averaged at least MIN_START above it.
    FLAT_STEPS = 10
    FLAT_CHANCE = 1e-3
    FLAT_TOLERANCE = 1e-9  # "unchanged": success averaged over ranks may differ in its last bits
    # The fall tests run at every step: over a long run the largest of its noise readings passes any
    # fixed threshold (about sqrt(2 ln n) SEs for n steps). Their threshold is at least the one that n
    # normal readings all stay under with this chance of an exception (Bonferroni): 3.29 SEs at 100
    # steps, 3.72 at 500, 4.06 at 2,000; below ~250 steps the fixed default (3.5) is the larger.
    FAMILY_RATE = 0.05
    GUARD_PEAK_SIGMAS = 3.0

    def __init__(self) -> None:
        self.metric = ""
        self.ema = Ema(self.SMOOTHING)
        self.value: float | None = None  # smoothed
        self.peak = -math.inf
        self.start: list[float] = []
        self.window: deque[float] = deque(maxlen=self.BEFORE + self.RECENT)
        self.changes: deque[float] = deque(maxlen=self.FALL_NOISE_WINDOW)
        self.best_rise = 0.0  # the best window mean above the start so far, in standard errors, beyond chance
        self.best_smoothed_rise = 0.0  # the highest smoothed value above the start so far, in noise SDs
        self.best_levels = dict.fromkeys(self.PEAK_WINDOWS, -math.inf)  # the best mean of w values in a row
        # Kept up to date by update() instead of being recomputed by every rule that asks, several times a
        # step: both change only when a value arrives (the baseline only during the first START_STEPS).
        self.noise = 0.0
        self.fall_noise = 0.0  # the noise the fall tests use (see FALL_NOISE_WINDOW)
        self.baseline = math.nan
        # For flatlined(): the lowest value, how many values sat at it (in all, and in a row at the end),
        # and the count and sum of all values.
        self.low = math.inf
        self.at_low = 0
        self.at_low_in_a_row = 0
        self.count = 0
        self.total = 0.0
        self.run_length_sigmas = 0.0  # see FAMILY_RATE

    def update(self, metrics: Metrics) -> None:
        if not self.metric:
            self.metric = next((k for k in OUTCOME_KEYS if finite(metrics.get(k)) is not None), "")
        x = finite(metrics.get(self.metric)) if self.metric else None
        if x is None:
            return
        if self.window:
            self.changes.append(abs(x - self.window[-1]))
            recent = list(self.changes)[-self.NOISE_WINDOW :]
            self.noise = statistics.fmean(recent) * math.sqrt(math.pi) / 2
            self.fall_noise = max(self.noise, statistics.fmean(self.changes) * math.sqrt(math.pi) / 2)
        self.window.append(x)
        self._track_low(x)
        if len(self.start) < self.START_STEPS:
            self.start.append(x)
            self.baseline = statistics.fmean(self.start)
        self.value = self.ema.update(x)
        self.peak = max(self.peak, self.value)
        self.run_length_sigmas = _NORMAL.inv_cdf(1 - self.FAMILY_RATE / self.count)
        if self.known:
            values = list(self.window)
            for w in self.PEAK_WINDOWS:
                n = min(w, len(values))
                level = statistics.fmean(values[-n:])
                if n == w:
                    self.best_levels[w] = max(self.best_levels[w], level)
                self.best_rise = max(self.best_rise, self._rise(level, n, self.noise))
            late = max(0.0, self.run_length_sigmas - self.GUARD_PEAK_SIGMAS)
            self.best_smoothed_rise = max(
                self.best_smoothed_rise, _in_sds(self.value - self.baseline, self.noise) - late
            )

    def _rise(self, level: float, w: int, noise: float) -> float:
        """A mean of `w` values above the start, in standard errors of the difference of the two means,
        less what the best of the run's windows so far reaches by chance."""
        sd = noise * math.sqrt(1 / w + 1 / self.START_STEPS)
        return _in_sds(level - self.baseline, sd) - self.chance_excess(w, self.START_STEPS)

    def chance_excess(self, w: int, other: int) -> float:
        """How far, in standard errors of a difference of means of `w` and `other` values, the best of
        the run's windows of `w` values stands above their mean by chance: about sqrt(2 ln m) standard
        errors of one window for the maximum of m independent normals, m = the windows that do not
        overlap so far."""
        windows = max(self.count / w, 1.0)
        return math.sqrt(2 * math.log(windows)) * math.sqrt((1 / w) / (1 / w + 1 / other))

    def _track_low(self, x: float) -> None:
        if x < self.low - self.FLAT_TOLERANCE:
            self.low, self.at_low, self.at_low_in_a_row = x, 0, 0
        if abs(x - self.low) <= self.FLAT_TOLERANCE:
            self.at_low += 1
            self.at_low_in_a_row += 1
        else:
            self.at_low_in_a_row = 0
        self.count += 1
        self.total += x

    @property
    def known(self) -> bool:
        """Enough steps to judge the start level and the noise."""
        return len(self.start) == self.START_STEPS

    def rise(self) -> float:
        """The peak above the start, in standard errors of the time it was reached, beyond chance (inf
        without noise)."""
        return self.best_rise

    def rise_now(self) -> float:
        """The peak above the start in today's noise: lower when the series got noisier since (a policy
        that turns all-or-nothing per prompt makes a success rate over a few groups jump); -inf before
        a window of values."""
        return max(self._rise(level, w, self.noise) for w, level in self.best_levels.items())

    def fall(self) -> float:
        """How far the last values sit below the best run of as many, in standard errors of the
        difference, less what the best window and the lowest recent one reach by chance (the larger of
        the PEAK_WINDOWS' readings): a plateau's noise does not pass it, however long the run."""
        values, falls = list(self.window), []
        for w, best in self.best_levels.items():
            recent = statistics.fmean(values[-w:])
            sd = self.fall_noise * math.sqrt(2 / w)
            falls.append(_in_sds(best - recent, sd) - 2 * self.chance_excess(w, w))
        return max(falls)

    @property
    def best_level(self) -> float:
        """The best mean of PEAK_WINDOWS[-1] values in a row (of fewer while the run is shorter)."""
        return next((level for level in reversed(self.best_levels.values()) if level > -math.inf), -math.inf)

    def drop(self) -> float | None:
        """How far the last RECENT values sit below the BEFORE values ahead of them, in standard errors;
        None until the window is full."""
        if len(self.window) < self.BEFORE + self.RECENT:
            return None
        values = list(self.window)
        before, recent = statistics.fmean(values[: self.BEFORE]), statistics.fmean(values[self.BEFORE :])
        return _in_sds(before - recent, self.fall_noise * math.sqrt(1 / self.BEFORE + 1 / self.RECENT))

    def dip(self) -> float | None:
        """How far the last value sits below the BEFORE values ahead of it, in standard errors (a sudden
        fall, seen a few steps before the RECENT window's mean shows it); None until there are enough."""
        if len(self.window) < self.BEFORE + 1:
            return None
        values = list(self.window)[-self.BEFORE - 1 :]
        before = statistics.fmean(values[:-1])
        return _in_sds(before - values[-1], self.fall_noise * math.sqrt(1 + 1 / self.BEFORE))

    @property
    def origin(self) -> float:
        """Where "half the peak" is measured from: 0 for a success rate; the start for the mean-reward
        fallback, whose zero means nothing (rewards of -3 to -1, or a run climbing through 0: "half of
        -1.3" or "44% of a peak of 0.14" is no measure of a fall)."""
        return self.baseline if self.metric == TRAIN_REWARD_MEAN else 0.0

    def below_half(self) -> float:
        """How far the smoothed value sits below half its peak (above the origin), in standard deviations
        of the smoothed value (an EMA of weight a over values of SD `noise` has SD noise * sqrt((1 - a) /
        (1 + a)))."""
        a, half = self.SMOOTHING, (self.peak + self.origin) / 2
        return _in_sds(half - (self.value or 0.0), self.fall_noise * math.sqrt((1 - a) / (1 + a)))

    def recent_mean(self) -> float:
        """The mean of the last RECENT values (fewer early in the run)."""
        return statistics.fmean(list(self.window)[-self.RECENT :])

    def below_start(self) -> float:
        """How far the last RECENT values sit below the start level, in standard errors of the difference
        of the two means: the start is itself a mean of START_STEPS noisy values, and a start that read
        high by chance is not a level the run lost."""
        recent = min(len(self.window), self.RECENT)
        # Early on the two windows share values, whose difference is then less noisy: the SD errs large.
        sd = self.fall_noise * math.sqrt(1 / recent + 1 / self.START_STEPS)
        return _in_sds(self.baseline - self.recent_mean(), sd)

    def lost_start(self, sigmas: float) -> bool:
        """Success fell below LOST_FRACTION of where the run began, and `sigmas` standard errors below the
        start: a run that never rose above its start can still lose what it could do at the start (an
        untrained model that answers in format, then stops). A start under MIN_START is noise around
        nothing. The fraction as well as the standard errors, because the test runs at every step against
        one start level (docs/DETECTOR.md, "Lost start"; tests/diagnostics/test_false_alarms.py)."""
        return (
            sigmas > 0
            and self.metric != TRAIN_REWARD_MEAN  # MIN_START and LOST_FRACTION are a success rate's
            and self.baseline >= self.MIN_START
            and self.recent_mean() < self.baseline * self.LOST_FRACTION
            and self.below_start() >= sigmas
        )

    def flatlined(self) -> bool:
        """Success (a rate: not the mean-reward fallback, whose scale MIN_START does not fit) has sat at
        the run's lowest value, unchanged, for the last FLAT_STEPS values or more, after earlier values
        that averaged MIN_START above it and rarely sat at it: a run that broke inside its first steps
        (every reply out of format from step 2 on) and so has no start level to lose.
        Rarely: at the earlier values' rate of sitting at the lowest (Laplace's estimate), a stretch this
        long anywhere among the run's values (a union bound over its positions) has a chance under
        FLAT_CHANCE, so runs of zeros in a run noisy around zero, or of one episode a step, are not
        flatlined unless they are far longer than the run's own past makes likely. One earlier value is
        enough: a run that breaks after its first step (0.31, then every reply out of format) has only
        that one; Laplace's estimate from it is 1/3, and (1/3)^length x n < FLAT_CHANCE then needs the
        stretch to be FLAT_STEPS (10) long for runs of up to ~60 values. The limit of so few values: a
        success rate over one or two episodes a step, low (0.1), whose first values happen to be 1 and
        then 10 zeros follow, reads the same (simulated: 11% of such 100-step runs at one episode a step,
        10% when two values were required; 1% at four episodes, none at 16; docs/DETECTOR.md)."""
        stretch = self.at_low_in_a_row
        before = self.count - stretch
        if self.metric == TRAIN_REWARD_MEAN or stretch < self.FLAT_STEPS or before < 1:
            return False
        rate = (self.at_low - stretch + 1) / (before + 2)
        return (
            self.earlier_mean() - self.low >= self.MIN_START and rate**stretch * self.count < self.FLAT_CHANCE
        )

    def earlier_mean(self) -> float:
        """The mean of the values before the run's current stretch at its lowest."""
        before = self.count - self.at_low_in_a_row
        return (self.total - self.at_low_in_a_row * self.low) / before if before else math.nan

    def fell_without_peak(self, sigmas: float) -> bool:
        """Lost what the run could do at its start, or flatlined: either counts as falling for a run
        without a real peak."""
        return self.lost_start(sigmas) or self.flatlined()

    def holding(self, peak_sigmas: float, fall_sigmas: float) -> bool | None:
        """False only when success is falling from a real peak (`peak_sigmas` above the start; falling by
        `fall_sigmas` standard errors: the last RECENT values unless the last value is back (recovered),
        the last value, or the smoothed value under half the peak), or lost its start or flatlined
        (fell_without_peak). True while it rises, holds a plateau, or never learned and keeps its start
        level (nothing to lose); None when too early to tell (rules then judge without it)."""
        if not self.known or self.value is None:  # known implies a value: one update per start value
            return None
        if self.best_smoothed_rise < peak_sigmas:
            return not self.fell_without_peak(peak_sigmas)
        if fall_sigmas == 0:
            return False
        sigmas = max(fall_sigmas, self.run_length_sigmas)
        drop = None if self.recovered() else self.drop()
        return not any(z is not None and z >= sigmas for z in (drop, self.dip(), self.below_half()))

    def recovered(self) -> bool:
        """The last value is back at or above the mean of the BEFORE values ahead of the RECENT window: a
        dip that is over still weighs on the RECENT mean for a few steps, but success is not falling now.
        It exempts only that window test: a run that fell and stays down (its last value equal to the
        mean before it, both low) is still under half its peak."""
        if len(self.window) < self.BEFORE + self.RECENT:
            return False
        values = list(self.window)
        return values[-1] >= statistics.fmean(values[: self.BEFORE])


def _in_sds(difference: float, sd: float) -> float:
    return difference / sd if sd > 0 else (math.inf if difference > 0 else 0.0)


# What RAGEN's StarPO-S changes against the Echo Trap, in the trainer's config keys (the remedies below).
STARPO_S_FIXES = (
    "the starpo-s preset, if the run is not on it (RAGEN's StarPO-S: train on the groups with the most "
    "reward spread, algorithm.filter: top_ratio with algorithm.filter_ratio: 0.25; clip higher, "
    "algorithm.eps_high: 0.28; no KL term, algorithm.kl_coef: 0; a critic, algorithm.advantage: ppo)"
)


class Rule(ABC):
    name = ""
    level = "warning"
    title = ""  # what a firing alert means, in a few words
    # What a researcher can try, from the RAGEN papers' findings, in the trainer's config keys; alert
    # emails and docs/DETECTOR.md give it with the event. Empty for an "info" rule: nothing to act on.
    remedy = ""
    metric = ""  # the key whose smoothed values `self.ema` holds: the value a Check's signals quote
    Params: type[RuleParams] = RuleParams

    def __init__(self, params: RuleParams) -> None:
        self.params = params
        self.ema = Ema(params.smoothing)

    def headline(self) -> str:
        """The title of this rule's next event: `title`, unless the rule words it for what it measured."""
        return self.title

    @abstractmethod
    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        """A Check, or None when the step has no value for this rule. `trend`: the run's SuccessTrend."""


@dataclass
class GuardedParams(RuleParams):
    success_sigmas: float = param(
        3.5,
        "hold the alert until success falls: its last 5 values, or its last "
        "value, this many standard errors below the 10 before them (or its "
        "smoothed value this many SDs below half its peak); "
        "0 = do not wait for a fall",
        min=0.0,
    )
    peak_sigmas: float = param(
        3.0,
        "hold it while success never rose this many noise SDs above the run's "
        "start (it never learned: nothing to lose) unless its last 5 values fell "
        "under half a start of at least 0.2, this many standard errors below it "
        "(or it flatlined at its lowest); 0 = judge those runs too",
        min=0.0,
    )


def success_holds(found: Check | None, trend: SuccessTrend, params: GuardedParams) -> Check | None:
    """`found`, held back while success is rising or flat (see SuccessTrend.holding). The breach still
    counts towards `pending`: a signal that has been down for a while fires as soon as success falls."""
    if found and found.breached and trend.holding(params.peak_sigmas, params.success_sigmas):
        return found._replace(held=True)
    return found


# --- falling below a fraction of the peak: reward std, thinking length, success ---------------------


@dataclass
class DropParams(RuleParams):
    fraction: float = param(
        0.5, "breach when the smoothed value is below this fraction of its peak", min=0.0, max=1.0
    )
    min_peak: float = param(0.0, "ignore the rule until the peak reaches this value", min=0.0)
    min_steps: int = param(10, "evaluations seen before judging (early noise makes false peaks)", min=1)


class DropFromPeak(Rule):
    """Smoothed metric below `fraction` x its running peak, once the peak means something."""

    Params: type[DropParams] = DropParams
    params: DropParams

    def __init__(self, params: DropParams) -> None:
        super().__init__(params)
        self.peak = -math.inf
        self.seen = 0

    def value(self, metrics: Metrics, trend: SuccessTrend) -> float | None:
        return finite(metrics.get(self.metric))

    def origin(self, trend: SuccessTrend) -> float:
        """What the fraction of the peak is measured from (see SuccessTrend.origin)."""
        return 0.0

    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        x = self.value(metrics, trend)
        if x is None:
            return None
        smoothed = self.ema.update(x)
        self.seen += 1
        self.peak = max(self.peak, smoothed)
        p, origin = self.params, self.origin(trend)
        rise = self.peak - origin
        if self.seen < p.min_steps or rise <= 0 or rise < p.min_peak:
            return None
        ratio = (smoothed - origin) / rise
        signals = {"metric": self.metric, "value": smoothed, "peak": self.peak, "ratio": ratio}
        if origin:
            signals["origin"] = origin
            summary = (
                f"smoothed {self.metric} {smoothed:.4g} kept {ratio:.0%} of its rise from the start {origin:.4g} "
                f"to its peak {self.peak:.4g}"
            )
        else:
            summary = f"smoothed {self.metric} {smoothed:.4g} is {ratio:.0%} of its peak {self.peak:.4g}"
        return Check(ratio < p.fraction, signals, summary)


@dataclass
class RewardStdParams(DropParams, GuardedParams):
    solved_success: float = param(
        0.8,
        "no breach while train/success is at least this: a solved task also has equal rewards in a group",
        min=0.0,
        max=1.0,
    )


class RewardStdDrop(DropFromPeak):
    """In-group reward std falls early, before the reward does: the paper's earliest warning.

    Learning also shrinks it (a solved task's groups agree, a confident policy's do too), so the alert
    is held while success rises or holds a plateau and fires once success falls from a real peak.
    """

    name = "reward_std_drop"
    title = "In-group reward std dropped"
    remedy = (
        f"Fewer groups still tell good replies from bad: try {STARPO_S_FIXES}, or more replies per prompt "
        "(rollout.group_size)."
    )
    metric = TRAIN_REWARD_STD_IN_GROUP
    Params = RewardStdParams
    params: RewardStdParams

    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        found = super().check(metrics, trend)
        if found and found.breached and metrics.get(TRAIN_SUCCESS, 0.0) >= self.params.solved_success:
            return found._replace(breached=False)
        return success_holds(found, trend, self.params)


@dataclass
class ThinkingParams(DropParams, GuardedParams):
    fraction: float = param(
        0.4,
        "breach when the smoothed value is below this fraction of its peak; "
        "healthy runs shrink slowly too, so this sits lower",
        min=0.0,
        max=1.0,
    )


class ThinkingDecay(DropFromPeak):
    """Reasoning traces vanish as replies turn into templates."""

    name = "thinking_decay"
    title = "Thinking length decayed"
    remedy = (
        "Reasoning is fading, as RAGEN saw when rewards do not depend on it: read the latest "
        "trajectories; a lower optim.actor_lr slows the drift."
    )
    metric = RESPONSE_THINK_TOKENS_MEAN
    Params = ThinkingParams
    params: ThinkingParams

    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        return success_holds(super().check(metrics, trend), trend, self.params)


@dataclass
class FormatParams(DropParams):
    fraction: float = param(
        0.25,
        "breach when the smoothed format-valid rate is below this fraction of its peak: most replies "
        "out of format (healthy runs dip to a third for a step or two)",
        min=0.0,
        max=1.0,
    )
    min_peak: float = param(
        0.5,
        "judge once the rate reached this: a model that never answered in format has none to lose",
        min=0.0,
    )
    min_steps: int = param(2, "evaluations seen before judging: a run can break at its second step", min=1)
    pending: int = param(2, "consecutive breached evaluations before the alert fires", min=1)


class FormatBreak(DropFromPeak):
    """Replies leave the answer format: the environment reads most of them as invalid actions.

    The run then earns the format penalty instead of rewards.

    Not held for success (learning never breaks the format) and judged from the second step, so a run
    that breaks at once, before it has a start or a peak for the success rules to measure, is flagged
    within a few steps of the break.
    """

    name = "format_break"
    title = "Replies left the answer format"
    remedy = (
        "Read the latest trajectories for the template the replies fell into; a stronger (more "
        "negative) rollout.format_penalty makes a broken format cost more, a lower optim.actor_lr "
        "slows the drift."
    )
    metric = TRAIN_FORMAT_VALID
    Params = FormatParams
    params: FormatParams


@dataclass
class CollapseParams(DropParams):
    fraction: float = param(
        0.6,
        "collapse when smoothed success is below this fraction of its peak (0.6 = fallen by 40%)",
        min=0.0,
        max=1.0,
    )
    min_peak: float = param(0.1, "a peak below this is noise, not learning worth losing", min=0.0)
    peak_sigmas: float = param(
        3.0,
        "... and so is a peak whose best mean of 5 or 10 values in a row is less "
        "than this many standard errors above the mean of the run's first 5 "
        "values beyond what the best of the run's windows reaches by chance "
        "(a run that never learned has no peak, however long it runs), and a "
        "fall whose last values are not this many standard errors, beyond "
        "chance, below that best mean; unless its last 5 values fell under half "
        "a start of at least 0.2, this many standard errors below it (or it "
        "flatlined at its lowest); 0 = any peak and any fall",
        min=0.0,
    )
    pending: int = param(5, "evaluations success must stay down before calling it a collapse", min=1)


class Collapse(DropFromPeak):
    """The outcome that confirms the Echo Trap: success fell from a real peak, or far below where the run
    started, and stayed down.

    The metric is the SuccessTrend's: the first of OUTCOME_KEYS the run logs. The peak is real when it
    stands `peak_sigmas` noise SDs above the run's start (see SuccessTrend).
    """

    name = "collapse"
    level = "collapse"
    title = "Success collapsed"
    remedy = (
        "Training on rarely brings a collapsed run back: stop it and re-run it with a lower "
        f"optim.actor_lr, or with {STARPO_S_FIXES}."
    )
    Params = CollapseParams
    params: CollapseParams

    def __init__(self, params: CollapseParams) -> None:
        super().__init__(params)
        self.fall_confirmed = False  # the current breach passed the fall test once

    def headline(self) -> str:
        return f"{OUTCOME_NAMES.get(self.metric, self.metric or 'Success')} collapsed"

    def value(self, metrics: Metrics, trend: SuccessTrend) -> float | None:
        self.metric = trend.metric
        return finite(metrics.get(self.metric)) if self.metric else None

    def origin(self, trend: SuccessTrend) -> float:
        return trend.origin if trend.known else 0.0

    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        found = super().check(metrics, trend)
        if found is None or self.params.peak_sigmas == 0:
            return found
        if not trend.known:
            return None
        # Real then and real in the light of the noise seen since: a collapse event is never a guess.
        rise = min(trend.rise(), trend.rise_now())
        found.signals.update(start=trend.baseline, noise=trend.noise, rise_sigmas=rise)
        if rise >= self.params.peak_sigmas:
            fall = trend.fall()
            found.signals["fall_sigmas"] = fall
            # The fall test gates the way in only: its allowance for chance grows with the run, so a run
            # that stays collapsed for thousands of steps would slowly "resolve" and collapse again.
            self.fall_confirmed = found.breached and (self.fall_confirmed or fall >= self.params.peak_sigmas)
            if not found.breached or self.fall_confirmed:
                return found
            summary = (
                f"{found.summary}, but its last values (mean {trend.recent_mean():.4g}) are within the noise "
                f"of its best level (a mean of {trend.PEAK_WINDOWS[-1]} in a row: {trend.best_level:.4g})"
            )
            return found._replace(breached=False, summary=summary)
        # No real peak to have fallen from: said against the start, or the values before the fall.
        metric, smoothed = found.signals["metric"], found.signals["value"]
        if trend.lost_start(self.params.peak_sigmas):
            summary = (
                f"{metric} fell far below where the run started: its last values average "
                f"{trend.recent_mean():.4g}, {trend.below_start():.1f} standard errors below its start "
                f"{trend.baseline:.4g} (smoothed, {smoothed:.4g}; it never rose clearly above that start)"
            )
        elif trend.flatlined():
            found.signals["before_mean"] = trend.earlier_mean()
            summary = (
                f"{metric} has been {trend.low:.4g} for the last {trend.at_low_in_a_row} values; the values "
                f"before them averaged {trend.earlier_mean():.4g} (smoothed, {smoothed:.4g})"
            )
        else:
            summary = (
                f"{found.summary}, but that peak is only {rise:.1f} noise SDs above the start "
                f"{trend.baseline:.4g}: not a real peak"
            )
            return found._replace(breached=False, summary=summary)
        # nor among the signals an email lists
        signals = {name: value for name, value in found.signals.items() if name not in ("peak", "ratio")}
        return found._replace(summary=summary, signals=signals)


# --- rising above a floor: zero-std groups --------------------------------------------------------


@dataclass
class ZeroStdParams(GuardedParams):
    success_sigmas: float = param(
        0.0,
        "hold the alert until success falls (see reward_std_drop); 0, the "
        "default, = do not wait: most groups agreeing is more than learning "
        "explains, and waiting (3.5) leaves 7 of 15 synthetic collapses caught",
        min=0.0,
    )
    threshold: float = param(0.5, "breach only when the smoothed fraction is at least this", min=0.0, max=1.0)
    min_rise: float = param(
        0.25, "... and at least this much above its lowest smoothed value", min=0.0, max=1.0
    )
    solved_success: float = param(0.8, "no breach while train/success is at least this", min=0.0, max=1.0)


class ZeroStdGroups(Rule):
    """More and more groups give no learning signal.

    The baseline is the lowest fraction so far, not the first: before learning starts nearly every
    group fails together, so early fractions are high in healthy runs.
    """

    name = "zero_std_groups"
    title = "Zero-std groups rose"
    remedy = (
        f"Groups whose replies all score the same give no learning signal: try {STARPO_S_FIXES}, or more "
        "replies per prompt (rollout.group_size)."
    )
    metric = TRAIN_FRAC_ZERO_STD_GROUPS
    Params = ZeroStdParams
    params: ZeroStdParams

    def __init__(self, params: ZeroStdParams) -> None:
        super().__init__(params)
        self.floor = math.inf

    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        x = finite(metrics.get(self.metric))
        if x is None:
            return None
        smoothed = self.ema.update(x)
        self.floor = min(self.floor, smoothed)
        p = self.params
        solved = metrics.get(TRAIN_SUCCESS, 0.0) >= p.solved_success
        breached = smoothed >= p.threshold and smoothed - self.floor >= p.min_rise and not solved
        signals = {"metric": self.metric, "value": smoothed, "floor": self.floor}
        summary = (
            f"{smoothed:.0%} of groups have zero reward std, averaged over recent steps (lowest so far "
            f"{self.floor:.0%})"
        )
        return success_holds(Check(breached, signals, summary), trend, p)


# --- entropy: erratic changes, or a rise after the decline ----------------------------------------


@dataclass
class EntropyErraticParams(RuleParams):
    smoothing: float = param(
        0.0, "EMA weight of the past; off by default, smoothing hides erratic jumps", min=0.0, max=0.99
    )
    pending: int = param(2, "consecutive breached evaluations before the alert fires", min=1)
    window: int = param(30, "step-to-step changes in the rolling window (W&B's default)", min=5)
    threshold: float = param(4.0, "breach when |z| of the latest change exceeds this", min=0.0)
    min_spread: float = param(
        0.01,
        "the changes' spread counts as at least this fraction of the entropy: a smooth series (a steady "
        "decline levelling off) has no noise to measure a jump against",
        min=0.0,
    )


class EntropyErratic(Rule):
    """Entropy normally declines smoothly; jumps far outside its recent changes go with collapse."""

    name = "entropy_erratic"
    title = "Entropy turned erratic"
    remedy = (
        "Erratic entropy goes with collapse in RAGEN's runs: try a lower optim.actor_lr, or "
        f"{STARPO_S_FIXES}."
    )
    metric = ACTOR_ENTROPY
    Params = EntropyErraticParams
    params: EntropyErraticParams

    def __init__(self, params: EntropyErraticParams) -> None:
        super().__init__(params)
        self.previous: float | None = None
        self.changes: deque[float] = deque(maxlen=params.window)

    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        x = finite(metrics.get(self.metric))
        if x is None:
            return None
        smoothed = self.ema.update(x)
        previous, self.previous = self.previous, smoothed
        if previous is None:
            return None
        change = smoothed - previous
        window = self.changes
        found = None
        if len(window) == window.maxlen:
            mean = math.fsum(window) / len(window)  # statistics.fmean's arithmetic, without its checks
            # in floats: statistics.pstdev works in exact fractions, 3/4 of a long replay's time
            spread = math.sqrt(math.fsum([(c - mean) ** 2 for c in window]) / len(window))
            spread = max(spread, self.params.min_spread * abs(smoothed))
            z = (change - mean) / spread if spread > 0 else 0.0
            signals = {"metric": self.metric, "value": smoothed, "change": change, "z": z}
            summary = (
                f"entropy changed by {change:+.3g} in a step, against {mean:+.3g} ± {spread:.2g} over the "
                f"last {len(window)} changes (z = {z:+.1f})"
            )
            found = Check(abs(z) > self.params.threshold, signals, summary)
        window.append(change)
        return found


@dataclass
class EntropyRiseParams(GuardedParams):
    rise: float = param(
        0.25, "breach when smoothed entropy is this fraction above its lowest since the peak", min=0.0
    )
    min_decline: float = param(
        0.1, "... and it had first declined by this fraction of the peak", min=0.0, max=1.0
    )


class EntropyRise(Rule):
    """A steady entropy decline is learning; entropy climbing back after it goes with collapse. Once it has
    declined, a new high is that climb, not a new start: the alert resolves when entropy falls back."""

    name = "entropy_rise"
    title = "Entropy rose after declining"
    remedy = (
        "A rise after the decline goes with collapse in RAGEN's runs: try a lower "
        f"optim.actor_lr, or {STARPO_S_FIXES}."
    )
    metric = ACTOR_ENTROPY
    Params = EntropyRiseParams
    params: EntropyRiseParams

    def __init__(self, params: EntropyRiseParams) -> None:
        super().__init__(params)
        self.peak = -math.inf
        self.trough = math.inf

    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        x = finite(metrics.get(self.metric))
        if x is None:
            return None
        smoothed = self.ema.update(x)
        p = self.params
        # A new high starts a new decline to watch, unless entropy has declined already: then it is the
        # climb back this rule is about (resetting there would resolve the alert at the climb's top).
        if smoothed > self.peak and not self.declined() >= p.min_decline:
            self.peak, self.trough = smoothed, smoothed
        self.trough = min(self.trough, smoothed)
        if self.peak <= 0 or self.trough <= 0:
            return None
        declined = self.declined()
        rise = smoothed / self.trough - 1
        signals = {"metric": self.metric, "value": smoothed, "peak": self.peak, "trough": self.trough}
        summary = (
            f"smoothed entropy {smoothed:.4g} is {rise:+.0%} from its low {self.trough:.4g} "
            f"(which was {declined:.0%} below the peak {self.peak:.4g})"
        )
        return success_holds(Check(declined >= p.min_decline and rise >= p.rise, signals, summary), trend, p)

    def declined(self) -> float:
        """How far the low fell below the peak, as a share of the peak (0 before both are positive)."""
        return (self.peak - self.trough) / self.peak if self.peak > 0 and self.trough > 0 else 0.0


# --- gradient-norm spikes -----------------------------------------------------------------------------


@dataclass
class GradSpikeParams(RuleParams):
    smoothing: float = param(
        0.0, "EMA weight of the past; off by default, smoothing hides spikes", min=0.0, max=0.99
    )
    pending: int = param(1, "a spike is one step: fire on the first", min=1)
    window: int = param(
        20, "values in the running median: the last finite, positive values that were not spikes", min=3
    )
    tolerance: float = param(
        4.0, "breach when the value exceeds (1 + tolerance) x the running median", min=0.0
    )
    min_steps: int = param(5, "values in the median before judging", min=1)


class GradSpike(Rule):
    """A gradient-norm spike (NaN/inf is one): worth a marker on the chart, not an alarm by itself.

    Healthy runs have isolated spikes that recover within a step or two; `grad_unstable` warns when
    the norm stays up. The median, unlike Lightning's running mean, is not dragged up by the spike it
    should flag.
    """

    name = "grad_spike"
    level = "info"
    title = "Gradient norm spiked"
    metric = ACTOR_GRAD_NORM
    quantity = "gradient norm"  # what the summary calls the value
    Params = GradSpikeParams
    params: GradSpikeParams

    HELD_OUT_WINDOWS = 5

    def __init__(self, params: GradSpikeParams) -> None:
        super().__init__(params)
        self.held_out = 0  # breached values in a row kept out of the median
        self.recent: deque[float] = deque()
        self.ordered: list[float] = []  # the same values, sorted, for the median

    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        x = self.value(metrics)
        if x is None:
            return None
        if not math.isfinite(x):
            return Check(True, {"metric": self.metric, "value": str(x)}, f"{self.quantity} is {x}")
        value = self.ema.update(x)
        found = None
        if len(self.ordered) >= self.params.min_steps:
            median = self.median()
            limit = (1 + self.params.tolerance) * median
            signals = {"metric": self.metric, "value": value, "median": median, "limit": limit}
            summary = f"{self.quantity} {value:.4g} vs running median {median:.4g}"
            found = Check(self.breached(value, limit), signals, summary)
        # The median is the norm before the spike: a breached value stays out of it, so the alert
        # resolves when the norm comes back, not when the median has climbed to meet it; a zero
        # (no update: every group's rewards equal, no KL) is no level to compare against. A level held
        # for HELD_OUT_WINDOWS windows in a row becomes the new normal (or the median would never move).
        breached = found is not None and found.breached
        if breached and self.held_out < self.HELD_OUT_WINDOWS * self.params.window:
            self.held_out += 1
        elif value > 0:
            self.remember(value)
            if not breached:
                self.held_out = 0
        return found

    def value(self, metrics: Metrics) -> float | None:
        return metrics.get(self.metric)

    def breached(self, value: float, limit: float) -> bool:
        return value > limit

    def median(self) -> float:
        values, n = self.ordered, len(self.ordered)
        return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2

    def remember(self, value: float) -> None:
        self.recent.append(value)
        bisect.insort(self.ordered, value)
        if len(self.recent) > self.params.window:
            del self.ordered[bisect.bisect_left(self.ordered, self.recent.popleft())]


@dataclass
class GradUnstableParams(GradSpikeParams):
    pending: int = param(
        3,
        "consecutive spiking evaluations before the alert fires: an isolated spike "
        "that recovers is only grad_spike's info marker",
        min=1,
    )


class GradUnstable(GradSpike):
    """The gradient norm stays far above its running median (or non-finite) step after step."""

    name = "grad_unstable"
    level = "warning"
    title = "Gradient norm stayed high"
    remedy = (
        "Sustained large gradients come before irreversible collapse in RAGEN's runs: try a "
        f"lower optim.actor_lr or optim.grad_clip, or {STARPO_S_FIXES}."
    )
    Params = GradUnstableParams


@dataclass
class PolicyShiftParams(GradSpikeParams):
    tolerance: float = param(
        29.0, "breach when the absolute approx KL exceeds (1 + tolerance) x its running median", min=0.0
    )
    min_value: float = param(
        0.01,
        "... and is at least this (nats per token): PPO implementations stop an epoch near 0.01-0.02",
        min=0.0,
    )


class PolicyShift(GradSpike):
    """One update moved the policy far more than the updates before it: |approx KL| between the rollout
    policy and the updated one, against its running median. A marker, not an alarm: such a lurch often
    comes and goes with a dip of success, and once (real/bandit-starpo-cpu10-s2) it was the only sign,
    one step before every reply turned to the wrong answer."""

    name = "policy_shift"
    title = "One update moved the policy far"
    metric = ACTOR_APPROX_KL
    quantity = "|approx KL|"
    Params = PolicyShiftParams
    params: PolicyShiftParams

    def value(self, metrics: Metrics) -> float | None:
        # NaN/inf is no data here: it comes with non-finite log-probs, which grad_spike already marks.
        x = finite(metrics.get(self.metric))
        return None if x is None else abs(x)  # the estimator's sign is noise around a small drift

    def breached(self, value: float, limit: float) -> bool:
        return value > limit and value >= self.params.min_value


# --- template collapse (RAGEN-2): reasoning no longer depends on the input ---------------------------


@dataclass
class TemplateParams(GuardedParams):
    pending: int = param(
        2,
        "consecutive breached measurements (one every diagnostics.collapse_every steps) "
        "before the alert fires",
        min=1,
    )
    fraction: float = param(
        0.5, "breach when the smoothed MI estimate is below this fraction of its peak", min=0.0, max=1.0
    )
    min_peak: float = param(0.05, "ignore the rule until the MI peak reaches this (nats)", min=0.0)
    min_steps: int = param(3, "measurements seen before judging", min=1)
    max_above_chance: float = param(
        0.1,
        "... and retrieval accuracy is at most this above its chance line (when logged)",
        min=0.0,
        max=1.0,
    )
    entropy_fraction: float = param(
        0.5,
        "... and smoothed entropy is still at least this fraction of its "
        "peak (when logged): diverse replies that ignore the input, not "
        "an entropy collapse",
        min=0.0,
        max=1.0,
    )


class TemplateCollapse(Rule):
    """Reasoning stops depending on the input: the MI estimate falls from its peak and prompts can no
    longer be told apart from the reasoning, while entropy stays up (RAGEN-2's template collapse).

    Reads `collapse/mi_estimate` (required: without it, e.g. an imported TRL run, the rule has no data
    and never fires), `collapse/retrieval_above_chance` and `actor/entropy` when logged.
    """

    name = "template_collapse"
    title = "Template collapse"
    remedy = (
        "The reasoning reads the same whatever the prompt (RAGEN-2): compare trajectories of "
        "different prompts; RAGEN-2 trains on the groups with the most reward spread "
        "(algorithm.filter: top_p with algorithm.filter_top_p: 0.9)."
    )
    metric = COLLAPSE_MI_ESTIMATE
    Params = TemplateParams
    params: TemplateParams

    def __init__(self, params: TemplateParams) -> None:
        super().__init__(params)
        self.entropy = Ema(params.smoothing)
        self.entropy_peak = -math.inf
        self.peak = -math.inf
        self.seen = 0

    def check(self, metrics: Metrics, trend: SuccessTrend) -> Check | None:
        entropy = finite(metrics.get(ACTOR_ENTROPY))
        if entropy is not None:
            self.entropy_peak = max(self.entropy_peak, self.entropy.update(entropy))
        mi = finite(metrics.get(self.metric))
        if mi is None:
            return None
        smoothed = self.ema.update(mi)
        self.peak = max(self.peak, smoothed)
        self.seen += 1
        p = self.params
        if self.seen < p.min_steps or self.peak < p.min_peak:
            return None
        above = finite(metrics.get(COLLAPSE_RETRIEVAL_ABOVE_CHANCE))
        entropy = self.entropy.value
        entropy_up = entropy is None or entropy >= p.entropy_fraction * self.entropy_peak
        breached = (
            smoothed < p.fraction * self.peak
            and (above is None or above <= p.max_above_chance)
            and entropy_up
        )
        signals = {
            "metric": self.metric,
            "value": smoothed,
            "peak": self.peak,
            "retrieval_above_chance": above,
            "entropy": entropy,
        }
        summary = (
            f"smoothed MI estimate {smoothed:.3g} nats is {smoothed / self.peak:.0%} of its peak "
            f"{self.peak:.3g}" + ("" if above is None else f", retrieval {above:+.0%} above chance")
        )
        return success_holds(Check(breached, signals, summary), trend, p)


RULES: dict[str, type[Rule]] = {
    rule.name: rule
    for rule in (
        RewardStdDrop,
        ZeroStdGroups,
        EntropyErratic,
        EntropyRise,
        ThinkingDecay,
        FormatBreak,
        GradSpike,
        GradUnstable,
        PolicyShift,
        TemplateCollapse,
        Collapse,
    )
}
