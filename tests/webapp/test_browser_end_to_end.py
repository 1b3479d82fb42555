"""The product end to end, as a researcher uses it, in Debian chromium: log in, submit the form with a
bad value and read the message, fix it, start the experiment, watch the run page's charts gain points
while a real gpu worker process trains the tiny model, then read a transcript in the trajectory viewer."""

import pytest

from tests.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.factories import make_user
from tests.helpers import REPO_ROOT, as_function_predicate
from webapp.experiments.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "webapp"
# Small enough for a step per second or two on one CPU thread; the worker trains it for real.
CPU_SIZED = """rollout:
  env_groups: 2
  group_size: 2
  max_new_tokens: 32
  val_seeds: 2
optim:
  mini_batch_size: 4
  micro_batch_size: 4
schedule:
  val_every: 0
  checkpoint_every: 4
"""


def chart_points(page, chart="success"):
    return page.evaluate(f"""(document.getElementById('chart-{chart}').data || [])
        .reduce((n, trace) => n + (trace.x ? trace.x.length : 0), 0)""")


def test_configure_start_watch_and_read(
    live_server, tiny_model_dir, start_worker, settings, tmp_path, purge_broker, monkeypatch
):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM reads while Playwright's loop runs
    make_user("dana")
    start_worker(
        "gpu",
        name="gpu0",
        extra_args=("--max-tasks-per-child", "1"),
        ECHOLAB_THREADS=1,
        CHECKPOINT_ROOT=tmp_path / "checkpoints",
    )
    url = live_server.url
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(30_000)
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on(
            "console",
            lambda message: "Content Security Policy" in message.text and errors.append(message.text),
        )
        page.wait_for_function = as_function_predicate(page.wait_for_function)

        page.goto(url + "/")
        page.fill("input[name=username]", "dana")
        page.fill("input[name=password]", "dana-password-1")
        page.click("button[type=submit]")
        page.wait_for_url(url + "/")

        page.click("text=New experiment")
        page.fill("input[name=name]", "Bandit, watched live")
        page.select_option("select[name=env]", "bandit")
        page.fill("input[name=steps]", "0")
        page.click("text=Advanced: trainer settings and detector")
        page.fill("textarea[name=overrides]", CPU_SIZED)
        page.click("#create-experiment")
        error = page.wait_for_selector("#field-steps .errorlist")
        assert "must be at least 1" in error.inner_text()
        assert not Run.objects.exists(), "an invalid form saves nothing"

        page.fill("input[name=steps]", "12")
        page.click("#create-experiment")
        page.wait_for_url(url + "/experiments/*/")
        run = Run.objects.get()
        page.goto(url + run.get_absolute_url())
        page.wait_for_function("document.getElementById('chart-success').data !== undefined")

        # The page polls while the worker trains: points arrive without a reload. (It reloads once when the
        # run leaves the queue and once when it ends, so a check may find the chart not drawn yet.)
        page.wait_for_function(
            """(document.getElementById('chart-success').data || [])
            .some(trace => trace.x && trace.x.length >= 1)""",
            timeout=180_000,
        )
        first = chart_points(page)
        page.wait_for_function(
            f"""(document.getElementById('chart-success').data || [])
            .reduce((n, trace) => n + (trace.x ? trace.x.length : 0), 0) > {first}""",
            timeout=180_000,
        )
        assert Run.objects.get().status in ("running", "completed")
        # The page was rendered while the run was queued; polling fills in where it trains.
        page.wait_for_selector("#run-device:has-text('cpu')")
        page.screenshot(path=str(ARTIFACTS / "run-page-live.png"), full_page=True)
        page.wait_for_selector("#run-status:has-text('completed')", timeout=300_000)

        page.click("text=Trajectories")
        page.wait_for_selector("section.trajectory")
        transcript = page.inner_text("section.trajectory")
        assert "Turn 1" in transcript and "answer" in transcript
        assert page.locator("pre.state-grid").count() >= 1
        page.screenshot(path=str(ARTIFACTS / "trajectories.png"), full_page=True)
        browser.close()
    assert errors == []
    run.refresh_from_db()
    assert run.status == "completed" and run.step == 12, run.error
