"""Each rule on hand-made series: fires, stays quiet, waits for its pending period, fires once, resolves."""

import math
from pathlib import Path

import pytest

from diagnostics import Detector, load_series
from diagnostics.rules import RULES

RAW = {"smoothing": 0.0}  # exact numbers in, so each test can say at which step a rule must fire


def only(rule, **params):
    """A detector running just `rule`, with `params` overriding its defaults."""
    overrides = {name: {"enabled": False} for name in RULES if name != rule}
    overrides[rule] = params
    return Detector(overrides)


def feed(detector, key, values, start=0):
    events = []
    for step, value in enumerate(values, start=start):
        events += detector.update(step, {} if value is None else {key: value})
    return events


def levels(events):
    return [(e["step"], e["level"]) for e in events]


STD = "train/reward_std_in_group"


def test_reward_std_drop_fires_once_after_pending_and_resolves():
    det = only("reward_std_drop", pending=3, recovery=4, min_steps=2, **RAW)
    values = [0.4] * 5 + [0.1] * 10 + [0.4] * 6  # breach from step 5, clear again from step 15
    events = feed(det, STD, values)
    assert levels(events) == [(7, "warning"), (18, "resolved")]
    warning = events[0]
    assert warning["rule"] == "reward_std_drop"
    assert warning["signals"]["peak"] == pytest.approx(0.4)
    assert warning["signals"]["since_step"] == 5
    assert "25% of its peak" in warning["message"]


def test_reward_std_drop_does_not_fire_while_steady_or_for_a_short_dip():
    det = only("reward_std_drop", pending=3, min_steps=2, **RAW)
    values = [0.4, 0.42, 0.38] * 5 + [0.1, 0.1, 0.4] * 5  # dips of 2 < pending 3
    assert feed(det, STD, values) == []


def test_reward_std_drop_is_quiet_while_the_task_is_solved():
    det = only("reward_std_drop", pending=1, min_steps=2, **RAW)
    events = []
    for step, std in enumerate([0.4] * 5 + [0.05] * 5):
        events += det.update(step, {STD: std, "train/success": 0.95})
    assert events == []


def test_missing_metric_is_no_data_not_a_breach_nor_a_break_in_the_streak():
    det = only("reward_std_drop", pending=3, min_steps=2, **RAW)
    values = [0.4] * 5 + [0.1, None, None, 0.1, None, 0.1]
    assert levels(feed(det, STD, values)) == [(10, "warning")]


def test_smoothing_delays_a_drop():
    raw = feed(only("reward_std_drop", pending=1, min_steps=2, smoothing=0.0), STD, [0.4] * 5 + [0.1] * 10)
    smooth = feed(only("reward_std_drop", pending=1, min_steps=2, smoothing=0.8), STD, [0.4] * 5 + [0.1] * 10)
    assert raw[0]["step"] == 5
    assert smooth[0]["step"] > 5


def test_zero_std_groups_ignores_a_high_start_and_fires_on_a_rise():
    det = only("zero_std_groups", pending=2, threshold=0.5, min_rise=0.25, **RAW)
    # Before learning most groups fail together (high); learning brings it down; the echo brings it up.
    values = [0.9] * 5 + [0.2] * 10 + [0.7] * 5
    assert levels(feed(det, "train/frac_zero_std_groups", values)) == [(16, "warning")]


def test_zero_std_groups_needs_both_the_threshold_and_the_rise():
    det = only("zero_std_groups", pending=1, threshold=0.5, min_rise=0.25, **RAW)
    assert feed(det, "train/frac_zero_std_groups", [0.1] * 5 + [0.45] * 5) == []  # rose, under threshold
    det = only("zero_std_groups", pending=1, threshold=0.5, min_rise=0.25, **RAW)
    assert feed(det, "train/frac_zero_std_groups", [0.4] * 5 + [0.6] * 5) == []  # over, rose too little


def steady_decline(n, start=1.2, rate=0.002, wobble=0.001):
    return [start - rate * i + wobble * ((-1) ** i) for i in range(n)]


