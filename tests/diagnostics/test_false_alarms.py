"""The false alarms of issue 16, on hand-made series: a run that never learned is not "collapsed", and a
run whose success rises or holds does not warn on groups agreeing, thinking shrinking or entropy alone."""

import math
import random

import pytest

from diagnostics import Detector
from diagnostics.rules import SuccessTrend

SUCCESS, STD = "train/success", "train/reward_std_in_group"


def sampled(p, episodes, rng):
    """One step's success rate: `episodes` rollouts that each succeed with probability p."""
    return sum(rng.random() < p for _ in range(episodes)) / episodes


def alarms(events):
    return [(e["step"], e["level"], e["rule"]) for e in events if e["level"] in ("warning", "collapse")]


def replay(rows):
    return Detector.replay(list(enumerate(rows)))[1]


@pytest.mark.parametrize("seed", range(5))
def test_a_run_that_never_learned_is_never_collapsed(seed):
    # Success noisy around 0.07 (32 episodes a step): its running peak passes 0.1 and the value later sits
    # below 60% of it for 5 steps, which a peak-ratio rule calls a collapse. The peak is not real.
    rng = random.Random(seed)
    rows = [{SUCCESS: sampled(0.07, 32, rng)} for _ in range(150)]
    assert [e for e in alarms(replay(rows)) if e[1] == "collapse"] == []


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(
    "success, episodes, steps",
    [
        (lambda t: 0.07, 16, 200),  # never learns
        (lambda t: 0.1, 32, 1000),  # never learns, for longer
        (lambda t: min(0.3, 0.1 + 0.3 * t / 40), 16, 300),  # learns a little and holds a low plateau
        (lambda t: 0.1 + 0.75 / (1 + math.exp(-(t - 700) / 160)), 32, 2000),  # learns slowly, late
    ],
    ids=["flat-0.07", "flat-0.1-1000-steps", "plateau-0.3", "slow-learner-2000-steps"],
)
def test_no_collapse_on_noise_however_long_the_run(seed, success, episodes, steps):
    # A tester's shapes: the best of many noisy steps (or windows) grows with the run's length, so a
    # fixed number of SDs above the start made a "real peak" of noise in 8 of 20 flat 200-step runs
    # at 0.07 and 12 of 20 at 0.1 over 1000 steps, and every peak-ratio fall under it a collapse email.
    rng = random.Random(seed)
    rows = [{SUCCESS: sampled(success(t), episodes, rng)} for t in range(steps)]
    assert [e for e in alarms(replay(rows)) if e[1] == "collapse"] == []


@pytest.mark.parametrize("seed", range(5))
def test_a_run_that_loses_its_start_level_without_ever_rising_is_collapsed(seed):
    # Success 0.45 from the first step (an untrained model that already answers in format), no rise, then
    # every reply breaks: success 0 and every group's rewards equal. Nothing was learned, but what the run
    # could do at its start is lost: a collapse, and the held zero-std warning fires.
    rng = random.Random(seed)
    rows = [
        {SUCCESS: sampled(0.45, 32, rng), STD: 0.3, "train/frac_zero_std_groups": 0.0} for _ in range(8)
    ] + [{SUCCESS: 0.0, STD: 0.0, "train/frac_zero_std_groups": 1.0} for _ in range(20)]
    found = alarms(replay(rows))
    assert ("collapse", "collapse") in {(level, rule) for _, level, rule in found}
    assert any(rule == "zero_std_groups" for _, _, rule in found)
    assert min(step for step, _, _ in found) < 15


def test_a_run_that_breaks_inside_its_first_steps_is_collapsed():
    # real/bandit-grpo-kl0-lr2e-3-s2: 0.25, 0.41, then every reply out of format. The five-step start
    # averages in the zeros (0.13, under MIN_START) and no peak is real, yet the run is dead.
    rows = [{SUCCESS: 0.25}, {SUCCESS: 0.41}] + [{SUCCESS: 0.0} for _ in range(30)]
    found = alarms(replay(rows))
    collapse = [step for step, level, _ in found if level == "collapse"]
    assert collapse and collapse[0] < 20


def test_a_run_that_breaks_after_its_first_step_is_collapsed():
    # A native run in a browser test (StarPO, actor lr 3e-3, KL off): success 0.31 at step 0, then every
    # reply out of format and success 0 to the end of its 25 steps. One value is all it has before the break.
    rows = [{SUCCESS: 0.3125}] + [{SUCCESS: 0.0} for _ in range(24)]
    found = alarms(replay(rows))
    collapse = [step for step, level, _ in found if level == "collapse"]
    assert collapse and collapse[0] < 20


