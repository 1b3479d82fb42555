"""The ETA both sinks report (the CLI's line, the run page's): at the pace of the last steps."""

import pytest

from trainer.sink import Eta


def test_the_eta_goes_at_the_pace_of_the_last_steps_not_of_the_slow_first_ones():
    eta, now = Eta(), 0.0
    for step in range(1, 4):  # three slow steps: 60 s each
        now += 60
        left = eta.update(step, 100, now, first_step_seconds=60)
    assert left == pytest.approx(97 * 60)
    for step in range(4, 30):  # then 2 s each
        now += 2
        left = eta.update(step, 100, now, 60)
    assert left == pytest.approx(71 * 2)


def test_a_validation_every_25_steps_is_taken_in_at_its_rate_not_seen_or_missed_by_a_window():
    def seconds(step):
        return 2 + (30 if step % 25 == 0 else 0)  # 2 s a step, 30 s more for each validation

    eta, now, total = Eta(), 0.0, 200
    for step in range(1, total):
        now += seconds(step)
        left = eta.update(step, total, now, seconds(step))
        if 50 <= step <= total - 50:  # at least two validations ahead: near the end any rate is lumpy
            truth = sum(seconds(later) for later in range(step + 1, total + 1))
            assert 0.6 * truth < left < 1.5 * truth, (step, left, truth)


def test_a_long_run_keeps_a_few_hundred_marks_not_one_a_step():
    eta, now = Eta(), 0.0
    for step in range(1, 200_001):
        now += 2.0
        left = eta.update(step, 400_000, now, 2.0)
    assert left == pytest.approx(200_000 * 2.0)
    assert len(eta._marks) <= 2 * Eta.MARKS