def test_entropy_erratic_fires_on_jumps_not_on_a_steady_decline():
    values = steady_decline(60)
    assert feed(only("entropy_erratic", pending=2, window=30, threshold=4.0), "actor/entropy", values) == []
    jumpy = values[:40] + [values[40] + 0.3, values[41] - 0.3, values[42] + 0.3]
    events = feed(only("entropy_erratic", pending=2, window=30, threshold=4.0), "actor/entropy", jumpy)
    assert levels(events) == [(41, "warning")]
    assert abs(events[0]["signals"]["z"]) > 4.0


def test_entropy_erratic_takes_a_smooth_decline_levelling_off_for_no_jump():
    """A tester's stream: entropy from 1.2 down to 0.6 by step 40 in equal steps, then flat. The changes
    had no spread, so the first change of 0 was 'z = +5.4' and an email; the spread now counts as at least
    1% of the entropy, and a real jump still stands out."""
    values = [1.2 - 0.015 * i for i in range(41)] + [0.6] * 30
    assert feed(only("entropy_erratic"), "actor/entropy", values) == []
    jumpy = values[:45] + [0.9, 0.6, 0.9]
    events = feed(only("entropy_erratic"), "actor/entropy", jumpy)
    assert levels(events) == [(46, "warning")]
    assert events[0]["message"].startswith(
        "Entropy turned erratic: entropy changed by -0.3 in a step, against "
    )


def test_entropy_rise_needs_a_decline_first():
    det = only("entropy_rise", pending=2, rise=0.25, min_decline=0.1, **RAW)
    assert feed(det, "actor/entropy", [1.0] * 5 + [1.3] * 5) == []  # a rise from the start is not it
    det = only("entropy_rise", pending=2, rise=0.25, min_decline=0.1, **RAW)
    values = [1.0, 0.9, 0.8, 0.7, 0.6, 0.6, 0.8, 0.8, 0.8]
    assert levels(feed(det, "actor/entropy", values)) == [(7, "warning")]


def test_entropy_climbing_past_its_old_peak_keeps_the_alert_and_falling_back_resolves_it():
    det = only("entropy_rise", pending=2, recovery=2, rise=0.25, min_decline=0.1, **RAW)
    values = [1.0, 0.9, 0.8, 0.7, 0.6, 0.6, 0.8, 0.8, 1.5, 1.6, 1.6, 0.6, 0.6, 0.6]
    # It used to resolve at the top of the climb (steps 9-10, a "new peak"), quoting "+0% from its low".
    assert levels(feed(det, "actor/entropy", values)) == [(7, "warning"), (12, "resolved")]


def test_entropy_rise_quiet_on_steady_decline():
    det = only("entropy_rise", pending=1, **RAW)
    assert feed(det, "actor/entropy", steady_decline(200, rate=0.004)) == []


def test_thinking_decay_fires_below_fraction_of_peak_not_on_slow_shrink():
    key = "response/think_tokens_mean"
    slow = [140 * (1 - 0.002 * i) for i in range(200)]  # healthy: 60% of the peak after 200 steps
    assert feed(only("thinking_decay", pending=3), key, slow) == []
    fast = [140.0] * 20 + [140 * 0.9**i for i in range(1, 30)]
    events = feed(only("thinking_decay", pending=3, **RAW), key, fast)
    first_below = 20 + next(i for i in range(1, 30) if 0.9**i < 0.4) - 1
    assert levels(events) == [(first_below + 2, "warning")]


GRAD = "actor/grad_norm"


@pytest.mark.parametrize("spike", [50.0, math.nan, math.inf])
def test_grad_spike_marks_a_spike_nan_and_inf_at_info_level(spike):
    det = only("grad_spike", tolerance=4.0, min_steps=5, recovery=3)
    events = feed(det, GRAD, [1.0, 1.2, 0.9, 1.1, 1.0, 1.05, spike, 1.0, 1.1, 0.9])
    assert levels(events) == [(6, "info"), (9, "resolved")]


def test_values_too_large_to_square_are_judged_as_the_infinity_they_approach():
    """Sums and squares of 1e155 or 1.7e308 overflow, and Python raises for them: an import of such a file
    was a 500 and a run's detection failed on every try. Now no data for most rules, a spike for grad_spike."""
    huge = [1.0] * 12 + [1e155, 1.7e308, -1e308, 1e308] * 5
    for key in ("actor/entropy", "train/reward_mean", "train/success", "train/reward_std_in_group"):
        feed(Detector(), key, huge)  # raised OverflowError or ValueError ("-inf + inf in fsum")
    spikes = feed(only("grad_spike", min_steps=5), GRAD, [1.0, 1.1, 0.9, 1.0, 1.05, 1e200])
    assert [(e["step"], e["level"]) for e in spikes] == [(5, "info")]
    assert "gradient norm is inf" in spikes[0]["message"]