@pytest.mark.parametrize("seed", range(20))
def test_a_lucky_first_step_then_zeros_of_a_run_that_never_learned_is_not_flatlined(seed):
    # A run around 0.05 on 16 episodes (a zero in 44% of steps) whose first step read 0.25 by chance: its
    # ordinary stretches of zeros are not a flatline.
    rng = random.Random(seed)
    trend = SuccessTrend()
    trend.update({SUCCESS: 0.25})
    for _ in range(300):
        trend.update({SUCCESS: sampled(0.05, 16, rng)})
        assert not trend.flatlined()


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5])
@pytest.mark.parametrize("seed", range(5))
def test_runs_of_zeros_are_not_flatlined_when_zero_is_common(p, seed):
    # One episode a step: success is 0 or 1, and over 1,000 steps ten or more zeros in a row are ordinary
    # even at p 0.5 (0.5^10 x 1,000 ~ 1).
    rng = random.Random(seed)
    trend = SuccessTrend()
    for _ in range(1000):
        trend.update({SUCCESS: sampled(p, 1, rng)})
        assert not trend.flatlined()


@pytest.mark.parametrize("seed", range(5))
def test_a_never_learning_run_drifting_near_zero_has_not_lost_its_start(seed):
    # Noise around 0.07 that drifts to 0.02: a start below MIN_START has nothing to lose.
    rng = random.Random(seed)
    rows = [{SUCCESS: sampled(0.07 if step < 80 else 0.02, 32, rng)} for step in range(150)]
    assert alarms(replay(rows)) == []


@pytest.mark.parametrize("seed", range(5))
def test_rising_success_with_falling_reward_std_gives_no_warning(seed):
    # Learning: success climbs 0.3 -> 0.9, the groups agree more and more, the policy grows confident.
    rng = random.Random(seed)
    rows = []
    for step in range(120):
        p = 0.3 + 0.6 * min(step / 80, 1.0)
        rows.append(
            {
                SUCCESS: sampled(p, 32, rng),
                STD: 0.45 * (1 - min(step / 60, 0.9)),
                "response/think_tokens_mean": 60 * (1 - min(step / 50, 0.9)),
                "actor/entropy": 1.8 * (1 - min(step / 40, 0.8)) + rng.gauss(0, 0.05),
            }
        )
    assert alarms(replay(rows)) == []


def test_a_held_warning_fires_once_success_falls_from_a_real_peak_before_it_halves():
    # Reward std falls while success holds a plateau (held); then success falls: the warning comes as soon
    # as the fall is clear, before success halves, and before the collapse event.
    rng = random.Random(2)
    rows = []
    for step in range(100):
        p = 0.2 if step < 10 else 0.7 if step < 60 else max(0.7 - 0.05 * (step - 59), 0.05)
        rows.append({SUCCESS: sampled(p, 64, rng), STD: 0.45 if step < 30 else 0.05})
    found = alarms(replay(rows))
    std = [e for e in found if e[2] == "reward_std_drop"]
    collapse = [e for e in found if e[2] == "collapse"]
    half = next(step for step in range(60, 100) if 0.7 - 0.05 * (step - 59) < 0.35)
    assert std and 60 <= std[0][0] < half
    assert collapse and collapse[0][0] > std[0][0]
    # The message says the signal was down long before: a reader sees the lead the guard held back.
    [warning] = [e for e in replay(rows) if e["rule"] == "reward_std_drop" and e["level"] == "warning"][:1]
    since = warning["signals"]["since_step"]
    assert (
        since < 60
        and f"(breached since step {since}, held by the success guard until now)" in warning["message"]
    )


def test_a_noisy_plateau_rarely_warns_though_its_smoothed_value_dips_under_half_its_peak():
    # Success learned 0.1 -> 0.55 and holds it, on 16 episodes a step (noise ~0.12), while the groups
    # agree (reward std down: breached and held). The smoothed value's peak is the maximum of a noisy
    # series, and single bad steps take the smoothed value under half of it: that is noise, not a fall
    # (the guard that let it through warned on most such runs: bench/detector.py, simulated runs).
    # Seeds are not chosen: the share is.
    warned, dipped = 0, 0
    for seed in range(20):
        rng = random.Random(seed)
        rows = [
            {SUCCESS: sampled(0.1 if step < 10 else 0.55, 16, rng), STD: 0.45 if step < 30 else 0.1}
            for step in range(150)
        ]
        trend = SuccessTrend()
        for row in rows:
            trend.update(row)
            if trend.rise() >= 3 and trend.value is not None and trend.value < trend.peak / 2:
                dipped += 1
                break
        warned += bool(alarms(replay(rows)))
    assert dipped >= 15  # the case the test is about happens in most runs
    assert warned <= 2


