"""Experiment list and page: scoped to the owner, escaped, badges, progress, sparklines, stop-all."""

import re
from html import escape, unescape

import yaml
from django.urls import reverse

from tests.factories import make_checkpoint, make_experiment, make_run, spec_experiment
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint


def test_other_users_experiment_is_404_everywhere(client, alice, bob):
    experiment = spec_experiment(alice)
    client.force_login(bob)
    for name in ("experiment_detail", "experiment_rerun", "experiment_export"):
        assert client.get(reverse(name, args=[experiment.pk])).status_code == 404
    assert client.post(reverse("experiment_stop", args=[experiment.pk])).status_code == 404
    assert experiment.runs.get().status == "queued"
    assert experiment.name not in client.get("/").content.decode()
    page = client.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert "belongs to another user" in page and 'href="/runs/"' in page  # the site's page, with its links


def test_script_in_a_name_renders_as_text(alice_client, alice):
    experiment = spec_experiment(alice, name="<script>alert(1)</script>")
    for url in ("/", experiment.get_absolute_url()):
        html = alice_client.get(url).content.decode()
        assert "<script>alert(1)</script>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_list_shows_status_badges_progress_eta_collapses_and_sparkline(alice_client, alice):
    experiment = spec_experiment(alice, seeds=[1, 2, 3], steps=10)
    first, second, third = experiment.runs.order_by("id")
    Run.objects.filter(pk=first.pk).update(status="running", step=5, eta_seconds=125)
    Run.objects.filter(pk=second.pk).update(status="completed", step=10)
    MetricPoint.upsert(first.pk, [(step, "train/success", step / 10) for step in range(5)])
    DetectorEvent.objects.create(run=second, step=8, level="collapse", rule="entropy_drop", message="down")
    DetectorEvent.objects.create(run=second, step=9, level="warning", rule="grad_spike", message="spike")
    html = alice_client.get("/").content.decode()
    assert "1 running" in html and "1 completed" in html and "1 queued" in html
    assert "50%" in html  # 15 of 30 steps
    assert "running runs' ETA 2m 05s, then 1 queued" in html  # the queued run is not in the ETA: said so
    assert "1 run collapsed<" in html
    assert "<polyline points=" in html


def test_list_counts_the_runs_that_collapsed_not_their_collapse_events(alice_client, alice):
    # A run that collapsed, recovered and collapsed again has two collapse events: the list said
    # "3 collapses" of an experiment where two of its runs had collapsed.
    experiment = spec_experiment(alice, seeds=[1, 2, 3], steps=10)
    relapsed, collapsed, _ = experiment.runs.order_by("id")
    for run, step, level in (
        (relapsed, 3, "collapse"),
        (relapsed, 5, "resolved"),
        (relapsed, 8, "collapse"),
        (collapsed, 6, "collapse"),
    ):
        DetectorEvent.objects.create(run=run, step=step, level=level, rule="collapse", message=level)
    html = alice_client.get("/").content.decode()
    assert "2 runs collapsed<" in html and "collapses" not in html


def test_list_sparkline_shades_from_the_lowest_run_to_the_highest(alice_client, alice):
    """A mean alone drew a solved run beside a collapsed one as one run at half success."""
    import re

    experiment = spec_experiment(alice, seeds=[1, 2], steps=24)
    solved, collapsed = experiment.runs.order_by("id")
    MetricPoint.upsert(solved.pk, [(step, "train/success", 1.0) for step in range(24)])
    MetricPoint.upsert(
        collapsed.pk, [(step, "train/success", 0.8 if step < 12 else 0.0) for step in range(24)]
    )
    lone = spec_experiment(alice, steps=24).runs.get()
    MetricPoint.upsert(lone.pk, [(step, "train/success", step / 24) for step in range(24)])
    html = alice_client.get("/").content.decode()
    shaded = re.findall(r'<polygon class="spread" points="([^"]+)"', html)
    assert len(shaded) == 1  # the lone run's experiment has no spread to shade
    heights = [float(point.split(",")[1]) for point in shaded[0].split()]
    top, bottom = heights[:24], heights[24:]
    assert set(top) == {0.0}  # the solved run, success 1 throughout
    assert bottom == [22.0] * 12 + [4.4] * 12  # right to left: the collapsed run at 0, then at 0.8
    lines = re.findall(r'<polyline points="([^"]+)"', html)
    means = {tuple(float(point.split(",")[1]) for point in line.split()) for line in lines}
    assert (2.2,) * 12 + (11.0,) * 12 in means  # the mean of 1 and 0.8, then of 1 and 0


