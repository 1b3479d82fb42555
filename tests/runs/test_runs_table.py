"""The runs table (/runs/): summary metrics from the database, server-side sort, filters and paging,
tags, notes, rename, soft archive and restore, multi-run CSV export. Always the user's own runs."""

import csv
import io
import math
import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from tests.factories import table_run
from tests.helpers import on_sqlite
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint
from webapp.runs import table
from webapp.runs.forms import RunEditForm, RunTableForm


def table_runs(user, **query):
    form = RunTableForm(query)
    assert form.is_valid(), form.errors
    return list(form.runs(user))


def test_summary_metrics_skip_non_finite_values_and_read_the_first_collapse(alice):
    run = table_run(alice, status=Run.Status.COMPLETED)
    MetricPoint.upsert(
        run.pk,
        [
            (0, "val/success", 0.2),
            (10, "val/success", 0.7),
            (20, "val/success", 0.4),
            (30, "val/success", math.nan),
            (0, "train/success", 0.1),
            (30, "train/success", 0.6),
            (31, "train/success", math.inf),
        ],
    )
    for step, level in ((25, "warning"), (40, "collapse"), (33, "collapse")):
        DetectorEvent.objects.create(run=run, step=step, level=level, rule=f"r{step}", message="m")
    start = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(started_at=start, finished_at=start + timedelta(seconds=90))

    [row] = table_runs(alice)
    assert (row.final_val_success, row.best_val_success, row.final_train_success) == (0.4, 0.7, 0.6)
    assert row.collapse_step == 33
    assert row.duration == timedelta(seconds=90)
    assert table.summary(row)["duration_seconds"] == 90


def test_sort_by_a_summary_metric_puts_runs_without_a_value_last_both_ways(alice):
    low, high, none = (table_run(alice, label=label) for label in ("low", "high", "none"))
    MetricPoint.upsert(low.pk, [(0, "val/success", 0.1)])
    MetricPoint.upsert(high.pk, [(0, "val/success", 0.9)])
    assert [run.label for run in table_runs(alice, sort="-best_val")] == ["high", "low", "none"]
    assert [run.label for run in table_runs(alice, sort="best_val")] == ["low", "high", "none"]
    assert [run.label for run in table_runs(alice, sort="name")] == ["high", "low", "none"]


def test_sort_by_preset_puts_runs_without_one_last_both_ways(alice, alice_client):
    # A run logged through MLflow or imported has no preset (shown "–"): sorted A to Z by Preset, a
    # tester's 40 such runs came first, before every starpo run.
    for label, preset in (("mlflow", ""), ("s", "starpo-s"), ("p", "starpo")):
        table_run(alice, label=label, preset=preset)

    def shown(sort):
        html = alice_client.get(f"/runs/?sort={sort}").content.decode()
        return re.findall(r'<td data-col="preset">\s*(.*?)\s*</td>', html)

    assert shown("preset") == ["starpo", "starpo-s", "–"]
    assert shown("-preset") == ["starpo-s", "starpo", "–"]


NAMES = ["seed 10", "Seed 3", "seed 2", "adam b", "Adam a"]
NATURAL = ["Adam a", "adam b", "seed 2", "Seed 3", "seed 10"]


def test_sort_by_name_reads_numbers_as_numbers_and_ignores_case(alice):
    for label in NAMES:
        table_run(alice, label=label)
    assert [run.label for run in table_runs(alice, sort="name")] == NATURAL
    assert [run.label for run in table_runs(alice, sort="-name")] == NATURAL[::-1]


NATURAL_ON_SQLITE = f"""
from django.contrib.auth import get_user_model
from tests.factories import table_run
from tests.helpers import on_sqlite
from webapp.runs.forms import RunTableForm
user = get_user_model().objects.create_user("dora", "dora@example.com", "pw-dora-123")
for label in {NAMES!r}:
    table_run(user, label=label)
form = RunTableForm({{"sort": "name"}})
assert form.is_valid(), form.errors
print("ORDER", [run.label for run in form.runs(user)])
for label, lr in (("text", "auto"), ("high", "2e-3"), ("low", 0.0003), ("more", 0.01)):
    table_run(user, experiment="lr", label=label, config={{"optim": {{"actor_lr": lr}}}})
form = RunTableForm({{"sort": "-config:optim.actor_lr", "experiment": user.experiments.get(name="lr").pk}})
assert form.is_valid(), form.errors
print("CONFIG", [run.label for run in form.runs(user)])
"""