def test_a_sudden_fall_releases_the_guard_at_once():
    # A 0.7 plateau on 64 episodes (noise ~0.06), then one step at 0.05: 10 noise SDs below the steps
    # before it. The five-step window test would need more steps; the one-step test sees it now.
    rng = random.Random(5)
    trend = SuccessTrend()
    for step in range(40):
        trend.update({SUCCESS: sampled(0.1 if step < 10 else 0.7, 64, rng)})
    assert trend.holding(3, 3.5) is True
    trend.update({SUCCESS: 0.05})
    assert trend.dip() > 3.5 and trend.holding(3, 3.5) is False


def test_a_dip_that_is_over_no_longer_releases_the_guard():
    # real/bandit-starpo-lr1e-3-cpu8-s3: a 0.9 plateau, three steps near 0.05, then 0.97 again. While the
    # dip lasts success is falling; once the last value is back, the RECENT mean and the smoothed value
    # still carry the dip for a few steps, but a warning then (entropy_rise did, at step 62) is too late
    # to be a warning and wrong about the run.
    rng = random.Random(7)
    trend = SuccessTrend()
    for step in range(40):
        trend.update({SUCCESS: sampled(0.1 if step < 10 else 0.9, 64, rng)})
    for value in (0.03, 0.07, 0.12):
        trend.update({SUCCESS: value})
        assert trend.holding(3, 3.5) is False
    trend.update({SUCCESS: 0.97})
    assert trend.drop() > 3.5  # the five-step window still says "fallen"
    assert trend.recovered() and trend.holding(3, 3.5) is True


def test_a_run_that_fell_and_stays_down_is_still_falling():
    # Every reply broke: success 0 from step 50 on. Long after the fall the last value equals the mean
    # before it (both 0): "recovered" must not hold a warning whose signal arrives late.
    rows = [{SUCCESS: 0.1}] * 10 + [{SUCCESS: 0.9}] * 40 + [{SUCCESS: 0.0}] * 60
    rows = [{**row, STD: 0.4 if step < 80 else 0.0} for step, row in enumerate(rows)]
    std = [e for e in alarms(replay(rows)) if e[2] == "reward_std_drop"]
    assert std and 80 <= std[0][0] <= 85


@pytest.mark.parametrize(("p", "episodes"), [(0.21, 64), (0.3, 16), (0.45, 32)])
def test_a_run_that_holds_its_start_level_rarely_loses_it(p, episodes):
    # real/fl-starpo-s-warm-sft-cpu20-s2: success noisy around 0.17 whose first five steps averaged 0.21.
    # Every step tests the run against one start level, itself a mean of five noisy values: by standard
    # errors alone 10-15% of such runs "lost their start" at some step of 150. Seeds are not chosen: the
    # share is.
    lost = 0
    for seed in range(100):
        rng, trend = random.Random(seed), SuccessTrend()
        for _ in range(150):
            trend.update({SUCCESS: sampled(p, episodes, rng)})
            if trend.lost_start(3):
                lost += 1
                break
    assert lost <= 8


def test_success_trend_noise_is_the_sd_of_one_step_around_the_trend():
    trend = SuccessTrend()
    for step in range(40):
        trend.update({SUCCESS: 0.4 + 0.2 * (step % 2)})
    assert trend.noise == pytest.approx(0.2 * math.sqrt(math.pi) / 2)  # mean |change| 0.2
    assert trend.baseline == pytest.approx(0.48)
    # Normal noise of SD 0.05 around a rising line, over many runs: the estimate is unbiased within 5%.
    rng, estimates = random.Random(4), []
    for _ in range(200):
        trend = SuccessTrend()
        for step in range(31):
            trend.update({SUCCESS: 0.2 + 0.005 * step + rng.gauss(0, 0.05)})
        estimates.append(trend.noise)
    assert sum(estimates) / len(estimates) == pytest.approx(0.05, rel=0.05)