def test_list_shows_no_eta_of_a_run_whose_worker_went_quiet(alice_client, alice):
    """As on the run's page (Run.eta): a killed worker's run kept its ETA on the list until it was requeued."""
    from datetime import timedelta

    from django.utils import timezone

    experiment = spec_experiment(alice, steps=10)
    quiet = timezone.now() - timedelta(minutes=3)
    experiment.runs.update(status="running", step=5, eta_seconds=125, heartbeat_at=quiet)
    assert "ETA" not in alice_client.get("/").content.decode()
    experiment.runs.update(heartbeat_at=timezone.now())  # it answers again
    assert "ETA 2m 05s" in alice_client.get("/").content.decode()


def test_runs_trained_elsewhere_show_their_steps_not_a_percentage(alice_client, alice):
    experiment = make_experiment(alice, "mlflow: sweep", imported=True)
    # An MLflow run's `step` is the newest step it logged: the list names the furthest, not their sum.
    make_run(alice, experiment=experiment, label="a", config={}, status="completed", step=149, total_steps=0)
    make_run(alice, experiment=experiment, label="b", config={}, status="completed", step=19, total_steps=0)
    html = alice_client.get("/").content.decode()
    assert "at step 149" in html and "168" not in html and "0%" not in html
    html = alice_client.get(experiment.get_absolute_url()).content.decode()
    assert "step 149" in html and "149 / 0" not in html
    assert "Config (first run)" not in html  # it has no trainer config: no empty box


def test_list_filters_by_name_env_and_status(alice_client, alice):
    lake = spec_experiment(alice, name="Lake alpha")
    spec_experiment(alice, name="Bandit beta", env={"name": "bandit", "params": {}})
    Run.objects.filter(experiment=lake).update(status="failed")

    def names(query):
        page = alice_client.get("/", query).context["page"]
        return [experiment.name for experiment in page.object_list]

    assert names({"q": "alpha"}) == ["Lake alpha"]
    assert names({"env": "bandit"}) == ["Bandit beta"]
    assert names({"status": "failed"}) == ["Lake alpha"]
    assert names({"status": "queued"}) == ["Bandit beta"]
    assert names({"q": "  alpha "}) == ["Lake alpha"]


def test_a_bad_filter_or_page_is_named_not_dropped_for_everything_or_page_one(alice_client, alice):
    spec_experiment(alice, name="Lake alpha")
    for query, said in (
        (
            {"status": "bogus"},
            "status: must be one of: queued, running, completed, failed, stopped; got 'bogus'",
        ),
        ({"page": "junk"}, "page: must be a whole number, like 3"),
        ({"page": "0"}, "page: must be at least 1"),
        ({"q": "a\x00b"}, "q: Null characters are not allowed."),
        ({"env": "nope"}, "env: must be one of: "),  # was an empty list, as if no experiment had it
    ):
        response = alice_client.get("/", query)
        assert response.status_code == 400, query
        html = response.content.decode()
        assert f"<li>{escape(said)}" in html, (query, html[:3000])
        assert "Lake alpha" not in html  # no list that the filter did not select