@pytest.mark.slow
def test_sort_by_name_and_by_config_values_on_sqlite_too(tmp_path):
    printed = on_sqlite(tmp_path, NATURAL_ON_SQLITE).splitlines()
    assert f"ORDER {NATURAL!r}" in printed
    assert f"CONFIG {['more', 'high', 'low', 'text']!r}" in printed


def test_sort_by_a_config_field_is_numeric(alice):
    for ratio in (0.5, 0.25, 1.0):
        table_run(
            alice, label=f"r={ratio}", config={"algorithm": {"filter": "top_ratio", "filter_ratio": ratio}}
        )
    assert [run.label for run in table_runs(alice, sort="filter_ratio")] == ["r=0.25", "r=0.5", "r=1.0"]


def test_sort_by_any_config_value_reads_numbers_as_numbers_text_after_and_missing_last(alice):
    # Ours nested; an MLflow run's params flat and as text ("1e-05"), veRL's with dots in the key itself.
    configs = {
        "ours-3e-4": {"optim": {"actor_lr": 3e-4}},
        "trl-1e-05": {"learning_rate": "1e-05"},
        "verl-2e-3": {"optim.actor_lr": "2e-3"},
        "ours-0.01": {"optim": {"actor_lr": 0.01}},
        "auto": {"optim": {"actor_lr": "auto"}},
        "none": {"seed": 1},
        # written by Postgres without an exponent: 1/3 with 30 decimals, 1e25 with 26 digits (a reviewer's)
        "third": {"optim": {"actor_lr": 1 / 3}},
        "huge": {"optim": {"actor_lr": 1e25}},
    }
    for label, config in configs.items():
        table_run(alice, label=label, config=config)
    assert table.config_value(configs["trl-1e-05"], "learning_rate") == "1e-05"
    assert table.config_value(configs["verl-2e-3"], "optim.actor_lr") == "2e-3"
    assert table.config_value(configs["none"], "optim.actor_lr") is None
    ascending = ["ours-3e-4", "verl-2e-3", "ours-0.01", "third", "huge", "auto", "trl-1e-05", "none"]
    assert [run.label for run in table_runs(alice, sort="config:optim.actor_lr")] == ascending
    # Descending: numbers largest first, then text; runs without it still last (newest first among them)
    descending = ["huge", "third", "ours-0.01", "verl-2e-3", "ours-3e-4", "auto", "none", "trl-1e-05"]
    assert [run.label for run in table_runs(alice, sort="-config:optim.actor_lr")] == descending
    assert [run.label for run in table_runs(alice, sort="config:learning_rate")][0] == "trl-1e-05"


def test_a_run_that_keeps_every_group_has_no_filter_ratio(alice_client, alice):
    """starpo's config carries filter_ratio 0.25 and never reads it: the column showed 0.25 for every run."""
    kept = table_run(alice, label="starpo", config={"algorithm": {"filter": "none", "filter_ratio": 0.25}})
    filtered = table_run(
        alice, label="starpo-s", config={"algorithm": {"filter": "top_ratio", "filter_ratio": 0.5}}
    )
    assert [run.label for run in table_runs(alice, sort="-filter_ratio")] == [
        "starpo-s",
        "starpo",
    ]  # nulls last
    html = alice_client.get("/runs/").content.decode()

    def cell(run):
        row = html[html.index(f'<tr data-run="{run.pk}">') :]
        return row[row.index('data-col="filter_ratio"') :].split("</td>")[0].split(">", 1)[1].strip()

    assert (cell(filtered), cell(kept)) == ("0.5", "–")


