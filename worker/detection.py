"""Live diagnostics, outside the trainer: the database sink hands every finished step's metrics to a
StepHook. EchoTrapHook feeds them to the Echo Trap detector (diagnostics.Detector), stores what it
finds as DetectorEvent rows and sends the notifications the alerts app decides on
(Notification.create_for: collapses, warnings when asked, no repeats within the cooldown; the events of
one step in one email, and a run's emails at least ALERT_GROUP_SECONDS apart but for a collapse).

Restarts: the detector is a pure function of the steps fed to it, so a resumed run rebuilds it by
replaying the run's stored metrics up to the first step this attempt computes. Events are stored by
DetectorEvent.record, once per (run, step, rule, level): a replayed or recomputed event is stored and
announced once.

on_step may be called again for a step whose database writes failed; it then only retries the writes.
"""

import logging

from django.db import transaction

from webapp.alerts.models import DetectorEvent, Notification, send_later
from webapp.metrics.models import MetricPoint

logger = logging.getLogger(__name__)


class StepHook:
    """What the sink calls after each step. The base hook does nothing."""

    def on_step(self, run, step: int, metrics: dict[str, float]) -> None:
        pass


class EchoTrapHook(StepHook):
    def __init__(self, run, keep_replayed: bool = True):
        from diagnostics import Detector

        self.detector_class = Detector
        self.overrides = run.experiment.detector_overrides or {}
        Detector(overrides=self.overrides)  # bad overrides fail here, before training, with rule.param named
        self.detector = None
        self.last_step = None
        self.pending: list[dict] = []  # events found but not stored yet
        # Store the events the replay of the steps before the first judged here finds, where not stored:
        # a resumed training run's last attempt may have died between judging a step and storing its events.
        self.keep_replayed = keep_replayed

    def on_step(self, run, step, metrics):
        if self.detector is None:
            history = self.history(run, before=step)
            self.detector, replayed = self.detector_class.replay(history, self.overrides)
            if self.keep_replayed:
                self.pending.extend(replayed)
        if self.last_step is None or step > self.last_step:
            self.pending.extend(self.detector.update(step, metrics))
            self.last_step = step
        if self.pending:
            self.store(run, self.pending)
            self.pending = []

    @staticmethod
    def history(run, before: int) -> list[tuple[int, dict]]:
        return MetricPoint.steps(run.pk, through=before - 1)

    def store(self, run, found: list[dict]) -> None:
        """Store the events, all or none (a failed write is retried whole on the next call), and announce
        each step's new ones in one notification."""
        with transaction.atomic():
            recorded = [DetectorEvent.record(run, event) for event in found]
            new = [event for event, created in recorded if created]
            for step in sorted({event.step for event in new}):
                # Which events are announced (levels, recipients, cooldown) is the alerts app's decision.
                notification = Notification.create_for([event for event in new if event.step == step])
                if notification is not None:
                    at = notification.next_try_at
                    transaction.on_commit(lambda pk=notification.pk, at=at: send_later(pk, at))
        for event in new:
            logger.info("run %s: %s %s at step %s", run.pk, event.level, event.rule, event.step)