def test_list_is_paginated(alice_client, alice):
    for index in range(22):
        spec_experiment(alice, name=f"exp {index}")
    first = alice_client.get("/").context["page"]
    second = alice_client.get("/", {"page": 2}).context["page"]
    assert len(first.object_list) == 20 and len(second.object_list) == 2


def test_detail_links_each_run_to_its_page(alice_client, alice):
    experiment = spec_experiment(alice, seeds=[1, 2])
    html = alice_client.get(experiment.get_absolute_url()).content.decode()
    for run in experiment.runs.all():
        assert f'href="{reverse("run_detail", args=[run.pk])}"' in html
        assert run.label in html


def test_detail_shows_the_detector_overrides_its_runs_are_judged_with(alice_client, alice):
    plain = spec_experiment(alice, seeds=[1])
    assert "Detector overrides" not in alice_client.get(plain.get_absolute_url()).content.decode()
    tuned = spec_experiment(alice, seeds=[1], detector_overrides={"grad_spike": {"tolerance": 5.0}})
    html = alice_client.get(tuned.get_absolute_url()).content.decode()
    assert re.search(r'id="detector-overrides">grad_spike:\n  tolerance: 5.0\n</pre>', html)


def test_detail_shows_each_runs_latest_success_and_reward(alice_client, alice):
    experiment = spec_experiment(alice, seeds=[1])
    run = experiment.runs.get()
    Run.objects.filter(pk=run.pk).update(latest_metrics={"train/success": 0.5, "train/reward_mean": 0.375})
    html = alice_client.get(experiment.get_absolute_url()).content.decode()
    cells = dict(re.findall(r'<td data-label="([\w ]+)">(.*?)</td>', html.split("<tbody>")[1], re.S))
    # Training's, named so: the runs table's success columns are validation's
    assert cells["Train success"].strip().endswith("0.5") and cells["Train reward"].strip() == "0.375"


def test_stop_all_stops_unfinished_runs(alice_client, alice):
    experiment = spec_experiment(alice, seeds=[1, 2, 3])
    queued, running, done = experiment.runs.order_by("id")
    Run.objects.filter(pk=running.pk).update(status="running")
    Run.objects.filter(pk=done.pk).update(status="completed")
    response = alice_client.post(reverse("experiment_stop", args=[experiment.pk]), follow=True)
    assert response.redirect_chain[0][1] == 302
    assert "Stopped 1 queued run; asked 1 running run to stop at its next step." in response.content.decode()
    statuses = dict(experiment.runs.values_list("pk", "status"))
    assert statuses == {queued.pk: "stopped", running.pk: "running", done.pk: "completed"}
    assert Run.objects.get(pk=running.pk).stop_requested
    assert alice_client.get(reverse("experiment_stop", args=[experiment.pk])).status_code == 405


def test_the_preset_help_says_the_clip_higher_note_once(alice_client):
    html = alice_client.get("/experiments/new/").content.decode()
    assert html.count("Clip-higher (eps_high 0.28) only acts") == 1


def test_the_experiments_address_leads_to_the_list(alice_client):
    response = alice_client.get("/experiments/?archived=1")
    assert response.status_code == 302 and response["Location"] == "/?archived=1"


def test_the_preset_values_shown_are_those_of_the_chosen_environment(alice_client):
    html = alice_client.get(reverse("experiment_new")).content.decode()
    shown = {
        name: yaml.safe_load(unescape(text))
        for name, text in re.findall(r'<pre class="code" data-preset="([^"]+)">(.*?)</pre>', html, re.S)
    }
    assert shown["starpo frozenlake"]["env"]["name"] == "frozenlake"
    assert shown["starpo frozenlake"]["rollout"]["max_turns"] == 5  # FrozenLake's episode shape
    assert shown["starpo bandit"]["rollout"]["max_turns"] == 1  # Bandit: one pull
    assert shown["grpo sokoban"]["algorithm"]["advantage"] == "grpo"


