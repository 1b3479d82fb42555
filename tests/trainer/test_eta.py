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
