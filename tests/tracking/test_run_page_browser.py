"""A run logged with the mlflow client, on EchoLab's run page in chromium: TRL's names drawn on our charts,
its params as the config, points appended live, and no Stop or Re-run for a run trained elsewhere."""

import pytest

from tests.helpers import wait_for
from tests.tracking.conftest import point_mlflow_at
from webapp.accounts.models import ApiToken

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def drawn_points(page, chart: str) -> int:
    """Points of the chart's drawn line: the SVG path's segments."""
    return page.evaluate(f"""(() => {{
        const path = document.querySelector('#chart-{chart} .scatterlayer path.js-line');
        return path ? (path.getAttribute('d').match(/[ML]/g) || []).length : 0; }})()""")


def test_the_run_page_charts_an_mlflow_run_live(page, monkeypatch, tmp_path):
    import mlflow
    from mlflow.tracking import fluent

    monkeypatch.setattr(fluent, "_active_experiment_id", None)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", "")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID")
    point_mlflow_at(monkeypatch, page.base, ApiToken.issue(page.user, "mlflow")[1])
    mlflow.set_experiment("trl on sokoban")
    with mlflow.start_run(run_name="grpo seed 3") as run:
        mlflow.log_params({"learning_rate": 1e-6, "num_generations": 8})
        # Zig-zags: plotly drops the middle points of a straight line.
        for step, (reward, std, entropy) in enumerate(
            [(0.1, 0.5, 2.0), (0.4, 0.2, 1.5), (0.2, 0.4, 1.9), (0.6, 0.1, 1.2), (0.3, 0.3, 1.7)], start=1
        ):
            mlflow.log_metrics({"reward": reward, "frac_reward_zero_std": std, "entropy": entropy}, step=step)
        from webapp.tracking.models import ExternalRun

        pk = ExternalRun.objects.get(run_uuid=run.info.run_id).pk
        page.goto(f"{page.base}/runs/{pk}/")
        wait_for(lambda: drawn_points(page, "reward") == 5, timeout=20, message="the reward line")
        assert drawn_points(page, "entropy") == 5 and drawn_points(page, "zero_std") == 5
        header = page.locator(".run-header").inner_text()
        assert "grpo seed 3" in header and "Running" in header
        assert "Stop" not in header and "Re-run" not in header
        assert "num_generations: '8'" in page.locator("#config-yaml").inner_text()

        mlflow.log_metrics({"reward": 0.1, "entropy": 1.9}, step=6)  # the page polls every 2 s
        wait_for(
            lambda: "step 6" in page.locator("#run-progress-text").inner_text(),
            timeout=20,
            message="the page to poll the new step",
        )
        page.screenshot(path=str(tmp_path / "mlflow-run.png"), full_page=True)
        print("screenshot:", tmp_path / "mlflow-run.png")
    with page.expect_navigation(timeout=15_000):  # the page reloads once the run ends
        pass
    assert page.locator("#run-status").text_content() == "Completed"


def test_a_run_whose_trainer_went_quiet_says_since_when_and_what_follows(page):
    """A tester's crashed trainer left its run 'Running · live, updating every 2 s' with nothing saying that
    no data had come for minutes, until MLFLOW_LOST_AFTER marked it failed."""
    from datetime import timedelta

    from django.utils import timezone

    from webapp.experiments.models import Run
    from webapp.tracking.models import ExternalExperiment, ExternalRun

    experiment = ExternalExperiment.create(page.user, "my loop")
    external = ExternalRun.start(experiment, "crashed", {}, "carol", timezone.now() - timedelta(minutes=5))
    external.log([("reward", 0.5, 0, None)], {}, {})
    Run.objects.filter(pk=external.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=150))
    page.goto(f"{page.base}/runs/{external.pk}/")
    heard = page.locator("#run-heard")
    wait_for(lambda: "its trainer has sent nothing since" in heard.inner_text(), timeout=10, message="polled")
    text = heard.inner_text()
    assert text.startswith("2m 3") and text.endswith("(it is marked failed after 15m 00s of silence)"), text
    external.log([("reward", 0.6, 1, None)], {}, {})  # it speaks again
    wait_for(
        lambda: heard.inner_text() in ("0s ago", "1s ago", "2s ago", "3s ago"), timeout=10, message="heard"
    )


def test_a_key_logged_without_steps_does_not_stop_the_others_live(page, monkeypatch):
    """A loss logged per batch without a step is numbered past the run's steps (0-9 by step 5): the page
    asked for points after its highest number, so the reward of steps 6-9 never came until a reload."""
    import mlflow
    from mlflow.tracking import fluent

    monkeypatch.setattr(fluent, "_active_experiment_id", None)
    point_mlflow_at(monkeypatch, page.base, ApiToken.issue(page.user, "mlflow")[1])
    mlflow.set_experiment("stepless beside steps")
    with mlflow.start_run(run_name="loss per batch") as run:
        from webapp.tracking.models import ExternalRun

        for step in range(1, 6):
            mlflow.log_metrics({"reward": step % 2 / 2}, step=step)  # zig-zag: every point drawn
            mlflow.log_metric("loss", 1.0 / step)  # no step, twice a step
            mlflow.log_metric("loss", 0.5 / step)
        pk = ExternalRun.objects.get(run_uuid=run.info.run_id).pk
        page.goto(f"{page.base}/runs/{pk}/")
        wait_for(lambda: drawn_points(page, "reward") == 5, timeout=20, message="the reward line")
        for step in range(6, 10):
            mlflow.log_metrics({"reward": step % 2 / 2}, step=step)
        wait_for(lambda: drawn_points(page, "reward") == 9, timeout=20, message="steps 6-9 drawn live")
