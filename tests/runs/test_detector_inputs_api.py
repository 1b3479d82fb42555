"""GET /api/runs/<id>/detector-inputs: the series each rule judged, replayed from the stored metrics with the
run's parameters. The value an event quotes (signals["value"]) is on the served series at its step."""

import re
from pathlib import Path

import pytest

from diagnostics import load_series
from tests.factories import make_experiment, make_run
from webapp.experiments.models import Run
from webapp.imports.importer import create_run
from webapp.metrics.models import MetricPoint
from webapp.runs import api
from worker.detection import EchoTrapHook

DATA = Path(__file__).resolve().parents[1] / "data" / "detector"


def served(client, run) -> dict:
    response = client.get(f"/api/runs/{run.pk}/detector-inputs")
    assert response.status_code == 200, response.content
    return {entry["rule"]: entry for entry in response.json()["rules"]}


def quoted_values_on_the_series(run, rules) -> set[str]:
    """Check every event's quoted value against the served series; the rules whose events were checked."""
    checked = set()
    for event in run.events.order_by("step"):
        value = event.signals.get("value")
        if not isinstance(value, float):
            continue
        entry = rules[event.rule]
        assert entry["metric"] == event.signals["metric"]
        assert entry["value"][entry["step"].index(event.step)] == value, (event.rule, event.step)
        checked.add(event.rule)
    return checked


def test_an_imported_runs_events_quote_the_served_series(alice_client, alice):
    series = load_series(DATA / "frozenlake-ppo-s2.csv")
    run = create_run(alice, "FrozenLake PPO", "frozenlake-ppo-s2.csv", series)
    rules = served(alice_client, run)
    checked = quoted_values_on_the_series(run, rules)
    assert {"collapse", "reward_std_drop", "zero_std_groups", "thinking_decay", "entropy_rise"} <= checked
    assert rules["collapse"]["metric"] == "train/success"
    assert rules["collapse"]["smoothing"] == 0.6  # the default: the experiment overrides nothing
    # smoothing 0: the rule judged the logged values themselves
    entropy = {step: values["actor/entropy"] for step, values in series if "actor/entropy" in values}
    erratic = rules["entropy_erratic"]
    assert erratic["smoothing"] == 0.0 and dict(zip(erratic["step"], erratic["value"])) == entropy


def test_a_trained_runs_events_quote_the_series_with_its_experiments_overrides(alice_client, alice):
    overrides = {"collapse": {"smoothing": 0.2}, "reward_std_drop": {"smoothing": 0.85, "pending": 2}}
    experiment = make_experiment(alice, detector_overrides=overrides)
    run = make_run(alice, experiment=experiment, status=Run.Status.COMPLETED)
    hook = EchoTrapHook(run)  # the worker's live detection, step by step as the sink hands it steps
    for step, metrics in load_series(DATA / "sokoban-grpo-s0.csv"):
        MetricPoint.upsert(run.pk, [(step, key, value) for key, value in metrics.items()])
        hook.on_step(run, step, metrics)
    rules = served(alice_client, run)
    assert (rules["collapse"]["smoothing"], rules["reward_std_drop"]["smoothing"]) == (0.2, 0.85)
    assert {"collapse", "reward_std_drop", "zero_std_groups"} <= quoted_values_on_the_series(run, rules)


def test_a_disabled_rule_is_left_out_and_a_run_without_metrics_has_empty_series(alice_client, alice):
    experiment = make_experiment(alice, detector_overrides={"grad_spike": {"enabled": False}})
    run = make_run(alice, experiment=experiment, status=Run.Status.RUNNING, step=0)
    body = alice_client.get(f"/api/runs/{run.pk}/detector-inputs").json()
    assert body["steps"] == 0 and body["run"]["id"] == run.pk
    assert "grad_spike" not in [entry["rule"] for entry in body["rules"]]
    assert all(entry["step"] == [] == entry["value"] for entry in body["rules"])


def test_another_users_run_is_404(bob_client, alice):
    run = make_run(alice)
    response = bob_client.get(f"/api/runs/{run.pk}/detector-inputs")
    assert response.status_code == 404


def test_a_run_over_the_limit_is_refused_naming_it(alice_client, alice, monkeypatch):
    monkeypatch.setattr(api, "MAX_REPLAY_POINTS", 10)
    run = make_run(alice, status=Run.Status.COMPLETED)
    MetricPoint.upsert(run.pk, [(step, "train/success", 0.5) for step in range(11)])
    MetricPoint.upsert(run.pk, [(step, "custom/not_read", 1.0) for step in range(50)])  # not counted
    response = alice_client.get(f"/api/runs/{run.pk}/detector-inputs")
    assert response.status_code == 422
    assert response.json()["error"].startswith(f"run {run.pk} has more than 10 points of the metrics")
    MetricPoint.objects.filter(run=run, step=10).delete()
    assert served(alice_client, run)["collapse"]["step"] == list(range(10))