def test_grad_spike_tolerance_is_relative_to_the_running_median():
    values = [1.0, 1.2, 0.9, 1.1, 1.0, 1.05, 4.5]  # 4.5x the median of ~1.0
    assert feed(only("grad_spike", tolerance=4.0), GRAD, values) == []
    assert levels(feed(only("grad_spike", tolerance=3.0), GRAD, values)) == [(6, "info")]


def test_grad_unstable_stays_up_while_the_norm_does_and_resolves_when_it_comes_back():
    # The median is the norm before the spike: 20 steps at 10x (under 5 windows) are no new normal.
    det = only("grad_unstable", window=5, recovery=2)
    events = feed(det, GRAD, [1.0] * 10 + [10.0] * 20 + [1.0] * 3)
    assert levels(events) == [(12, "warning"), (31, "resolved")]  # back at 30, +2 clear
    assert "running median 1" in events[1]["message"]


def test_grad_spike_median_window_is_bounded():
    # Old values leave the median: a norm that drifts down to a tenth is judged against the new level.
    det = only("grad_spike", tolerance=4.0, window=5)
    events = feed(det, GRAD, [10.0] * 10 + [1.0] * 10 + [6.0])
    assert levels(events) == [(20, "info")]


def test_a_zero_gradient_norm_is_no_baseline():
    # Every group's rewards equal and no KL: the update is zero, and the first real one is no spike.
    events = feed(Detector(), GRAD, [0.0] * 10 + [0.5, 0.55, 0.6] * 10)
    assert [e for e in events if e["rule"].startswith("grad")] == []


def test_an_isolated_grad_spike_that_recovers_is_info_and_never_a_warning():
    values = [1.0, 1.2, 0.9, 1.1, 1.0, 1.05] * 3 + [60.0] + [1.0, 1.1, 0.9] * 5
    events = feed(Detector(), GRAD, values)
    assert [(e["step"], e["level"], e["rule"]) for e in events if e["level"] != "resolved"] == [
        (18, "info", "grad_spike")
    ]


def test_grad_unstable_warns_when_the_norm_stays_up():
    values = [1.0, 1.2, 0.9, 1.1, 1.0, 1.05] * 3 + [60.0, 80.0, math.nan, 70.0]
    events = feed(only("grad_unstable"), GRAD, values)
    assert [(e["step"], e["level"], e["rule"]) for e in events] == [(20, "warning", "grad_unstable")]


def test_collapse_fires_after_staying_down_for_k_steps_at_collapse_level():
    det = only("collapse", pending=5, fraction=0.6, min_steps=3, **RAW)
    values = [0.1] * 5 + [0.3, 0.5] + [0.6] * 10 + [0.2] * 12  # down from step 17
    events = feed(det, "train/success", values)
    assert levels(events) == [(22, "collapse")]
    assert events[0]["signals"]["metric"] == "train/success"


def test_collapse_ignores_noise_before_a_meaningful_peak():
    det = only("collapse", pending=2, min_peak=0.1, **RAW)
    values = [0.05, 0.0, 0.08, 0.0] * 10  # never learned: a drop from 0.08 is noise
    assert feed(det, "train/success", values) == []


def test_collapse_ignores_an_early_peak_before_min_steps():
    det = only("collapse", pending=2, min_steps=5, **RAW)
    assert feed(det, "train/success", [0.1] * 5 + [0.9] * 10 + [0.2] * 8) != []
    det = only("collapse", pending=2, min_steps=8, **RAW)
    assert feed(det, "train/success", [0.1] * 5 + [0.9, 0.2]) == []


