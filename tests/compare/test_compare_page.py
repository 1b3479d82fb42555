"""The compare page: summary table, config diff, notices for runs it cannot show, shareable URL."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import make_event, make_experiment, make_run, points, trained_run
from webapp.compare import aggregates
from webapp.compare.aggregates import flatten
from webapp.compare.selection import MAX_RUNS
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint


@pytest.fixture
def three(alice):
    first = make_experiment(alice, "lr sweep")
    second = make_experiment(alice, "grpo try")
    start = timezone.now() - timedelta(hours=2)
    a = trained_run(
        first,
        "seed=1 optim.actor_lr=0.0007",
        overrides={"optim.actor_lr": 0.0007, "seed": 1},
        step=200,
        started_at=start,
        finished_at=start + timedelta(hours=4),
        device="cuda:0 (H100)",
    )
    b = trained_run(
        first,
        "seed=2 optim.actor_lr=0.0007",
        overrides={"optim.actor_lr": 0.0007, "seed": 2},
        step=50,
        status=Run.Status.RUNNING,
        started_at=start,
        heartbeat_at=start + timedelta(minutes=30),
    )
    c = trained_run(second, "seed=1", preset="grpo", overrides={"seed": 1})
    points(a, "train/success", {0: 0.1, 10: 0.8, 20: 0.4, 30: float("nan")})
    points(a, "val/success", {0: 0.0, 20: 0.35})
    make_event(a, 12, "warning")
    make_event(a, 25, "warning", rule="entropy")
    make_event(a, 28, "collapse")
    return a, b, c


def page(client, runs):
    return client.get("/compare", {"runs": runs})


def summary_row(html: str, run) -> str:
    start = html.index(f'<tr data-run="{run.pk}">')
    return html[start : html.index("</tr>", start)]


def test_summary_has_final_best_val_events_speed_and_device(alice_client, three):
    a, b, c = three
    response = page(alice_client, f"{a.pk},{b.pk},{c.pk}")
    assert response.status_code == 200
    html = response.content.decode()
    row = summary_row(html, a)
    cells = [part.split(">", 1)[1].split("<", 1)[0] for part in row.split("<td")[5:12]]
    # final = last finite success (0.4; the NaN at 30 is a gap), best 0.8, last val 0.35,
    # first warning 12, collapse 28, 200 steps in 4 h = 50 steps/h
    assert cells[:3] == ["0.4", "0.8", "0.35"]
    assert cells[3] == "12" and "step 28" in row and "50</td>" in row and "cuda:0 (H100)" in row
    assert 'data-sort="0.4"' in row and 'data-sort="28.0"' in row
    row_b = summary_row(html, b)
    assert "100</td>" in row_b  # running: 50 steps by the last heartbeat, 30 min after the start
    # final, best, val, warning, collapse, device and each rule's lead (b never collapsed): sorted last
    assert row_b.count('data-sort=""') == 6 + html.count('class="lead-column"')


def test_a_run_trained_elsewhere_is_paced_by_the_seconds_per_step_it_logged(alice):
    """A script that backfilled 200 steps of ~6 s in 2 seconds read 360,000 steps an hour from its start and
    heartbeat; its clock key (Run.clock_key, here TRL's step_time) says 600. A run
    trained here keeps its wall clock: its start to finish is what training took on its worker."""
    start = timezone.now() - timedelta(seconds=2)
    mlflow = make_experiment(alice, "mlflow", imported=True)
    backfilled = make_run(
        alice, experiment=mlflow, config={}, status=Run.Status.COMPLETED, step=200,
        started_at=start, finished_at=start + timedelta(seconds=2), latest_metrics={"step_time": 6.0},
    )  # fmt: skip
    points(backfilled, "step_time", {step: 5.0 + step % 2 * 2 for step in range(200)})  # 5 s, 7 s, ...
    points(backfilled, "loss", {step: 1.0 for step in range(200)})
    unclocked = make_run(
        alice, experiment=mlflow, config={}, status=Run.Status.COMPLETED, step=200,
        started_at=start, finished_at=start + timedelta(hours=1), latest_metrics={"loss": 1.0},
    )  # fmt: skip
    here = trained_run(
        make_experiment(alice, "here"), step=200, started_at=start, finished_at=start + timedelta(hours=2),
        latest_metrics={"time/step_s": 1.0},
    )  # fmt: skip
    points(here, "time/step_s", {step: 1.0 for step in range(200)})
    summaries = aggregates.summaries([backfilled, unclocked, here])
    # 1,200 s for 200 steps
    assert summaries[backfilled.pk]["steps_per_hour"] == pytest.approx(600)
    assert summaries[unclocked.pk]["steps_per_hour"] == pytest.approx(200)  # no clock logged: its wall clock
    assert summaries[here.pk]["steps_per_hour"] == pytest.approx(100)


def test_the_runs_table_downloads_as_csv_with_every_digit_and_the_differing_config(alice_client, three):
    a, b, c = three
    ids = f"{a.pk},{b.pk},{c.pk}"
    html = page(alice_client, ids).content.decode()
    assert f'href="/compare/summary.csv?runs={ids}"' in html
    assert f'href="/runs/export.csv?runs={ids}"' in html
    response = alice_client.get("/compare/summary.csv", {"runs": ids})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert f'filename="compare-{a.pk}-{b.pk}-{c.pk}.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["run_id"] for row in rows] == [str(a.pk), str(b.pk), str(c.pk)]
    first = rows[0]
    assert (first["final_success"], first["best_success"], first["val_success"]) == ("0.4", "0.8", "0.35")
    assert (first["first_warning"], first["first_collapse"], first["steps_per_hour"]) == ("12", "28", "50.0")
    # each warning rule's lead to the collapse, and the fields the runs differ in (not those they share)
    assert (first["lead:reward_std_drop"], first["lead:entropy"]) == ("16", "3")
    assert first["optim.actor_lr"] == "0.0007" and rows[2]["algorithm.advantage"] == "grpo"
    assert "rollout.max_turns" not in first
    assert rows[1]["final_success"] == "" and rows[1]["status"] == "running"


@pytest.mark.parametrize("runs", ["", "abc", "999999"])
def test_a_csv_of_no_run_or_of_runs_not_yours_says_why(alice_client, bob, three, runs):
    bobs = trained_run(make_experiment(bob, "secret"), "seed=9")
    response = alice_client.get("/compare/summary.csv", {"runs": runs})
    assert response.status_code == (404 if runs.isdigit() else 400)
    assert response.content.decode().startswith("runs: ")
    foreign = alice_client.get("/compare/summary.csv", {"runs": f"{three[0].pk},{bobs.pk}"})
    assert foreign.status_code == 404
    assert foreign.content.decode() == f"runs: run {bobs.pk} is not among your runs"


def test_config_diff_marks_only_the_differing_fields(alice_client, three):
    a, b, c = three
    html = page(alice_client, f"{a.pk},{b.pk},{c.pk}").content.decode()
    diff = html[html.index('id="config-diff"') :]
    differing = {part.split("</code>")[0] for part in diff.split('<tr class="differs"><th><code>')[1:]}
    # a and b differ in seed; grpo (c) differs from starpo in the advantage and the learning rate
    assert {"seed", "optim.actor_lr", "algorithm.advantage"} <= differing
    assert "env.name" not in differing and "rollout.group_size" not in differing
    assert '<tr class="same"><th><code>env.name</code>' in diff
    assert 'id="diff-only" checked' in html and 'class="data config-diff only-diff"' in html


def test_config_diff_leaves_imported_runs_out_of_the_comparison(alice_client, alice):
    trained = make_experiment(alice, "trained")
    imported = make_experiment(alice, "imported", imported=True)
    runs = [
        trained_run(trained, "seed=1", overrides={"seed": 1}),
        trained_run(trained, "seed=2", overrides={"seed": 2}),
        make_run(alice, experiment=imported, label="imported: a.csv", config={}, status=Run.Status.COMPLETED),
    ]
    html = alice_client.get("/compare", {"runs": ",".join(str(run.pk) for run in runs)}).content.decode()
    diff = html.split('id="config-diff"')[1].split("</table>")[0]
    differing = {part.split("</code>")[0] for part in diff.split('<tr class="differs"><th><code>')[1:]}
    assert differing == {"seed"}
    fields = len(flatten(runs[0].config))
    assert f"(1 of {fields} fields differ; #{runs[2].pk} imported, with no config to compare)" in html

    # One run with a config and an imported one: nothing to compare, not "the same config".
    html = alice_client.get("/compare", {"runs": f"{runs[0].pk},{runs[2].pk}"}).content.decode()
    assert "Only one of these runs has a config" in html and "The runs have the same config" not in html


def test_group_by_offers_the_differing_fields_but_not_seed(alice_client, three):
    a, b, c = three
    response = page(alice_client, f"{a.pk},{b.pk},{c.pk}")
    fields = response.context["page"]["group_fields"]
    assert fields[:1] == ["experiment"] and "algorithm.advantage" in fields and "seed" not in fields


def test_missing_and_foreign_runs_get_the_same_notice(client, alice, bob, three):
    a, _, _ = three
    bobs = trained_run(make_experiment(bob, "secret"), "seed=9")
    client.force_login(alice)
    foreign = page(client, f"{a.pk},{bobs.pk}").content.decode()
    missing = page(client, f"{a.pk},{bobs.pk + 1000}").content.decode()
    assert f"Run {bobs.pk} is not among your runs and left out." in foreign
    assert f"Run {bobs.pk + 1000} is not among your runs and left out." in missing
    assert "secret" not in foreign and "seed=9" not in foreign

    def notices(html):
        return html[
            html.index('id="compare-notices"') : html.index("</ul>", html.index('id="compare-notices"'))
        ]

    assert notices(foreign).replace(str(bobs.pk), "ID") == notices(missing).replace(str(bobs.pk + 1000), "ID")


def test_non_numeric_ids_get_a_message_not_a_500(alice_client, three):
    a, _, _ = three
    response = page(alice_client, f"{a.pk},abc,<b>")
    assert response.status_code == 200
    html = response.content.decode()
    assert "&#x27;abc&#x27;, &#x27;&lt;b&gt;&#x27; are not run ids" in html
    assert f'data-run="{a.pk}"' in html


def test_more_runs_than_the_page_shows_get_a_clear_message(alice_client, alice):
    experiment = make_experiment(alice)
    runs = [trained_run(experiment, f"seed={s}", overrides={"seed": s}) for s in range(MAX_RUNS + 3)]
    response = page(alice_client, ",".join(str(run.pk) for run in runs))
    html = response.content.decode()
    assert f"You selected {MAX_RUNS + 3} runs; a compare page shows at most {MAX_RUNS}" in html
    assert len(response.context["runs"]) == MAX_RUNS and html.count("<tr data-run=") == MAX_RUNS


def test_checkbox_form_redirects_to_one_shareable_address(alice_client, three):
    a, b, c = three
    response = alice_client.get(f"/compare?runs={c.pk}&runs={a.pk}&runs={b.pk}&runs={a.pk}")
    assert response.status_code == 302 and response["Location"] == f"/compare?runs={c.pk},{a.pk},{b.pk}"
    page_data = alice_client.get(response["Location"]).context["page"]
    assert [run["id"] for run in page_data["runs"]] == [c.pk, a.pk, b.pk]
    assert len({run["color"] for run in page_data["runs"]}) == 3


def test_empty_selection_explains_how_to_select(alice_client):
    html = alice_client.get("/compare").content.decode()
    assert 'id="compare-empty"' in html and "compare.js" not in html


def test_login_required(client, three):
    response = client.get(f"/compare?runs={three[0].pk}")
    assert response.status_code == 302 and "login" in response["Location"]


def other_keys_offered(html: str) -> list[str]:
    import re

    return re.findall(r'class="extra-key" value="([^"]*)"', html)


def test_other_logged_keys_are_offered_and_charted_when_few(alice_client, alice):
    experiment = make_experiment(alice, "trl imports")
    a = trained_run(experiment, "a")
    b = trained_run(experiment, "b")
    for run, key in ((a, "train/success"), (a, "train/loss"), (b, "col10"), (b, "col2")):
        MetricPoint.write_batch(run.pk, [(0, key, 1.0)], latest_metrics=True)
    page_data = page(alice_client, f"{a.pk},{b.pk}").context["page"]
    # the union over the runs, standard chart keys left out, in natural order (col2 before col10)
    assert page_data["other_keys"] == ["col2", "col10", "train/loss"]
    assert page_data["extra"] == ["col2", "col10", "train/loss"]  # few: all charted
    html = alice_client.get("/compare", {"runs": f"{a.pk},{b.pk}", "extra": ["train/loss", "nope"]}).content
    html = html.decode()
    assert other_keys_offered(html) == ["col2", "col10", "train/loss"]
    assert 'value="train/loss" checked' in html and 'value="col2" checked' not in html
    assert "<code>train/<wbr>loss</code>" in html  # may wrap after the slash, not inside a word
    assert "extra: &#x27;nope&#x27;: not logged by these runs" in html
    empty = alice_client.get("/compare", {"runs": f"{a.pk},{b.pk}", "extra": ""}).context["page"]
    assert empty["extra"] == []


def test_many_other_keys_are_offered_but_not_charted_until_ticked(alice_client, alice):
    from webapp.compare.views import MAX_EXTRA, OTHER_KEYS_CHARTED

    run = trained_run(make_experiment(alice, "wide import"), "wide")
    many = [f"col{i}" for i in range(MAX_EXTRA + 5)]
    points(run, many[0], {0: 1.0})
    run.latest_metrics = dict.fromkeys(many, 1.0)
    run.save()
    assert len(many) > OTHER_KEYS_CHARTED
    assert page(alice_client, str(run.pk)).context["page"]["extra"] == []
    response = alice_client.get("/compare", {"runs": str(run.pk), "extra": many})
    assert response.context["page"]["extra"] == many[:MAX_EXTRA]
    assert f"at most {MAX_EXTRA} other keys are charted at once" in response.content.decode()


def test_extra_at_names_the_keys_by_their_places_in_the_picker(alice_client, alice):
    run = trained_run(make_experiment(alice, "wide import"), "wide")
    many = [f"col{i}" for i in range(20)]  # the picker's order is natural: col2 before col10
    points(run, many[0], {0: 1.0})
    run.latest_metrics = dict.fromkeys(many, 1.0)
    run.save()

    def asked(value):
        response = alice_client.get("/compare", {"runs": str(run.pk), "extra_at": value})
        return response.context["page"]["extra"], response.content.decode()

    assert asked("0-2,10")[0] == ["col0", "col1", "col2", "col10"]
    keys, html = asked("18-30")
    assert keys == ["col18", "col19"] and "places beyond the 20 other keys" in html
    for bad in ("x", "1-²", "-1", "9" * 7):
        keys, html = asked(bad)
        assert keys == [] and "is not a list of places like 0-5,9" in html


def test_config_diff_tells_a_missing_field_from_an_empty_string(alice_client, alice):
    experiment = make_experiment(alice, "warm starts")
    with_empty = trained_run(experiment, "a", overrides={"seed": 1})
    with_empty.config = {**with_empty.config, "note": ""}
    with_empty.save()
    without = trained_run(experiment, "b", overrides={"seed": 2})
    html = page(alice_client, f"{with_empty.pk},{without.pk}").content.decode()
    row = html.split("<th><code>note</code></th>")[1].split("</tr>")[0]
    # the dash is read out as what it means: a screen reader says nothing for "–", or "en dash"
    assert row == (
        '<td>&quot;&quot;</td><td><span class="muted" title="not in this run\'s config"><span aria-hidden="true">–'
        '</span><span class="visually-hidden">not in this run\'s config</span></span></td>'
    )


@pytest.mark.parametrize(
    "value, shown",
    [
        (0.3125, "0.313"),
        (-0.3125, "-0.313"),
        (0.0625, "0.0625"),
        (999.5, "1e+03"),
        (1234567, "1.23e+06"),
        (0.00012345, "0.000123"),
        (0.0, "0"),
        (float("nan"), "–"),
        (None, "–"),
    ],
)
def test_summary_numbers_round_a_tie_away_from_zero_as_the_page_does(value, shown):
    from webapp.compare.templatetags.compare import number

    assert number(value) == shown


def test_a_whole_number_cell_groups_its_thousands():
    from webapp.compare.templatetags.compare import number

    assert [number(v, "0") for v in (2131477.4, 999.6, 12.0, float("nan"))] == [
        "2,131,477",
        "1,000",
        "12",
        "–",
    ]


def test_mlflow_runs_compare_and_group_by_their_params(alice_client, alice):
    from django.utils import timezone

    from webapp.tracking.models import ExternalExperiment, ExternalRun

    experiment = ExternalExperiment.create(alice, "trl sweep")
    runs = [ExternalRun.start(experiment, f"lr{i}", {}, "alice", timezone.now()) for i in range(2)]
    for i, external in enumerate(runs):
        external.log([], {"learning_rate": f"1e-0{i + 5}", "beta": "0.04"}, {})
    response = page(alice_client, ",".join(str(external.run_id) for external in runs))
    html = response.content.decode()
    assert "imported, with no config to compare" not in html
    assert "(1 of 2 fields differ)" in html
    assert response.context["page"]["group_fields"] == ["learning_rate"]


def test_runs_asked_for_with_and_without_their_environments_defaults_store_the_same_config(alice):
    from tests.factories import spec_experiment

    listed = spec_experiment(alice, env={"name": "bandit", "params": {"low_risk_name": "Phoenix"}}, seeds=[1])
    defaults = spec_experiment(alice, env={"name": "bandit", "params": {}}, seeds=[1])
    first, second = listed.runs.get(), defaults.runs.get()
    assert first.config["env"] == second.config["env"]  # every parameter stored, defaults filled in
    assert aggregates_differing([first, second]) == []


def aggregates_differing(runs):
    from webapp.compare.aggregates import config_diff

    return [row.key for row in config_diff(runs) if row.differs]


def test_a_view_in_the_address_the_page_cannot_follow_is_named_with_what_it_shows(alice_client, three):
    """?draw=99 drew no run and said nothing; ?group=, ?smooth= and ?xrange= were dropped without a word."""
    a, b, c = three
    runs = f"{a.pk},{b.pk}"
    ask = {"runs": runs, "draw": "99", "group": "nope", "smooth": "-3", "xrange": "5,1", "x": "minutes"}
    notices = alice_client.get("/compare", ask).context["notices"]
    assert notices == [
        "draw: '99': not among the runs compared here; every run is drawn.",
        "group: 'nope': these runs differ in no field to group by; not grouped.",  # seeds are not grouped by
        "x: expected step or time, got 'minutes'; the x axis is the step.",
        "smooth: expected a number from 0 to 0.99, got '-3'; no smoothing.",
        "xrange: expected two increasing steps like 10,50, got '5,1'; every step is shown.",
    ]
    partly = alice_client.get("/compare", {"runs": runs, "draw": f"{a.pk},99"}).context["notices"]
    assert partly == ["draw: '99': not among the runs compared here; left out."]
    digits = alice_client.get(
        "/compare", {"runs": runs, "draw": f"{a.pk},\u00b2"}
    )  # isdigit(), not int(): a 500
    assert digits.context["notices"] == ["draw: '\u00b2': not among the runs compared here; left out."]
    switches = alice_client.get("/compare", {"runs": runs, "bands": "7", "align": "yes"}).context["notices"]
    assert switches == [
        "align: expected 1 (on) or 0 (off), got 'yes'; not aligned at onset.",
        "bands: expected 1 (on) or 0 (off), got '7'; bands shown.",
    ]
    assert alice_client.get("/compare", {"runs": runs, "bands": "0", "align": "0"}).context["notices"] == []
    hide = alice_client.get("/compare", {"runs": runs, "hide": f"run-{a.pk},run-{c.pk},group-1,x"})
    assert hide.context["notices"] == [
        f"hide: 'run-{c.pk}', 'x': no line of these runs (run-<id> or group-<n>); not hidden."
    ]
    fine = {
        "runs": runs,
        "draw": "",
        "group": "",
        "smooth": "0.6",
        "xrange": "10,50.5",
        "hide": f"run-{b.pk}",
        "x": "time",
    }
    assert alice_client.get("/compare", fine).context["notices"] == []
    assert alice_client.get("/compare", {**fine, "align": "1"}).context["notices"] == [
        "x: 'time' with align=1: aligned at onset, the x axis counts steps from each collapse."
    ]
    # ?sort= names a column of the runs table as its CSV does, a rule's Lead column too
    sorts = ("final_success", "-steps_per_hour", "lead:entropy", "-run")
    for sort in sorts:
        assert alice_client.get("/compare", {"runs": runs, "sort": sort}).context["notices"] == [], sort
    unknown = alice_client.get("/compare", {"runs": runs, "sort": "-lead:nope"}).context["notices"]
    assert unknown == [
        "sort: '-lead:nope' is not a column of the runs table (one of run, experiment, status, final_success, "
        "best_success, val_success, first_warning, first_collapse, steps_per_hour, device, "
        "lead:entropy, lead:reward_std_drop, '-' first for descending); not sorted."
    ]
    grouped = {"runs": f"{runs},{c.pk}", "group": "nope"}
    assert (
        alice_client.get("/compare", grouped)
        .context["notices"][0]
        .startswith("group: 'nope' is not a field these runs differ in (one of experiment, ")
    )