def test_filters_by_status_env_algorithm_tag_and_text(alice):
    table_run(alice, label="a", env="frozenlake", advantage="grpo", tags=["baseline", "sweep-3"])
    table_run(
        alice,
        label="b",
        env="frozenlake",
        status=Run.Status.RUNNING,
        tags=["baseline-2"],
        notes="lr too high",
    )
    table_run(alice, label="c", experiment="Other", env="bandit")
    labels = lambda **query: sorted(run.label for run in table_runs(alice, **query))  # noqa: E731
    assert labels(env="frozenlake") == ["a", "b"]
    assert labels(algorithm="grpo") == ["a"]
    assert labels(status="running") == ["b"]
    assert labels(tag="baseline") == ["a"]  # a whole tag, not a prefix of baseline-2
    assert labels(q="TOO HIGH") == ["b"]
    assert labels(q="other") == ["c"]
    assert labels(env="frozenlake", status="queued") == ["a"]
    # A filter no run can match is named, not an empty table: the estimators are lower-case, as are tags
    errors = RunTableForm({"algorithm": "GRPO", "tag": "Baseline"}).errors
    assert errors["algorithm"] == ["must be one of: ppo, grpo, drgrpo; got 'GRPO'"]
    assert errors["tag"] == ["'Baseline' is not a tag: tags are lower-case, 'baseline'"]


def test_the_experiment_filter_offers_the_users_experiments_and_tells_two_of_one_name_apart(
    alice, bob, alice_client
):
    from webapp.experiments.models import Experiment

    table_run(alice, experiment="Bandit sweep")
    older, newer = (Experiment.objects.create(owner=alice, name="Sokoban grid", config={}) for _ in range(2))
    Experiment.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(days=7))
    older.refresh_from_db()
    for experiment in (older, newer):
        Run.objects.create(experiment=experiment, label="seed=1", config={})
    table_run(bob, experiment="Bob's secret")
    html = alice_client.get("/runs/").content.decode()
    offered = re.findall(r'<option value="(\d+)"[^>]*>([^<]*)</option>', html.split('name="experiment"')[1])
    assert offered == [
        (str(newer.pk), f"Sokoban grid ({newer.created_at:%Y-%m-%d %H:%M})"),
        (str(alice.experiments.get(name="Bandit sweep").pk), "Bandit sweep"),
        (str(older.pk), f"Sokoban grid ({older.created_at:%Y-%m-%d %H:%M})"),
    ]


def test_archived_runs_leave_the_list_and_come_back_when_restored(alice):
    kept, archived = table_run(alice, label="kept"), table_run(alice, label="gone")
    archived.archive()
    assert [run.label for run in table_runs(alice)] == ["kept"]
    assert [run.label for run in table_runs(alice, archived="true")] == ["gone"]
    archived.restore()
    assert archived.archived_at is None
    assert sorted(run.label for run in table_runs(alice)) == ["gone", "kept"]
    assert MetricPoint.objects.count() == 0 and Run.objects.count() == 2  # nothing deleted
    assert kept.archived_at is None


def test_selected_runs_are_archived_and_restored_together_or_not_at_all(alice, bob, alice_client):
    runs = [table_run(alice, label=label) for label in ("a", "b", "c", "d")]
    already = runs[3]
    already.archive()
    bobs = table_run(bob, label="bob's")

    def post(action, ids):
        response = alice_client.post(
            "/runs/archive-selected", {"action": action, "runs": ",".join(map(str, ids))}, follow=True
        )
        return [str(message) for message in response.context["messages"]]

    # Another user's run among them: nothing archived, the refusal said.
    assert post("archive", [runs[0].pk, bobs.pk]) == [
        f"Nothing archived: runs: run {bobs.pk} is not among your runs"
    ]
    assert post("archive", []) == ["Nothing archived: runs: select between 1 and 1000 runs"]
    assert post("hide", [runs[0].pk]) == ["Nothing archived: action: expected archive or restore, got 'hide'"]
    assert not Run.objects.filter(archived_at__isnull=False).exclude(pk=already.pk).exists()

    assert post("archive", [runs[0].pk, runs[1].pk, already.pk]) == [
        "Archived 2 of the 3 selected runs (the other was archived already): a, b, d. They are listed under "
        "Archived, where they can be restored."
    ]
    assert post("archive", [already.pk]) == ["Nothing archived: the selected run was archived already: d."]
    assert [run.label for run in table_runs(alice)] == ["c"]
    assert post("restore", [runs[0].pk, runs[1].pk]) == ["Restored 2 selected runs: a, b."]
    # Each runs= field counts, as the runs table's own script sends one and a script may send several
    assert post("archive", [runs[2].pk]) and Run.objects.get(pk=runs[2].pk).archived_at is not None
    response = alice_client.post(
        "/runs/archive-selected", {"action": "restore", "runs": [runs[2].pk, already.pk]}
    )
    assert response.status_code == 302 and not Run.objects.filter(archived_at__isnull=False).exists()
    assert sorted(run.label for run in table_runs(alice)) == ["a", "b", "c", "d"]
    assert Run.objects.get(pk=bobs.pk).archived_at is None


