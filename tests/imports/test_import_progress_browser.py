"""/import in chromium: a large upload shows its progress, then the run page; a bad file shows the form's
error. (Under the page's Content-Security-Policy, like every browser test.)"""

import pytest

from webapp.experiments.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def csv_file(tmp_path, steps):
    path = tmp_path / "big-run.csv"
    path.write_text(
        "step,train/success,actor/grad_norm\n"
        + "".join(f"{step},{(step % 100) / 100:.6f},{1 + step % 7:.6f}\n" for step in range(steps))
    )
    return path


def test_a_large_upload_shows_its_progress_then_the_run(page, tmp_path):
    path = csv_file(tmp_path, 40_000)  # ~1 MB
    page.goto(f"{page.base}/import")
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 200_000},
    )  # bytes/s: ~5 s to send
    page.set_input_files("#import-form input[type=file]", str(path))
    page.click("#import-form button[type=submit]")
    page.get_by_text("Uploading:").wait_for()
    assert page.locator("#import-progress").is_visible()
    total = f"of {path.stat().st_size / 1048576:.1f} MB"
    assert total in page.locator("#import-progress-text").inner_text()
    page.wait_for_url("**/runs/*/", timeout=60_000)
    run = Run.objects.get()
    assert page.url.endswith(run.get_absolute_url())
    assert page.get_by_text("Imported 80,000 metric points over 40,000 steps").is_visible()


def test_a_bad_file_shows_the_forms_error(page, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("step,a\n0,1\n1,oops\n")
    page.goto(f"{page.base}/import")
    page.set_input_files("#import-form input[type=file]", str(path))
    page.click("#import-form button[type=submit]")
    page.get_by_text("line 3, column 'a': 'oops' is not a number").wait_for()
    assert not Run.objects.exists()
    # The keyboard is on the file field, whose description is the error: a screen reader says it (the
    # focus was left on the page's body, and nothing was announced).
    page.wait_for_function("document.activeElement && document.activeElement.type === 'file'")
    described = page.evaluate(
        "document.activeElement.getAttribute('aria-describedby').split(' ')"
        ".map(id => document.getElementById(id).innerText).join(' ')"
    )
    assert "'oops' is not a number" in described


def test_a_file_over_the_limit_is_said_at_once_and_not_sent(page, tmp_path, settings):
    settings.IMPORT_MAX_BYTES = 1000
    path = csv_file(tmp_path, 500)  # ~10 KB
    sent = []
    page.on("request", lambda request: request.method == "POST" and sent.append(request.url))
    page.goto(f"{page.base}/import")
    page.set_input_files("#import-form input[type=file]", str(path))
    page.click("#import-form button[type=submit]")
    said = page.locator("#import-progress-text")
    said.wait_for()
    assert said.inner_text() == (
        f"big-run.csv: {path.stat().st_size / 1048576:.1f} MB, over the limit of 0.0 MB: not sent "
        "(the server's IMPORT_MAX_BYTES)."
    )
    assert page.evaluate("document.activeElement.type") == "file"
    assert sent == [] and not Run.objects.exists()
