"""The detector over a run logged through the MLflow endpoint (worker/external.py, called in-process): a
step is judged once it is complete, every step exactly once, the same events whichever process judges."""

import pytest
from django.utils import timezone

from diagnostics.rules import ZeroStdGroups
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint
from webapp.tracking.models import ExternalExperiment, ExternalRun
from worker import external

OVERRIDES = {"zero_std_groups": {"threshold": 0.5, "min_rise": 0.0, "pending": 1, "smoothing": 0.0}}


@pytest.fixture
def run(alice, purge_broker):
    experiment = ExternalExperiment.create(alice, "hand-written loop")
    Experiment.objects.filter(pk=experiment.experiment_id).update(detector_overrides=OVERRIDES)
    external._hooks.clear()
    return ExternalRun.start(experiment, "loop", {}, "alice", timezone.now())


def log(run, key, value, step):
    ExternalRun.objects.get(pk=run.pk).log([(key, value, step, None)], {}, {})


def judged(run):
    return ExternalRun.objects.get(pk=run.pk).detected_through


def test_a_step_logged_key_by_key_is_judged_once_the_next_step_begins(run):
    log(run, "reward", 0.0, 0)
    log(run, "frac_reward_zero_std", 0.0, 0)
    assert external.detect(run.pk) == 0 and judged(run) is None  # step 0 may still get keys
    log(run, "reward", 1.0, 1)
    assert external.detect(run.pk) == 1 and judged(run) == 0
    log(run, "frac_reward_zero_std", 1.0, 1)  # step 1's second key: the rule only fires on it
    log(run, "reward", 1.0, 2)
    assert external.detect(run.pk) == 1 and judged(run) == 1
    events = DetectorEvent.objects.filter(run_id=run.pk).values_list("step", "rule")
    assert list(events) == [(1, "zero_std_groups")]
    assert external.detect(run.pk) == 0  # nothing new: nothing judged twice


def test_the_last_step_is_judged_when_the_run_ends(run):
    log(run, "frac_reward_zero_std", 1.0, 0)
    assert external.detect(run.pk) == 0
    ExternalRun.objects.get(pk=run.pk).update("FINISHED", None, "")
    assert external.detect(run.pk) == 1 and judged(run) == 0
    assert DetectorEvent.objects.filter(run_id=run.pk, step=0, rule="zero_std_groups").exists()


def test_another_process_rebuilds_the_detector_from_the_stored_steps(run):
    # Fires only on a rise of 0.5 over the lowest value seen: a detector that forgot steps 0-1 would not.
    Experiment.objects.filter(runs=run.pk).update(
        detector_overrides={"zero_std_groups": {**OVERRIDES["zero_std_groups"], "min_rise": 0.5}}
    )
    log(run, "frac_reward_zero_std", 0.0, 0)
    log(run, "frac_reward_zero_std", 0.0, 1)
    external.detect(run.pk)
    external._hooks.clear()  # as in a second worker process, or after a restart
    log(run, "frac_reward_zero_std", 1.0, 2)
    log(run, "frac_reward_zero_std", 1.0, 3)
    assert external.detect(run.pk) == 2 and judged(run) == 2
    # The replayed detector had seen steps 0-1 (a floor of 0), so the rise at step 2 fires, once.
    assert list(DetectorEvent.objects.filter(run_id=run.pk).values_list("step", flat=True)) == [2]


def events(run):
    return list(DetectorEvent.objects.filter(run_id=run.pk).order_by("step").values_list("step", "rule"))


def test_a_judged_step_is_final_whichever_process_judges_next(run):
    """A key that comes after its step was judged (a second process logging behind the first) is in the
    stored steps a rebuilt detector replays: that replay must not add events to steps judged already,
    or whether they are added would depend on which worker process takes the next detection."""
    for step in range(4):
        log(run, "reward", 0.5, step)
    assert external.detect(run.pk) == 3 and judged(run) == 2
    log(run, "frac_reward_zero_std", 1.0, 1)  # late: step 1 was judged without it
    log(run, "reward", 0.5, 4)
    external._hooks.clear()  # the next detection in another process
    assert external.detect(run.pk) == 1 and judged(run) == 3
    assert events(run) == []