def test_selected_archived_runs_are_deleted_together_or_not_at_all(alice, bob, alice_client):
    from tests.factories import rows_of, run_with_data

    gone = [run_with_data(alice, label=label) for label in ("a", "b")]
    active, training = table_run(alice, label="active"), table_run(alice, label="training")
    for run in (*gone, training):
        run.archive()
    Run.objects.filter(pk=training.pk).update(status=Run.Status.RUNNING)
    bobs = table_run(bob, label="bob's")
    bobs.archive()

    def post(ids):
        response = alice_client.post("/runs/delete-selected", {"runs": ",".join(map(str, ids))}, follow=True)
        return [str(message) for message in response.context["messages"]]

    # Deleting is for archived runs: an active one among them, another user's, one still training, none
    assert post([gone[0].pk, active.pk]) == [
        "Nothing deleted: active is not archived. Only archived runs are deleted from here: archive it "
        "first, or untick it."
    ]
    assert post([gone[0].pk, bobs.pk]) == [f"Nothing deleted: runs: run {bobs.pk} is not among your runs"]
    assert post([gone[0].pk, training.pk]) == [
        f"Nothing deleted: run {training.pk} is running: stop it first, then delete it once it has stopped."
    ]
    assert post([]) == ["Nothing deleted: runs: select between 1 and 1000 runs"]
    assert Run.objects.count() == 5

    assert post([gone[0].pk, gone[1].pk]) == [
        "Deleted 2 selected runs for good, with their metrics, samples and detector events: a, b."
    ]
    assert set(Run.objects.values_list("label", flat=True)) == {"active", "training", "bob's"}
    assert all(count == 0 for count in rows_of(gone[0]).values())


@pytest.mark.parametrize(
    "query, field",
    [
        ({"sort": "config"}, "sort"),
        ({"status": "done"}, "status"),
        ({"tag": "Bad Tag"}, "tag"),
        ({"page": "0"}, "page"),
        ({"page_size": "201"}, "page_size"),
        ({"archived": "yes"}, "archived"),
    ],
)
def test_bad_query_values_are_errors_naming_the_field(query, field):
    form = RunTableForm(query)
    assert not form.is_valid()
    assert list(form.errors) == [field]


def test_tags_are_parsed_checked_and_deduplicated(alice):
    run = table_run(alice)
    form = RunEditForm(
        {"name": "  best seed ", "tags": "Baseline, sweep-3 baseline", "notes": "x"}, instance=run
    )
    assert form.is_valid(), form.errors
    form.save()
    run.refresh_from_db()
    assert (run.name, run.tags, run.display_name) == ("best seed", ["baseline", "sweep-3"], "best seed")
    bad = RunEditForm({"name": "", "tags": "ok, no/slash", "notes": ""}, instance=run)
    assert not bad.is_valid()
    assert "'no/slash' is not a tag" in bad.errors["tags"][0]
    kelvin = RunEditForm({"name": "", "tags": "\u212a", "notes": ""}, instance=run)  # lower(): "k"
    assert not kelvin.is_valid() and "'\u212a' is not a tag" in kelvin.errors["tags"][0]


# ---- views ------------------------------------------------------------------------------------------


