"""/runs/<id>/: status, progress, config, stop and re-run, charts wiring. Owner only."""

import json
import re
from datetime import timedelta

from django.test import Client

from tests.factories import make_experiment, make_run
from tests.helpers import REPO_ROOT
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint


def page_data(response) -> dict:
    html = response.content.decode()
    start = html.index('<script id="run-page-data" type="application/json">') + len(
        '<script id="run-page-data" type="application/json">'
    )
    return json.loads(html[start : html.index("</script>", start)])


def test_owner_sees_status_progress_config_and_live_chart_setup(alice_client, run):
    run.host, run.device, run.attempt = "gpu-box-3", "cuda:1", 2
    run.save()
    response = alice_client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="run-status">Running<' in html
    assert "10 / 100 steps done (10%)" in html and "ETA 42s" in html
    assert "gpu-box-3" in html and "cuda:1" in html
    assert "model:\n  name: tiny\nrollout:\n  group_size: 4\n" in html
    assert f'action="/runs/{run.pk}/stop"' in html
    assert "/static/vendor/plotly/plotly-cartesian.min.js" in html and "/static/js/run.js" in html
    data = page_data(response)
    assert data["finished"] is False
    assert data["urls"] == {
        "metrics": f"/api/runs/{run.pk}/metrics",
        "events": f"/api/runs/{run.pk}/events",
        "detector_inputs": f"/api/runs/{run.pk}/detector-inputs",
        "trajectories": f"/runs/{run.pk}/trajectories",
        "reward_std_hist": f"/api/runs/{run.pk}/reward-std-hist",
    }
    keys = [key for chart in data["charts"] for key in chart["keys"]]
    assert {
        "train/success",
        "val/success",
        "actor/grad_norm",
        "train/reward_std_in_group",
        "actor/kl_ref",
    } <= set(keys)
    assert {chart["id"] for chart in data["charts"] if chart.get("log")} == {"grad_norm"}


def test_eta_reads_as_on_every_other_page(alice_client, run):
    Run.objects.filter(pk=run.pk).update(eta_seconds=1459)
    assert "ETA 24m 19s" in alice_client.get(f"/runs/{run.pk}/").content.decode()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED)  # queued again: its wait is unknown
    assert "ETA" not in alice_client.get(f"/runs/{run.pk}/").content.decode()


def test_earlier_attempts_list_only_attempts_before_the_current_one(alice_client, run):
    run.claim("box-a", 11, "cpu")
    run.finish(Run.Status.COMPLETED)
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Earlier attempts" not in html  # the only attempt is the one the page shows

    second = make_run(run.experiment.owner, status=Run.Status.QUEUED)
    second.claim("box-a", 12, "cpu")
    second.requeue("worker shut down")
    second.claim("box-b", 13, "cpu")
    html = alice_client.get(f"/runs/{second.pk}/").content.decode()
    assert "Earlier attempts (1)" in html and "attempt 1 on box-a" in html and "worker shut down" in html
    assert "Attempt 2 started" in html
    # every time in one form, the attempt log's too (it keeps ISO text)
    assert re.search(r"ended \d{4}-\d\d-\d\d \d\d:\d\d: worker shut down", html)
    assert re.search(r"<dt>Attempt 2 started</dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d</dd>", html)

    started = second.started_at
    Run.objects.filter(pk=second.pk).update(earlier_training=timedelta(minutes=10))
    Run.objects.filter(pk=second.pk).update(
        status=Run.Status.COMPLETED, finished_at=started + timedelta(minutes=6)
    )
    html = alice_client.get(f"/runs/{second.pk}/").content.decode()
    assert '<dd id="run-duration">16m 00s over 2 attempts</dd>' in html


def test_plotly_is_served_from_the_project(alice_client, run):
    response = alice_client.get("/static/vendor/plotly/plotly-cartesian.min.js")
    assert response.status_code == 200
    assert b"plotly" in b"".join(response.streaming_content)[:2000].lower()


def test_the_static_files_the_contracts_name_are_the_projects():
    # docs/CONTRACTS.md named plotly.min.js from the plotly package after both were gone
    contracts = (REPO_ROOT / "docs" / "CONTRACTS.md").read_text()
    named = re.findall(r"\{% static '([^']+)' %\}", contracts)
    assert named and [path for path in named if not (REPO_ROOT / "static" / path).is_file()] == []