def test_success_trend_holding_needs_a_real_peak_and_a_fall():
    trend = SuccessTrend()
    assert trend.holding(3, 1.5) is None  # too early to tell
    rng = random.Random(3)
    for _ in range(20):
        trend.update({SUCCESS: sampled(0.1, 32, rng)})
    for _ in range(10):
        trend.update({SUCCESS: 0.0})
    assert trend.holding(3, 1.5) is True  # fell, but from a peak that was noise
    for _ in range(20):
        trend.update({SUCCESS: sampled(0.8, 32, rng)})
    assert trend.holding(3, 1.5) is True  # a real peak, still there
    for _ in range(5):
        trend.update({SUCCESS: 0.2})
    assert trend.holding(3, 1.5) is False


def test_the_success_trend_uses_mean_reward_when_success_is_not_logged():
    trend = SuccessTrend()
    trend.update({"train/reward_mean": 0.3, "actor/entropy": 1.0})
    trend.update({"train/reward_mean": 0.5, SUCCESS: 0.9})  # a success key appearing later is not mixed in
    assert trend.metric == "train/reward_mean"
    assert trend.value == pytest.approx(0.3 * 0.3 + 0.7 * 0.5)


def template_run(mi, above, entropy):
    return [
        {"collapse/mi_estimate": m, "collapse/retrieval_above_chance": a, "actor/entropy": e}
        for m, a, e in zip(mi, above, entropy)
    ]


def test_template_collapse_fires_when_mi_and_retrieval_fall_while_entropy_stays_up():
    mi = [0.6, 0.7, 0.7, 0.7, 0.6, 0.3, 0.1, 0.05, 0.05, 0.05, 0.05]
    above = [0.5, 0.6, 0.6, 0.6, 0.5, 0.2, 0.05, 0.0, 0.0, 0.0, 0.0]
    events = replay(template_run(mi, above, [1.5] * 11))
    assert [(e["rule"], e["level"]) for e in events] == [("template_collapse", "warning")]
    # Entropy collapsing with it is the ordinary Echo Trap (other rules), not a template.
    assert replay(template_run(mi, above, [1.5] * 5 + [0.3] * 6)) == []
    # Retrieval still well above chance: the prompts are still told apart.
    assert replay(template_run(mi, [0.6] * 11, [1.5] * 11)) == []


def test_template_collapse_has_no_data_without_the_keys():
    rows = [{"actor/entropy": 1.5, SUCCESS: 0.5} for _ in range(30)]  # e.g. an imported TRL run
    assert [e for e in replay(rows) if e["rule"] == "template_collapse"] == []


def healthy_long_run(seed, steps=2000):
    """Success learns late to 0.85 (32 episodes a step) and holds it; thinking shrinks as it learns."""
    rng = random.Random(seed)
    rows = []
    for t in range(steps):
        p = 0.1 + 0.75 / (1 + math.exp(-(t - 0.35 * steps) / (0.08 * steps)))
        think = max(0.0, 80 * math.exp(-t / (0.4 * steps)) + 5 + rng.gauss(0, 3))
        rows.append({SUCCESS: sampled(p, 32, rng), "response/think_tokens_mean": think})
    return rows


def test_long_healthy_runs_are_rarely_warned_by_one_noisy_step_among_thousands():
    # The success guard's fall tests run at every step: at a fixed 3.5 SEs one of 2,000 plateau steps
    # passes by chance, and the thinking that shrank as these runs learned warned 15 of these 20 (10 of
    # 20 of a tester's). With the threshold growing with the run's length (FAMILY_RATE): 6 of 20, each
    # on a step or five of success 4-4.7 SEs down (a success rate near 0.85 over 32 episodes has a long
    # lower tail, which the normal threshold does not know).
    warned = [
        seed
        for seed in range(20)
        if any(rule == "thinking_decay" for _, _, rule in alarms(replay(healthy_long_run(seed))))
    ]
    assert len(warned) <= 7, warned


@pytest.mark.parametrize("seed", range(3))
def test_a_run_that_stays_collapsed_stays_collapsed(seed):
    # A reviewer's case: learned to 0.8, then held 0.42 (52% of it) for thousands of steps. The fall
    # test's allowance for chance grows with the run's length; judged at every step, it let the collapse
    # "resolve" and fire again seven times. It gates the way in only.
    rng = random.Random(seed)
    rows = [{SUCCESS: sampled(min(0.8, 0.1 + 0.7 * t / 150), 32, rng)} for t in range(300)]
    rows += [{SUCCESS: sampled(0.42, 32, rng)} for _ in range(3000)]
    collapse = [(e["step"], e["level"]) for e in replay(rows) if e["rule"] == "collapse"]
    assert len(collapse) == 1 and collapse[0][1] == "collapse", collapse