def test_collapse_of_a_run_that_starts_high_is_a_loss_of_its_start_not_of_a_peak():
    # Success that starts high (a warm start) and falls never rose above its own start, but lost it.
    det = only("collapse", pending=2, min_steps=5, **RAW)
    events = feed(det, "train/success", [0.9, 0.85, 0.9, 0.88, 0.9] + [0.2] * 10)
    # The last five values average under half the start from step 8; pending 2 makes it step 9.
    assert levels(events)[:1] == [(9, "collapse")]
    assert (
        "train/success fell far below where the run started: its last values average 0.2, "
        in (events[0]["message"])
    )
    assert "below its start 0.886 (smoothed, " in events[0]["message"]
    assert "of its peak" not in events[0]["message"]  # a peak within the noise is not what it fell from
    assert "peak" not in events[0]["signals"] and "ratio" not in events[0]["signals"]
    # A small drift below a high start is not a loss: within the run's own noise.
    det = only("collapse", pending=2, min_steps=5, **RAW)
    assert feed(det, "train/success", [0.9, 0.7, 0.9, 0.75, 0.9, 0.8] * 3 + [0.75] * 10) == []


@pytest.mark.parametrize("key", ["val/success", "train/reward_mean", "critic/score/mean"])
def test_collapse_falls_back_when_success_is_not_logged(key):
    det = only("collapse", pending=2, min_steps=3, **RAW)
    events = feed(det, key, [0.2] * 5 + [0.5] + [0.8] * 8 + [0.3] * 8)
    assert levels(events) == [(17, "collapse")]
    assert events[0]["signals"]["metric"] in ("val/success", "train/reward_mean")


def test_collapse_keeps_the_first_success_key_it_saw():
    det = only("collapse", pending=1, min_steps=2, **RAW)
    events = []
    for step in range(6):
        metrics = {"val/success": 0.8}
        if step >= 3:
            metrics["train/success"] = 0.1  # appears later, on another scale: must not be compared
        events += det.update(step, metrics)
    assert events == []


def test_disabled_rule_never_fires():
    det = Detector({"grad_spike": {"enabled": False}})
    assert feed(det, GRAD, [1.0] * 10 + [math.nan]) == []


def test_steps_must_increase():
    det = Detector()
    det.update(3, {})
    with pytest.raises(ValueError, match="step 3 is not after the previous step 3"):
        det.update(3, {})
    with pytest.raises(ValueError, match="step: '4' is not an integer"):
        det.update("4", {})


def test_replay_rebuilds_the_state_of_a_restarted_worker():
    history = [
        (
            s,
            {
                "train/success": min(0.05 * s, 0.6) if s < 60 else 0.1,
                STD: 0.4 if s < 40 else 0.05,
                GRAD: 1.0 if s != 70 else math.nan,
            },
        )
        for s in range(100)
    ]
    live = Detector()
    before = [e for step, m in history[:50] for e in live.update(step, m)]
    restarted, replayed = Detector.replay(history[:50])
    assert replayed == before
    after_live = [e for step, m in history[50:] for e in live.update(step, m)]
    after_restart = [e for step, m in history[50:] for e in restarted.update(step, m)]
    assert after_restart == after_live
    assert {e["level"] for e in after_live} >= {"collapse", "warning"}


def test_a_collapse_is_named_for_the_outcome_the_run_logs():
    """A run without success is judged on its mean reward: the event says so, never "Success collapsed"."""
    path = Path(__file__).resolve().parent.parent / "data" / "detector" / "frozenlake-ppo-s0.csv"
    series = load_series(str(path))
    for key, headline in (
        ("train/reward_mean", "Mean reward collapsed"),
        ("val/success", "Validation success collapsed"),
    ):
        only = [(step, {key: values[key]}) for step, values in series if key in values]
        collapses = [e for e in Detector.replay(only)[1] if e["rule"] == "collapse"]
        assert collapses, key
        assert all(
            e["message"].startswith(f"{headline}: smoothed {key} ")
            for e in collapses
            if e["level"] == "collapse"
        )
    full = [e for e in Detector.replay(series)[1] if e["rule"] == "collapse"]
    assert full and full[0]["message"].startswith("Success collapsed: smoothed train/success ")


KL = "actor/approx_kl"