@pytest.mark.parametrize("other_process", [False, True])
def test_steps_sent_again_are_judged_again_from_their_new_values(run, other_process):
    """A trainer resumed from a checkpoint logs steps again: their new values are judged, in every process
    alike, and alerted as new; each event once."""
    for step in range(4):
        log(run, "frac_reward_zero_std", 0.0, step)
    assert external.detect(run.pk) == 3
    log(run, "frac_reward_zero_std", 1.0, 1)  # step 1 again, from the resumed trainer
    log(run, "frac_reward_zero_std", 0.0, 4)
    if other_process:
        external._hooks.clear()
    assert external.detect(run.pk) == 1 and judged(run) == 3
    assert events(run) == [(1, "zero_std_groups")]
    log(run, "frac_reward_zero_std", 0.0, 5)
    external._hooks.clear()
    assert external.detect(run.pk) == 1 and events(run) == [(1, "zero_std_groups")]


def test_the_sweeper_resends_detection_for_a_run_whose_message_was_lost(run):
    from worker.sweeper import sweep_runs

    log(run, "reward", 0.5, 0)
    log(run, "reward", 0.6, 1)  # step 0 is complete; its message never left (no commit in this test)
    assert sweep_runs()["detections"] == 1
    external.detect(run.pk)
    assert sweep_runs()["detections"] == 0  # judged through step 0; step 1 may still get keys
    ExternalRun.objects.get(pk=run.pk).update("FINISHED", None, "")
    assert sweep_runs()["detections"] == 1
    external.detect(run.pk)
    assert sweep_runs()["detections"] == 0 and judged(run) == 1


def test_points_sent_to_the_metrics_api_move_the_run_on_and_are_judged(
    run, client, alice, monkeypatch, django_capture_on_commit_callbacks
):
    from webapp.accounts.models import ApiToken
    from webapp.experiments.models import Run

    sent = []
    monkeypatch.setattr("webapp.tracking.models.send_detection_soon", sent.append)
    token = ApiToken.issue(alice, "script")[1]
    points = [{"step": step, "key": "train/frac_zero_std_groups", "value": 1.0} for step in (0, 1)]
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            f"/api/runs/{run.pk}/metrics",
            points,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
    assert answer.status_code == 200, answer.content
    assert answer.json()["run"]["step"] == 1
    stored = Run.objects.get(pk=run.pk)
    assert stored.step == 1 and stored.heartbeat_at > run.run.heartbeat_at  # heard from, in the write
    assert sent == [run.pk]
    assert external.detect(run.pk) == 1 and judged(run) == 0  # step 1 may still get keys
    assert list(DetectorEvent.objects.filter(run_id=run.pk).values_list("step", "rule")) == [
        (0, "zero_std_groups")
    ]


def test_a_run_logging_fast_asks_for_detection_once_a_second_and_once_after():
    from datetime import timedelta

    from django.utils import timezone

    from webapp.tracking.models import DetectionThrottle

    now, sent = [100.0], []
    throttle = DetectionThrottle(
        every=1.0, send=lambda run_id, eta: sent.append((run_id, eta)), clock=lambda: now[0]
    )
    throttle(7)  # the first batch: at once
    assert sent == [(7, None)]
    now[0] = 100.2
    throttle(7)  # within the second: one message at its end, for this batch and any more
    ((run_id, eta),) = sent[1:]
    assert run_id == 7 and abs(eta - (timezone.now() + timedelta(seconds=0.8))) < timedelta(seconds=0.2)
    now[0] = 100.5
    throttle(7)
    throttle(8)  # another run has its own second
    assert [run_id for run_id, _ in sent] == [7, 7, 8]
    now[0] = 101.0
    throttle(7)  # the planned one leaves now, perhaps before this batch commits: one more, a second on
    assert len(sent) == 4 and sent[-1][1] is not None
    now[0] = 104.5
    throttle(7)  # a run logging a step every few seconds is asked about after each, at once
    assert sent[-1] == (7, None) and len(sent) == 5