def test_each_field_names_its_help_and_its_error_for_screen_readers(alice_client):
    html = alice_client.post(reverse("experiment_new"), {"name": "", "seeds": "x"}).content.decode()
    for name in ("name", "seeds"):
        described = re.search(rf'<input[^>]*id="id_{name}"[^>]*>', html).group(0)
        for target in re.search(r'aria-describedby="([^"]+)"', described).group(1).split():
            assert f'id="{target}"' in html, (name, target)


def test_the_runs_part_is_the_table_alone_and_live_while_a_run_is_unfinished(alice_client, alice, bob):
    experiment = spec_experiment(alice, seeds=[1, 2], steps=10)
    first, second = experiment.runs.order_by("id")
    Run.objects.filter(pk=first.pk).update(status="running", step=4)
    url = reverse("experiment_detail", args=[experiment.pk])

    part = alice_client.get(url, {"part": "runs"}).content.decode()
    assert part.lstrip().startswith("<div") and "<html" not in part and "Alert settings" not in part
    assert 'data-live-part="runs"' in part and f'data-live-url="{url}" data-live>' in part
    assert "4 / 10" in part and "1 running" in part

    Run.objects.filter(pk__in=[first.pk, second.pk]).update(status="completed", step=10)
    finished = alice_client.get(url, {"part": "runs"}).content.decode()
    assert f'data-live-url="{url}">' in finished and "2 completed" in finished  # no data-live: polling ends

    page = alice_client.get(url).content.decode()
    assert f'data-live-url="{url}">' in page and "live_part.js" in page
    answer = alice_client.get(url, {"part": "everything"})
    assert answer.status_code == 400 and b"part: 'everything' is not a choice (runs)" in answer.content
    alice_client.force_login(bob)
    assert alice_client.get(url, {"part": "runs"}).status_code == 404


def test_the_experiment_list_part_is_live_while_a_listed_experiment_trains(alice_client, alice):
    experiment = spec_experiment(alice, seeds=[1], steps=10)
    part = alice_client.get("/", {"part": "experiments"}).content.decode()
    assert 'data-live-part="experiments" data-live>' in part and "1 queued" in part and "<html" not in part
    experiment.runs.update(status="completed", step=10)
    part = alice_client.get("/", {"part": "experiments"}).content.decode()
    assert 'data-live-part="experiments">' in part and "1 completed" in part
    assert alice_client.get("/", {"part": "runs"}).status_code == 400


def test_resume_stopped_runs_queues_the_experiments_stopped_runs_again(
    alice_client, alice, bob, purge_broker, settings, tmp_path
):
    from django.utils import timezone

    settings.CHECKPOINT_ROOT = tmp_path
    experiment = spec_experiment(alice, seeds=[1, 2, 3, 4], steps=10)
    first, second, done, hidden = experiment.runs.order_by("id")
    make_checkpoint(first, 2)  # the second stopped before its first checkpoint
    Run.objects.filter(pk__in=[first.pk, second.pk, hidden.pk]).update(status="stopped", step=3)
    Run.objects.filter(pk=done.pk).update(status="completed", step=10)
    Run.objects.filter(pk=hidden.pk).update(archived_at=timezone.now())
    url = reverse("experiment_detail", args=[experiment.pk])
    assert "Resume stopped runs</button>" in alice_client.get(url).content.decode()

    resume = reverse("experiment_resume", args=[experiment.pk])
    alice_client.force_login(bob)
    assert alice_client.post(resume).status_code == 404
    alice_client.force_login(alice)
    page = alice_client.post(resume, follow=True).content.decode()
    assert "Resumed 2 stopped runs: 1 continues from its last checkpoint, 1 without one from step 0." in page
    statuses = dict(experiment.runs.values_list("pk", "status"))
    assert [statuses[run.pk] for run in (first, second, done, hidden)] == [
        "queued",
        "queued",
        "completed",
        "stopped",
    ]
    assert "Resume stopped runs</button>" not in page  # the archived one is not on the page