def test_stop_requests_a_stop_and_hides_the_button_once_finished(alice_client, run):
    response = alice_client.post(f"/runs/{run.pk}/stop")
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    run.refresh_from_db()
    assert run.stop_requested and run.status == "running"
    # Asked once: the page says so, offers no second Stop, and promises no end time it will not keep.
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert ">stopping<" in html and "stop-form" not in html and "ETA" not in html
    assert "None so far." in html  # no events yet, and more may come while it stops

    queued = make_run(run.experiment.owner)
    alice_client.post(f"/runs/{queued.pk}/stop")
    queued.refresh_from_db()
    assert queued.status == "stopped"
    html = alice_client.get(f"/runs/{queued.pk}/").content.decode()
    assert "stop-form" not in html
    assert '<p class="muted" id="events-empty">None.</p>' in html  # finished: none will come
    assert page_data(alice_client.get(f"/runs/{queued.pk}/"))["finished"] is True


def test_stop_needs_post_and_csrf(run, alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    assert browser.get(f"/runs/{run.pk}/stop").status_code == 405
    assert browser.post(f"/runs/{run.pk}/stop").status_code == 403
    run.refresh_from_db()
    assert not run.stop_requested


def test_failed_run_shows_error_and_traceback_escaped(alice_client, alice):
    run = make_run(
        alice,
        status=Run.Status.FAILED,
        error="CUDA <oom>",
        traceback='Traceback (most recent call last):\n  File "<script>alert(1)</script>"',
    )
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "CUDA &lt;oom&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html


def test_label_and_config_are_escaped(alice_client, alice):
    run = make_run(
        alice, label="<img src=x onerror=alert(1)>", config={"note": "</script><script>alert(2)</script>"}
    )
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "<img src=x" not in html and "<script>alert(2)" not in html


def test_other_users_get_404_for_page_and_stop(bob_client, run):
    assert bob_client.get(f"/runs/{run.pk}/").status_code == 404
    assert bob_client.post(f"/runs/{run.pk}/stop").status_code == 404
    assert bob_client.get(f"/runs/{run.pk}/trajectories").status_code == 404
    run.refresh_from_db()
    assert not run.stop_requested


def test_anonymous_is_sent_to_login(client, run):
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 302 and "login" in response["Location"]


def test_a_view_the_page_cannot_follow_is_named_with_what_it_shows_instead(alice_client, alice):
    # ?x=bogus, ?xrange=a,b and ?smooth=7 were dropped without a word (the compare page named them).
    run = make_run(alice, status=Run.Status.COMPLETED, step=20, total_steps=20)
    html = alice_client.get(f"/runs/{run.pk}/?x=bogus&xrange=a,b&smooth=7&detector=2").content.decode()
    for notice in (
        "x: expected step or time, got &#x27;bogus&#x27;; the x axis is the step.",
        "detector: expected 1 (the detector&#x27;s view), got &#x27;2&#x27;; not shown.",
        "smooth: expected a number from 0 to 0.99, got &#x27;7&#x27;; no smoothing.",
        "xrange: expected two increasing steps like 10,50, got &#x27;a,b&#x27;; every step is shown.",
    ):
        assert f"<li>{notice}</li>" in html
    html = alice_client.get(f"/runs/{run.pk}/?x=time&xrange=10,50&smooth=0.6&detector=1").content.decode()
    assert 'id="view-notices"' not in html


def test_step_in_the_url_ends_at_the_last_logged_step(alice_client, alice):
    # A finished native run's `step` counts the steps done: 20 steps are logged as steps 0..19.
    run = make_run(alice, status=Run.Status.COMPLETED, step=20, total_steps=20)
    MetricPoint.upsert(run.pk, [(s, "train/success", 0.5) for s in range(20)])
    response = alice_client.get(f"/runs/{run.pk}/?step=19")
    assert page_data(response)["cursor"] == 19 and response.context["step_error"] == ""
    response = alice_client.get(f"/runs/{run.pk}/?step=20")
    assert page_data(response)["cursor"] is None
    assert response.context["step_error"] == "step: this run ends at step 19, got 20; showing the whole run"
    # A run still training may be pointed anywhere up to its last step to come.
    run.status, run.step = Run.Status.RUNNING, 5
    run.save()
    assert page_data(alice_client.get(f"/runs/{run.pk}/?step=19"))["cursor"] == 19
    assert page_data(alice_client.get(f"/runs/{run.pk}/?step=20"))["cursor"] is None


def test_a_step_in_other_scripts_digits_is_named_not_a_500(alice_client, alice):
    run = make_run(alice, status=Run.Status.COMPLETED, step=20, total_steps=20)
    for text in (
        "\u00b2",
        "\u0663",
        "\uff11",
    ):  # superscript two: isdigit() but no int(); Arabic-Indic 3; fullwidth 1
        for url in (f"/runs/{run.pk}/", f"/runs/{run.pk}/trajectories"):
            response = alice_client.get(url, {"step": text})
            assert response.status_code == 200, (url, text)
            assert response.context["step_error"].startswith("step: expected a whole number from 0 to "), text


def test_a_queued_run_offers_no_trajectories_or_exports_it_does_not_have_yet(alice_client, alice, run):
    queued = make_run(alice)
    html = alice_client.get(f"/runs/{queued.pk}/").content.decode()
    assert "trajectories-link" not in html and "Export CSV" not in html and "Export JSONL" not in html
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()  # running: it has both
    assert "trajectories-link" in html and "Export CSV" in html and "Export JSONL" in html
    assert '<dd id="run-device">–</dd>' in html  # an empty fact reads as in every table
    requeued = make_run(alice, attempt=1, step=53)  # its worker stopped: queued again with its data
    html = alice_client.get(f"/runs/{requeued.pk}/").content.decode()
    assert "trajectories-link" in html and "Export CSV" in html and "Export JSONL" in html


def test_a_run_stopped_in_the_queue_says_nothing_was_trained_and_offers_only_resume(alice_client, alice):
    queued = make_run(alice)
    queued.request_stop()
    html = alice_client.get(f"/runs/{queued.pk}/").content.decode()
    assert "trajectories-link" not in html and "Export CSV" not in html and 'id="resume-form"' in html
    assert "Stopped in the queue before a worker\n    started it: nothing was trained or logged" in html
    assert "<dt>Stopped in the queue</dt>" in html and "too-short" not in html  # it was never judged
    for section in ('class="run-charts"', 'id="reward-std-hist"', 'id="collapse-panel"'):
        assert re.search(section + r"[^>]* hidden>", html), section
    stopped = make_run(alice, attempt=1, step=53, status=Run.Status.STOPPED)  # stopped while training
    html = alice_client.get(f"/runs/{stopped.pk}/").content.decode()
    assert "never-trained" not in html and "Export CSV" in html and "<dt>Stopped</dt>" in html
    assert re.search(r'class="run-charts">', html)


def test_a_resumed_run_in_the_queue_has_no_worker_yet_and_says_where_it_last_ran(alice_client, alice):
    queued = make_run(alice, host="vm", attempt=1)  # resumed: queued again after an attempt on "vm"
    html = alice_client.get(f"/runs/{queued.pk}/").content.decode()
    assert '<dd id="run-host">none yet (the last attempt ran on vm)</dd>' in html
    # attempt 1 has ended: the next one waits (it read "Attempt 1 started –" beside attempt 1's end)
    text = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "Attempts 1 Attempt 2 waiting in the queue" in text and "started –" not in text


def test_a_finished_run_too_short_for_a_collapse_call_says_so(alice_client, alice):
    # Collapse judges from its 10th value and holds a breach 5 values: a run logging 10 steps can never get one.
    short = make_run(alice, status=Run.Status.COMPLETED, step=1000, total_steps=1000)
    MetricPoint.upsert(short.pk, [(step, "train/success", 0.5) for step in range(0, 1000, 100)])
    html = " ".join(alice_client.get(f"/runs/{short.pk}/").content.decode().split())
    assert "needs at least 14 logged steps of success (or of mean reward) before it can call one" in html
    assert "and this run logged 10 of train/success." in html
    # Only its outcome counts: a run of 20 logged steps of other keys and 12 of mean reward (TRL logs reward
    # from step 1) logged 12, and one without success or reward logged none (it said "logged 20")
    trl = make_run(alice, status=Run.Status.COMPLETED, step=20, total_steps=20)
    MetricPoint.upsert(trl.pk, [(step, "actor/entropy", 1.0) for step in range(20)])
    MetricPoint.upsert(trl.pk, [(step, "train/reward_mean", 0.5) for step in range(1, 13)])
    html = " ".join(alice_client.get(f"/runs/{trl.pk}/").content.decode().split())
    assert "and this run logged 12 of train/reward_mean." in html
    MetricPoint.objects.filter(run=trl, key="train/reward_mean").delete()
    html = " ".join(alice_client.get(f"/runs/{trl.pk}/").content.decode().split())
    assert "and this run logged none of success, validation success or mean reward." in html

    lenient = make_run(alice, status=Run.Status.COMPLETED, step=10, total_steps=10)
    lenient.experiment.detector_overrides = {"collapse": {"min_steps": 5, "pending": 2}}
    lenient.experiment.save()
    MetricPoint.upsert(lenient.pk, [(step, "train/success", 0.5) for step in range(10)])
    long_enough = make_run(alice, status=Run.Status.COMPLETED, step=14, total_steps=14)
    MetricPoint.upsert(long_enough.pk, [(step, "train/success", 0.5) for step in range(14)])
    running = make_run(alice, status=Run.Status.RUNNING, step=3, total_steps=10)
    # failed loading its model: "logged no metrics before it ended" says it, not "too short"
    failed = make_run(alice, status=Run.Status.FAILED, step=0, total_steps=10, attempt=1)
    for run in (lenient, long_enough, running, failed):
        assert 'id="too-short"' not in alice_client.get(f"/runs/{run.pk}/").content.decode()


def test_a_run_logged_under_another_trainers_names_is_not_called_too_short(alice_client, alice):
    # EchoLab's metrics API stores keys as sent: a TRL run's mean reward under `reward`, a RAGEN run's
    # success under train/<env>/success. The detector reads them as ours, but the page looked for our names
    # only and called a finished 200-step run "too short ... logged none of success, validation success or
    # mean reward".
    for key in ("reward", "train/reward", "critic/score/mean", "train/Bandit/success"):
        run = make_run(alice, status=Run.Status.COMPLETED, step=200, total_steps=200)
        MetricPoint.upsert(run.pk, [(step, key, 0.5) for step in range(1, 201)])
        assert 'id="too-short"' not in alice_client.get(f"/runs/{run.pk}/").content.decode(), key
    # ... and one that is too short says which of its keys it counted.
    short = make_run(alice, status=Run.Status.COMPLETED, step=100, total_steps=100)
    MetricPoint.upsert(short.pk, [(step, "reward", 0.5) for step in range(10, 101, 10)])  # logging_steps 10
    MetricPoint.upsert(short.pk, [(step, "entropy", 1.0) for step in range(10, 101, 10)])
    html = " ".join(alice_client.get(f"/runs/{short.pk}/").content.decode().split())
    assert "and this run logged 10 of reward." in html


def test_a_run_that_collapsed_says_so_beside_its_status_even_once_completed(alice_client, alice):
    from tests.factories import make_event

    run = make_run(alice, status=Run.Status.COMPLETED, attempt=1, step=40, total_steps=40)
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert re.search(r'<a class="badge badge-collapse" id="run-collapse" href="" hidden></a>', html)
    make_event(run, 16, "collapse", rule="collapse")
    make_event(run, 30, "collapse", rule="collapse")  # a relapse: the first is the one said
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert '<span class="badge badge-completed" id="run-status">Completed</span>' in html
    assert 'id="run-collapse" href="?step=16">collapsed at step 16</a>' in html


def test_the_end_of_a_run_is_named_by_how_it_ended(alice_client, alice):
    from django.utils import timezone

    said = {}
    for status in ("completed", "stopped", "failed"):
        run = make_run(alice, status=status, attempt=1, step=3, finished_at=timezone.now())
        html = alice_client.get(f"/runs/{run.pk}/").content.decode()
        said[status] = re.search(r"<dt>(Finished|Stopped|Failed)</dt>", html).group(1)
    assert said == {"completed": "Finished", "stopped": "Stopped", "failed": "Failed"}


def test_a_right_to_left_override_in_a_name_cannot_turn_the_title_or_a_confirmation_around(
    alice_client, alice
):
    """A tester's run named "...\u202eevil" had the Delete question read backwards after it."""
    from tests.factories import make_experiment

    run = make_run(
        alice, experiment=make_experiment(alice, name="lr \u202esweep"), status=Run.Status.COMPLETED
    )
    Run.objects.filter(pk=run.pk).update(name="seed \u202eevil")
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    isolated = "\u2068lr \u202esweep\u2069 / \u2068seed \u202eevil\u2069"
    assert f"<title>{isolated} · EchoLab</title>" in page
    assert 'data-confirm="Delete \u2068seed \u202eevil\u2069 for good?' in page


def test_other_detector_settings_start_from_the_experiments_own(alice_client, alice):
    experiment = make_experiment(alice, detector_overrides={"reward_std_drop": {"ratio": 0.3}})
    run = make_run(alice, experiment=experiment, status=Run.Status.COMPLETED)
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()
    box = html[html.index('<textarea id="try-overrides"') :]
    assert box[box.index(">") + 1 : box.index("</textarea>")] == "reward_std_drop:\n  ratio: 0.3\n"
