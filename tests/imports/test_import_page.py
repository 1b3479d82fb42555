"""/import: a metrics file becomes an imported run (points, detector events), all or nothing; bad files
are refused with a message naming the line or column, and nothing is saved."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from diagnostics import Detector, load_series
from tests.helpers import REPO_ROOT
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Experiment, Run
from webapp.imports import importer
from webapp.metrics.models import MetricPoint

DATA = REPO_ROOT / "tests" / "data" / "detector"
URL = "/import"


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


def upload(client, filename, content: bytes, **fields):
    return client.post(URL, {"file": SimpleUploadedFile(filename, content), **fields})


def nothing_saved():
    return [model.objects.count() for model in (Experiment, Run, MetricPoint, DetectorEvent)] == [0, 0, 0, 0]


def test_page_needs_login(client, db):
    response = client.get(URL)
    assert response.status_code == 302 and reverse("login") in response["Location"]


def test_form_is_shown(alice_client):
    response = alice_client.get(URL)
    assert response.status_code == 200
    assert b'enctype="multipart/form-data"' in response.content and b"csrfmiddlewaretoken" in response.content


def test_csv_becomes_an_imported_run_with_points_and_events(alice_client, alice):
    path = DATA / "frozenlake-ppo-s0.csv"
    response = upload(alice_client, path.name, path.read_bytes(), name="FrozenLake from the cluster")

    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    experiment = run.experiment
    assert (experiment.owner, experiment.name, experiment.imported, experiment.config) == (
        alice,
        "FrozenLake from the cluster",
        True,
        {},
    )
    series = load_series(str(path))
    assert (run.status, run.label, run.step, run.total_steps) == (
        "completed",
        f"imported: {path.name}",
        series[-1][0] + 1,  # steps done, counted as for a run trained here
        series[-1][0] + 1,
    )
    assert MetricPoint.objects.filter(run=run).count() == sum(len(values) for _, values in series)
    assert run.latest_metrics["train/success"] == series[-1][1]["train/success"]
    _, expected = Detector.replay(series)
    stored = list(run.events.values_list("step", "rule", "level"))
    assert stored == [(e["step"], e["rule"], e["level"]) for e in expected]
    assert ("collapse", "collapse") in [(rule, level) for _, rule, level in stored]

    page = alice_client.get(run.get_absolute_url())
    assert page.status_code == 200 and b"Imported " in page.content  # the success message
    assert alice_client.get(experiment.get_absolute_url()).status_code == 200


def test_jsonl_keys_of_other_trainers_are_renamed_to_ours(alice_client):
    path = DATA / "bandit-ppo-s0.jsonl"
    assert "rollout/in_group_std" in path.read_text().splitlines()[0]
    upload(alice_client, path.name, path.read_bytes())
    run = Run.objects.get()
    keys = set(MetricPoint.objects.filter(run=run).values_list("key", flat=True))
    assert "train/reward_std_in_group" in keys and "rollout/in_group_std" not in keys
    assert run.experiment.name == "bandit-ppo-s0"  # no name given: the file's
    assert run.events.filter(level="collapse").exists()


def test_other_users_cannot_see_the_imported_run(alice_client, bob):
    upload(alice_client, "m.csv", b"step,train/success\n0,0.5\n1,0.6\n")
    run = Run.objects.get()
    other = Client()
    other.force_login(bob)
    assert other.get(run.get_absolute_url()).status_code == 404
    assert other.get(run.experiment.get_absolute_url()).status_code == 404


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "m.csv",
            b"step,train/success\n0,0.5\n1,abc\n",
            "line 3, column 'train/success': 'abc' is not a number",
        ),
        ("m.csv", b"epoch,train/success\n0,0.5\n", "line 1: no 'step' column"),
        ("m.csv", b"step,a\n0,1\n1,2\n0,3\n", "line 4: step 0, column 'a' is 3.0 here but 1.0 on line 2"),
        (
            "m.jsonl",
            b'{"step": 0, "a": 1}\n{"step": 1, "a": "x"}\n',
            "line 2, column 'a': 'x' is not a number",
        ),
        ("m.jsonl", b'{"step": 0}\n[1, 2]\n', "line 2: expected a JSON object"),
        (
            "m.csv",
            b"step,train/success\n0,-3\n1,7.5\n",
            "step 0, 'train/success': must be between 0 and 1 (train/success is a fraction), got -3.0",
        ),
        (
            "m.jsonl",
            b'{"step": 4, "success_rate": 1e38}\n',
            "step 4, 'success_rate': must be between 0 and 1",
        ),
        ("chart.png", PNG, "the data is binary"),
        ("m.csv", b"step,a\n", "no data rows"),
        ("m.csv", b"step,a\n0,\n1,\n", "no metric values"),
        ("m.csv", b"step\n0\n", "no metric values"),
        ("m.csv", b"", "The submitted file is empty"),
        ("m.csv", b"\n\n", "line 1: empty file"),
        ("m.csv", b"step,a\n99999999999,1\n", "line 2: step 99999999999 is larger than"),
        ("m.csv", ("step," + "k" * 251 + "\n0,1\n").encode(), "names are at most 250 characters"),
        ("/etc/passwd", b"/etc/passwd", "no 'step' column"),  # content is never taken for a path
    ],
)
def test_bad_files_are_refused_naming_the_line_or_column_and_nothing_saved(
    alice_client, name, content, message
):
    response = upload(alice_client, name, content)
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert nothing_saved()


def test_two_files_are_refused_not_the_last_one_imported(alice_client):
    files = [SimpleUploadedFile(f"{n}.csv", b"step,a\n0,1\n") for n in ("first", "second")]
    response = alice_client.post(reverse("run_import"), {"file": files})
    assert response.status_code == 400 and "one file per import, got 2" in response.content.decode()
    assert nothing_saved()


def test_too_large_files_are_refused(alice_client, settings):
    settings.IMPORT_MAX_BYTES = 100
    response = upload(alice_client, "m.csv", b"step,a\n" + b"".join(b"%d,1\n" % i for i in range(50)))
    assert response.status_code == 400
    assert "m.csv: 247 bytes (0.0 MB), over the limit of 100 bytes (0.0 MB)" in response.content.decode()
    assert nothing_saved()


def test_post_needs_the_csrf_token(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = upload(client, "m.csv", b"step,a\n0,1\n")
    assert response.status_code == 403
    assert nothing_saved()


def test_a_failure_while_writing_leaves_nothing_half_imported(alice, monkeypatch):
    series = importer.load(str(DATA / "sokoban-ppo-s0.csv"), "csv")

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(DetectorEvent, "record_all", broken)
    with pytest.raises(RuntimeError):
        importer.create_run(alice, "x", "sokoban-ppo-s0.csv", series)
    assert nothing_saved()


def test_a_file_with_no_metric_the_detector_reads_is_imported_with_a_warning_saying_so(alice_client):
    response = upload(alice_client, "custom.csv", b"step,foo,bar\n0,1,2\n1,2,3\n")
    page = alice_client.get(response["Location"])
    text = " ".join(page.content.decode().split())
    assert (
        "Imported 4 metric points over 2 steps, but none of its metrics ('bar', 'foo') is one that the detector "
        "reads (train/success, train/reward_mean, actor/entropy, ... under EchoLab's names or TRL's and "
        "veRL's; docs/METRICS.md): it cannot judge this run."
    ) in text.replace("&#x27;", "'")
    one = upload(alice_client, "one.csv", b"step,train/success\n0,0.5\n")
    text = " ".join(alice_client.get(one["Location"]).content.decode().split())
    assert "Imported 1 metric point over 1 step; the detector found 0 events." in text
