"""Live diagnostics, outside the trainer: the database sink hands every finished step's metrics to a
StepHook. EchoTrapHook feeds them to the Echo Trap detector (diagnostics.Detector), stores what it
finds as DetectorEvent rows and sends the notifications the alerts app decides on
(Notification.create_for_event: collapses, warnings when asked, no repeats within the cooldown).

Restarts: the detector is a pure function of the steps fed to it, so a resumed run rebuilds it by
replaying the run's stored metrics up to the first step this attempt computes. Events are stored by
DetectorEvent.record, once per (run, step, rule, level): a replayed or recomputed event is stored and
announced once.

on_step may be called again for a step whose database writes failed; it then only retries the writes.
"""

import logging

from django.db import transaction

from webapp.alerts.models import DetectorEvent, Notification
from webapp.metrics.models import MetricPoint

logger = logging.getLogger(__name__)


class StepHook:
    """What the sink calls after each step. The base hook does nothing."""

    def on_step(self, run, step: int, metrics: dict[str, float]) -> None:
        pass


class EchoTrapHook(StepHook):
    def __init__(self, run):
        from diagnostics import Detector

        self.detector_class = Detector
        self.overrides = run.experiment.detector_overrides or {}
        Detector(overrides=self.overrides)  # bad overrides fail here, before training, with rule.param named
        self.detector = None
        self.last_step = None
        self.pending: list[dict] = []  # events found but not stored yet

    def on_step(self, run, step, metrics):
        if self.detector is None:
            history = self.history(run, before=step)
            self.detector, replayed = self.detector_class.replay(history, self.overrides)
            self.pending.extend(replayed)  # stored already unless the last attempt died first
        if self.last_step is None or step > self.last_step:
            self.pending.extend(self.detector.update(step, metrics))
            self.last_step = step
        while self.pending:
            self.store(run, self.pending[0])
            self.pending.pop(0)

    @staticmethod
    def history(run, before: int) -> list[tuple[int, dict]]:
        return MetricPoint.steps(run.pk, through=before - 1)

    def store(self, run, found: dict) -> None:
        with transaction.atomic():
            event, created = DetectorEvent.record(run, found)
            if not created:
                return
            # Which events are announced (levels, recipients, cooldown) is the alerts app's decision.
            notification = Notification.create_for_event(event)
            if notification is not None:
                transaction.on_commit(lambda: send_notification_later(notification.pk))
        logger.info("run %s: %s %s at step %s", run.pk, event.level, event.rule, event.step)


def send_notification_later(notification_id: int) -> bool:
    """Queue the email; with the broker down it stays pending and the sweeper sends it later."""
    from worker import queues

    return queues.send(queues.SEND_NOTIFICATION, [notification_id], queues.DEFAULT)