def test_a_judgement_that_failed_is_judged_again_from_the_stored_steps(run, monkeypatch):
    """The process' detector has seen the step that failed (its events rolled back): the next try replays
    the stored steps instead of feeding that step again (which it refused, every 30 s, forever)."""
    log(run, "frac_reward_zero_std", 0.0, 0)
    log(run, "frac_reward_zero_std", 1.0, 1)
    assert external.detect(run.pk) == 1  # the process keeps its detector, judged through step 0
    log(run, "frac_reward_zero_std", 1.0, 2)
    check = ZeroStdGroups.check

    def fails_once(self, metrics, trend):
        monkeypatch.setattr(ZeroStdGroups, "check", check)
        raise OverflowError("a rule's bug")

    monkeypatch.setattr(ZeroStdGroups, "check", fails_once)
    with pytest.raises(OverflowError):
        external.detect(run.pk)
    assert judged(run) == 0
    assert external.detect(run.pk) == 1 and judged(run) == 1
    assert list(DetectorEvent.objects.filter(run_id=run.pk).values_list("step", flat=True)) == [1]


def test_a_key_logged_without_steps_does_not_carry_the_run_past_steps_still_to_come(run):
    """`mlflow.log_metric("loss", v)` per batch (numbered as it arrives) beside a rate logged per epoch:
    the run's step, which the detector judges by, follows the epochs. Numbered points moved it to 19
    before epoch 1's rate came, so epochs 1-18 were passed over as judged, their rates never seen."""
    for epoch in range(3):
        for batch in range(10):
            log(run, "loss", 1.0 / (1 + 10 * epoch + batch), 0)  # no step: the client's default 0
        log(run, "frac_reward_zero_std", float(epoch == 2), epoch)
        external.detect(run.pk)
    assert Run.objects.get(pk=run.pk).step == 2 and judged(run) == 1
    ExternalRun.objects.get(pk=run.pk).update("FINISHED", None, "")
    external.detect(run.pk)
    assert events(run) == [(2, "zero_std_groups")]  # epoch 2's rate judged, at its own step
    stored = MetricPoint.objects.filter(run_id=run.pk, key="loss").order_by("step")
    assert list(stored.values_list("step", flat=True)) == list(range(30))  # charted in arrival order


def test_a_run_that_logs_its_success_without_steps_is_judged_by_its_count(run, alice_client):
    """`for ...: mlflow.log_metrics({"success_rate": s, "frac_reward_zero_std": z})` with no step: the nth
    success is the nth step, for every key's nth point (numbered as they arrive). Judged at step 0 only
    before: the detector never saw the run."""
    for iteration in range(6):
        ExternalRun.objects.get(pk=run.pk).log(
            [("success_rate", 0.5, 0, None), ("frac_reward_zero_std", float(iteration >= 3), 0, None)], {}, {}
        )
        external.detect(run.pk)
        log(run, "loss", 0.1, 0)  # a key logged more often (per batch) is no step of the run
        log(run, "loss", 0.1, 0)
    assert Run.objects.get(pk=run.pk).step == 5 and judged(run) == 4
    assert events(run) == [(3, "zero_std_groups")]
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "the detector counts the points of train/success as the run's steps" in page


def test_a_run_whose_success_has_steps_goes_by_them_whatever_else_it_logs_without(run):
    for epoch in range(2):
        log(run, "success_rate", 0.5, epoch)
        for _ in range(5):  # entropy per batch, without a step
            log(run, "entropy", 1.0, 0)
    assert Run.objects.get(pk=run.pk).step == 1


def test_ragens_per_environment_success_takes_our_success_key(run):
    # RAGEN streams through veRL's MLflow logger as train/<env>/success. The endpoint renamed exact aliases
    # only, so it was stored and charted under its own name (the Success chart stayed empty) while the
    # detector read it as the run's success; now it takes train/success as the run's first name for it.
    for step in range(3):
        ExternalRun.objects.get(pk=run.pk).log([("train/Bandit/success", 0.5, step, None)], {}, {})
    keys = set(MetricPoint.objects.filter(run_id=run.pk).values_list("key", flat=True))
    assert keys == {"train/success"}
    stored = ExternalRun.objects.get(pk=run.pk)
    assert stored.logged_as == {"train/success": "train/Bandit/success"}
    assert stored.stored_key("train/Bandit/success") == "train/success"  # what the client reads back


def test_two_environments_success_keep_their_names(run):
    both = [("train/Bandit/success", 0.5, 0, None), ("train/SimpleSokoban/success", 0.1, 0, None)]
    ExternalRun.objects.get(pk=run.pk).log(both, {}, {})
    keys = set(MetricPoint.objects.filter(run_id=run.pk).values_list("key", flat=True))
    assert keys == {"train/Bandit/success", "train/SimpleSokoban/success"}