def test_policy_shift_marks_one_far_update_of_either_sign_at_info_level():
    # |approx KL| around 0.001 a step (its sign is estimator noise), then one update 100 times larger.
    quiet = [0.001, -0.0012, 0.0009, -0.001, 0.0011, 0.001] * 2
    events = feed(only("policy_shift", recovery=3), KL, [*quiet, -0.1, 0.001, -0.001, 0.0012])
    assert levels(events) == [(12, "info"), (15, "resolved")]
    assert "|approx KL| 0.1 vs running median 0.001" in events[0]["message"]


def test_policy_shift_ignores_large_ratios_of_tiny_drifts():
    # 50x a median of 1e-5 is still a drift of 5e-4 nats a token: below min_value, no marker.
    assert feed(only("policy_shift"), KL, [1e-5] * 10 + [5e-4]) == []
    assert levels(feed(only("policy_shift", min_value=1e-4), KL, [1e-5] * 10 + [5e-4])) == [(10, "info")]


def test_policy_shift_takes_a_non_finite_approx_kl_as_no_data():
    quiet = [0.001, -0.0012, 0.0009, -0.001, 0.0011, 0.001] * 2
    assert feed(only("policy_shift"), KL, [*quiet, math.nan, math.inf, 0.001]) == []


FORMAT = "train/format_valid"


def test_format_break_flags_a_run_whose_replies_leave_the_format_within_a_few_steps():
    # 0.94, then every reply out of format from step 2 (real/bandit-starpo-lr1e-3-cpu8-s4 breaks at step 1)
    events = feed(only("format_break"), FORMAT, [0.94, 0.9] + [0.0] * 10)
    assert levels(events) == [(5, "warning")]  # 3 steps after the break: smoothing 0.6, pending 2
    assert events[0]["rule"] == "format_break"
    assert "train/format_valid" in events[0]["message"] and "of its peak" in events[0]["message"]


@pytest.mark.parametrize(
    "values",
    [
        [0.95, 0.9, 0.5, 0.3, 0.9, 0.95] * 3,  # dips to a third for a step and comes back
        [0.1, 0.2, 0.0, 0.05] * 5,  # never answered in format: no format to lose (min_peak 0.5)
        [0.9] * 5 + [0.5] * 20,  # half the replies out of format for good: above a quarter of the peak
    ],
)
def test_format_break_is_quiet_for_dips_a_model_that_never_had_the_format_and_a_partial_loss(values):
    assert feed(only("format_break"), FORMAT, values) == []


def test_format_break_is_not_held_for_success():
    # learning never breaks the format: a run whose success holds still gets the warning
    det = only("format_break")
    events = []
    for step, valid in enumerate([0.95] * 3 + [0.0] * 6):
        events += det.update(step, {FORMAT: valid, "train/success": 0.9})
    assert levels(events)[:1] == [(6, "warning")]


@pytest.mark.parametrize("scale, shift", [(2.0, -3.0), (2.0, -1.0), (100.0, 0.0)])
def test_a_reward_only_run_is_judged_the_same_on_any_reward_scale(scale, shift):
    # TRL and GRPO setups log rewards of any range (format penalties make them negative): a run judged
    # on its mean reward must get the same events, at the same steps, whatever the origin and unit.
    path = Path(__file__).resolve().parent.parent / "data" / "detector" / "bandit-grpo-s0.jsonl"
    series = load_series(str(path))
    scaled = [
        (
            step,
            {
                key: value * scale + shift
                if key == "reward"
                else value * scale
                if key == "reward_std"
                else value
                for key, value in metrics.items()
            },
        )
        for step, metrics in series
    ]
    expected = [(e["step"], e["level"], e["rule"]) for e in Detector.replay(series)[1]]
    assert any(level == "collapse" for _, level, _ in expected)
    assert [(e["step"], e["level"], e["rule"]) for e in Detector.replay(scaled)[1]] == expected


def test_a_lasting_new_level_of_the_gradient_norm_becomes_the_normal_after_five_windows():
    # Tiny norms while most groups agree, then ten times more for good: a warning, which resolves once
    # the level has held for 5 windows (it stays out of the median until then), so later spikes are seen.
    det = only("grad_unstable", window=5, recovery=2)
    events = feed(det, GRAD, [0.01] * 10 + [0.1] * 60)
    assert [level for _, level in levels(events)] == ["warning", "resolved"]
    assert 10 + 25 <= events[1]["step"] <= 10 + 25 + 10