@pytest.mark.parametrize("overrides", [{"no_such_rule": {}}, {"collapse": {"smoothing": 2.0}}])
def test_overrides_the_detector_refuses_are_422(alice_client, alice, overrides):
    run = make_run(alice, experiment=make_experiment(alice, detector_overrides=overrides))
    response = alice_client.get(f"/api/runs/{run.pk}/detector-inputs")
    assert response.status_code == 422
    assert response.json()["error"].startswith("the experiment's detector overrides are rejected: ")


def events_of(response) -> list[tuple[int, str, str]]:
    assert response.status_code == 200, response.content
    return [(event["step"], event["level"], event["rule"]) for event in response.json()["events"]]


def test_other_settings_tried_on_a_run_judge_it_again_and_store_nothing(alice_client, alice):
    """A user whose run warned asks how it would have been judged with a rule off or a threshold moved,
    before changing the experiment's settings: the replay's events, with nothing stored or sent."""
    series = load_series(DATA / "frozenlake-ppo-s2.csv")
    run = create_run(alice, "FrozenLake PPO", "frozenlake-ppo-s2.csv", series)
    stored = sorted((event.step, event.level, event.rule) for event in run.events.all())
    as_judged = events_of(alice_client.get(f"/api/runs/{run.pk}/detector-inputs"))
    assert sorted(as_judged) == stored  # the experiment's own settings give the stored events

    url = f"/api/runs/{run.pk}/detector-inputs"
    quiet = events_of(alice_client.get(url, {"overrides": "reward_std_drop: {enabled: false}"}))
    assert {rule for _, _, rule in quiet} == {rule for _, _, rule in stored} - {"reward_std_drop"}
    as_json = alice_client.get(url, {"overrides": '{"collapse": {"smoothing": 0.2}}'})
    assert as_json.json()["overrides"] == {"collapse": {"smoothing": 0.2}}
    assert {entry["rule"]: entry["smoothing"] for entry in as_json.json()["rules"]}["collapse"] == 0.2
    assert sorted((e.step, e.level, e.rule) for e in run.events.all()) == stored  # nothing stored


@pytest.mark.parametrize(
    "overrides, says",
    [
        ("reward_std_drop: {ratio: 7}", "reward_std_drop.ratio"),
        ("no_such_rule: {ratio: 0.3}", "no_such_rule"),
        ("reward_std_drop: [", "not valid YAML"),
        ("[1, 2]", "expected a mapping"),
        ("x" * 3001, "longer than 3,000 characters"),
    ],
)
def test_settings_the_detector_refuses_are_a_400_naming_them(alice_client, alice, overrides, says):
    run = make_run(alice, status=Run.Status.COMPLETED)
    response = alice_client.get(f"/api/runs/{run.pk}/detector-inputs", {"overrides": overrides})
    assert response.status_code == 400, response.content
    assert says in response.json()["errors"]["overrides"]
    assert response.json()["error"].startswith("overrides: ")


def test_the_examples_the_run_page_gives_for_other_settings_are_taken(alice_client, alice):
    # The help under the box once offered collapse: {ratio: 0.4}, which the detector refuses (its name is
    # fraction): each example it shows is tried as a user would copy it.
    run = make_run(alice, status=Run.Status.COMPLETED)
    html = alice_client.get(run.get_absolute_url()).content.decode()
    help_text = html[
        html.index('id="try-overrides-help"') : html.index("</p>", html.index('id="try-overrides-help"'))
    ]
    examples = re.findall(r"<code>(.*?)</code>", help_text)
    assert len(examples) == 2
    for example in examples:
        response = alice_client.get(f"/api/runs/{run.pk}/detector-inputs", {"overrides": example})
        assert response.status_code == 200, (example, response.content)


def test_a_run_stored_under_ragens_per_environment_success_is_replayed_with_it(alice_client, alice):
    # The ingest API stores keys as sent: RAGEN's train/<env>/success, which the detector reads as the run's
    # success. Replayed from STORED_READS' exact names alone, the success was left out: the collapse rule
    # had no series and the served events missed the live detector's collapse.
    run = make_run(alice, status=Run.Status.COMPLETED)
    hook = EchoTrapHook(run)
    for step in range(40):
        metrics = {"train/Bandit/success": 0.45 if step < 7 else 0.0, "critic/score/mean": 0.0}
        MetricPoint.upsert(run.pk, [(step, key, value) for key, value in metrics.items()])
        hook.on_step(run, step, metrics)
    stored = sorted((event.step, event.level, event.rule) for event in run.events.all())
    assert ("collapse", "collapse") in {(level, rule) for _, level, rule in stored}
    assert sorted(events_of(alice_client.get(f"/api/runs/{run.pk}/detector-inputs"))) == stored
    assert served(alice_client, run)["collapse"]["metric"] == "train/success"