def test_page_lists_only_the_users_runs_with_their_summary(alice_client, alice, bob):
    mine = table_run(alice, label="mine", status=Run.Status.COMPLETED, tags=["keep"])
    MetricPoint.upsert(mine.pk, [(0, "val/success", 0.75), (0, "train/success", 0.125)])
    table_run(bob, label="bobs-secret-run", experiment="Bob's")
    response = alice_client.get("/runs/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "mine" in html and "0.75" in html and '<span class="tag">keep</span>' in html
    assert "0.125" in html  # 3 significant digits, as the compare and experiment pages write it (not 0.12)
    assert "bobs-secret-run" not in html and "Bob&#x27;s" not in html
    assert 'aria-sort="descending"' in html  # the default sort: newest first
    # The preset tells StarPO from StarPO-S (both "ppo" under Algorithm): shown until the user hides it.
    preset = re.search(r'<th scope="col" data-col="preset"[^>]*>', html)
    assert preset and "hidden" not in preset.group()


def test_config_columns_on_the_page_offer_the_users_own_paths_and_remove_with_their_sort(
    alice_client, alice, bob
):
    table_run(
        alice, label="grid-a", config={"algorithm": {"kl_coef": 0.001, "ema": True}, "tags": ["x", "y"]}
    )
    table_run(alice, label="trl", config={"learning_rate": "1e-05"})
    table_run(bob, label="bobs", config={"bobs_secret_key": 1})
    query = {"config": ["algorithm.kl_coef", "tags", "algorithm.ema"], "sort": "config:algorithm.kl_coef"}
    html = alice_client.get("/runs/", query).content.decode()
    offered = re.findall(r'<option value="([^"]+)">', html.split('<datalist id="config-paths">')[1])
    assert offered == ["algorithm.ema", "algorithm.kl_coef", "learning_rate", "tags"]  # not bob's
    cells = re.findall(r'<td class="config-col" title="([^"]*)">', html)
    assert cells == ["0.001", "[&quot;x&quot;, &quot;y&quot;]", "true", "–", "–", "–"]
    header = re.search(
        r'<th scope="col" class="config-col" aria-sort="ascending">\s*<a href="\?([^"]+)"', html
    )
    assert header and "sort=-config%3Aalgorithm.kl_coef" in header.group(1)
    removal = re.search(
        r'<a class="remove-column" href="\?([^"]*)" aria-label="Remove the column algorithm.kl_coef"', html
    )
    assert removal and "sort" not in removal.group(1) and removal.group(1).count("config=") == 2
    assert 'id="config-columns-empty"' not in html  # each column has a value in some run

    mistyped = alice_client.get("/runs/", {"config": ["algorithm.kl_coef", "nope.x"]}).content.decode()
    note = re.search(r'<p class="callout" id="config-columns-empty">(.*?)</p>', mistyped, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", note) == (
        "No run shown here has nope.x in its config: is the path spelled as in the config (Columns lists your "
        "latest runs' paths)?"
    )


def test_bad_query_is_a_400_that_names_the_field(alice_client, alice):
    table_run(alice)
    response = alice_client.get("/runs/", {"sort": "nope"})
    assert response.status_code == 400
    html = response.content.decode()
    # the refused value quoted, then HTML-escaped
    assert "sort: must be a column (name, experiment, status" in html and "; got &#x27;nope&#x27;" in html


def test_other_users_run_is_404_for_every_action(client, alice, bob):
    run = table_run(alice, label="alices")
    client.force_login(bob)
    assert client.get(f"/runs/{run.pk}/edit").status_code == 404
    edit = {"name": "mine now", "tags": "", "notes": ""}
    assert client.post(f"/runs/{run.pk}/edit", edit).status_code == 404
    assert client.post(f"/runs/{run.pk}/archive").status_code == 404
    assert client.get(f"/runs/export.csv?runs={run.pk}").status_code == 404
    run.refresh_from_db()
    assert (run.name, run.archived_at) == ("", None)
    run.archive()
    assert client.post(f"/runs/{run.pk}/restore").status_code == 404
    run.refresh_from_db()
    assert run.archived_at is not None


def test_edit_saves_and_returns_to_the_table_and_a_bad_tag_saves_nothing(alice_client, alice):
    run = table_run(alice, label="seed=1")
    bad = alice_client.post(f"/runs/{run.pk}/edit", {"name": "renamed", "tags": "a b!", "notes": "n"})
    assert bad.status_code == 400
    assert "&#x27;b!&#x27; is not a tag" in bad.content.decode()
    # quoted as typed, and a long one by its length (it quoted its first 40 letters, themselves a good tag)
    typed = alice_client.post(f"/runs/{run.pk}/edit", {"name": "", "tags": "ok Bad!", "notes": ""})
    assert "&#x27;Bad!&#x27; is not a tag" in typed.content.decode()
    long = alice_client.post(f"/runs/{run.pk}/edit", {"name": "", "tags": "a" * 300, "notes": ""})
    assert "is not a tag: 300 characters, at most 40" in long.content.decode()
    assert "renamed" not in bad.content.decode().split("<form")[0]  # the page's title is the saved name
    run.refresh_from_db()
    assert (run.name, run.tags, run.notes) == ("", [], "")
    ok = alice_client.post(
        f"/runs/{run.pk}/edit", {"name": "renamed", "tags": "a b", "notes": "n", "next": "/runs/?sort=name"}
    )
    assert ok.status_code == 302 and ok["Location"] == "/runs/?sort=name"
    run.refresh_from_db()
    assert (run.name, run.tags, run.notes) == ("renamed", ["a", "b"], "n")
    offsite = alice_client.post(
        f"/runs/{run.pk}/edit", {"name": "x", "tags": "", "notes": "", "next": "https://evil.example/"}
    )
    assert offsite["Location"] == f"/runs/{run.pk}/"  # not off the site: back to the run's page


def test_archive_and_restore_through_the_page(alice_client, alice):
    run = table_run(alice, label="to-archive")
    row = f'<tr data-run="{run.pk}">'
    assert alice_client.post(f"/runs/{run.pk}/archive").status_code == 302
    assert row not in alice_client.get("/runs/").content.decode()
    assert row in alice_client.get("/runs/?archived=true").content.decode()
    alice_client.post(f"/runs/{run.pk}/restore")
    assert row in alice_client.get("/runs/").content.decode()


def test_export_writes_the_selected_runs_metrics_in_one_csv(alice_client, alice):
    first, second = table_run(alice, label="one"), table_run(alice, label="two", name="Second")
    MetricPoint.upsert(first.pk, [(0, "train/success", 0.5), (1, "train/success", math.nan)])
    MetricPoint.upsert(second.pk, [(0, "val/success", 0.25)])
    response = alice_client.get(f"/runs/export.csv?runs={second.pk},{first.pk}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows == [
        ["run_id", "run", "experiment", "step", "train/success", "val/success"],
        [str(second.pk), "Second", "Sweep", "0", "", "0.25"],
        [str(first.pk), "one", "Sweep", "0", "0.5", ""],
        [str(first.pk), "one", "Sweep", "1", "nan", ""],
    ]
    assert alice_client.get("/runs/export.csv?runs=x").status_code == 400
    assert alice_client.get("/runs/export.csv").status_code == 400
    # Imported back, it is said to be several runs' (its run column read as a metric: "'one' is not a number")
    exported = "".join(",".join(row) + "\n" for row in rows).encode()
    refused = alice_client.post("/import", {"file": SimpleUploadedFile("runs.csv", exported)})
    assert refused.context["form"].errors["file"] == [
        "runs.csv: an export of the runs table (its first columns are run_id, run, experiment, step): "
        "import one run's metrics at a time, from its run page's Export CSV"
    ]


def test_table_queries_run_without_postgres_jit_and_leave_the_setting_as_it_was(db):
    from django.db import connection

    def jit():
        with connection.cursor() as cursor:
            cursor.execute("SHOW jit")
            return cursor.fetchone()[0]

    before = jit()
    with table.without_jit():
        assert jit() == "off"
    assert jit() == before


def test_the_run_page_shows_tags_and_notes_and_links_to_edit_them(alice_client, alice):
    run = table_run(
        alice, label="seed=1", tags=["baseline", "paper-repro"], notes="First line.\n\n<b>not bold</b>"
    )
    html = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert '<a class="tag" href="/runs/?tag=baseline">baseline</a>' in html
    assert "<p>First line.</p>" in html and "&lt;b&gt;not bold&lt;/b&gt;" in html
    assert f'href="/runs/{run.pk}/edit?next=/runs/{run.pk}/"' in html
    saved = alice_client.post(f"/runs/{run.pk}/edit", {"name": "", "tags": "", "notes": ""})
    assert saved["Location"] == f"/runs/{run.pk}/"


def test_a_filter_that_matches_nothing_says_so(alice, alice_client):
    table_run(alice, "bandit run")
    html = alice_client.get("/runs/?q=zzzz").content.decode()
    assert "No runs match these filters." in html and "0 runs" in html
    assert "No archived runs." in alice_client.get("/runs/?archived=true").content.decode()


def test_exported_names_and_keys_cannot_run_as_spreadsheet_formulas(alice_client, alice):
    run = table_run(alice, label="x", name="=EVIL()")
    MetricPoint.upsert(run.pk, [(0, '=HYPERLINK("http://x")', -0.5), (0, "+cmd", 1.0), (0, "loss", -2.0)])
    rows = list(
        csv.reader(
            io.StringIO(
                b"".join(alice_client.get(f"/runs/export.csv?runs={run.pk}").streaming_content).decode()
            )
        )
    )
    assert rows[0][4:] == ["'+cmd", '\'=HYPERLINK("http://x")', "loss"]
    assert rows[1][1] == "'=EVIL()" and rows[1][4:] == ["1.0", "-0.5", "-2.0"]  # numbers stay numbers
    single = b"".join(alice_client.get(f"/api/runs/{run.pk}/export?format=csv").streaming_content).decode()
    assert single.splitlines()[0] == 'step,\'+cmd,"\'=HYPERLINK(""http://x"")",loss'


def test_a_key_named_like_an_export_column_gets_a_column_of_its_own(alice_client, alice):
    run = table_run(alice, label="x")
    MetricPoint.upsert(run.pk, [(3, "run", 1.0), (3, "step", 9.0)])
    rows = list(
        csv.reader(
            io.StringIO(
                b"".join(alice_client.get(f"/runs/export.csv?runs={run.pk}").streaming_content).decode()
            )
        )
    )
    assert rows == [
        ["run_id", "run", "experiment", "step", "run (metric)", "step (metric)"],
        [str(run.pk), "x", "Sweep", "3", "1.0", "9.0"],
    ]


def test_the_step_cell_gives_the_planned_total_only_where_there_is_one(alice):
    from webapp.runs.templatetags.runs_table import cell

    planned = table_run(alice, label="planned", status=Run.Status.RUNNING, step=12, total_steps=60)
    elsewhere = table_run(alice, label="mlflow", status=Run.Status.RUNNING, step=199, total_steps=0)
    assert cell(planned, "step") == "12 / 60"
    assert cell(elsewhere, "step") == 199  # not "199 / 0": an MLflow client plans no number of steps


def test_rows_per_page_is_a_filter_the_next_filter_keeps(alice_client, alice):
    """page_size was an address-only parameter: the filter form had no field for it, so its next submit
    went back to 50 rows."""
    for index in range(60):
        table_run(alice, label=f"run-{index}")

    def shown(query):
        html = alice_client.get(f"/runs/{query}").content.decode()
        select = re.search(r'<select name="page_size">(.*?)</select>', html, re.DOTALL).group(1)
        options = re.findall(r"<option( selected)?>(\d+)</option>", select)
        rows = len(re.findall(r'<tr data-run="', html))
        return [size for _, size in options], next(size for chosen, size in options if chosen), rows

    assert shown("") == (["50", "100", "200"], "50", 50)
    assert shown("?page_size=100") == (["50", "100", "200"], "100", 60)
    assert shown("?page_size=75&status=queued") == (["50", "75", "100", "200"], "75", 60)
