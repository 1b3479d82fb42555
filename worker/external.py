"""The Echo Trap detector for runs logged through the MLflow endpoint (webapp/tracking): each write asks
for detect_external_run, which feeds the run's newly complete steps to worker.detection.EchoTrapHook,
so events, emails and cooldowns are the same as for a native run.

The hook is kept per worker process while it is current (its last step is the run's detected_through);
otherwise it is rebuilt by replaying the stored steps, which gives the same detector. The run's
detection lock is held meanwhile (ExternalRun.hold_detection), so two workers never judge the same steps.

Steps judged already are final: a rebuild stores none of their events again, so which worker process
takes a run's next detection changes nothing. Except when some were sent again since (a trainer resumed
from a checkpoint logs its steps again: Run.rewrites grew): then every process rebuilds, and the events
the stored values give at those steps are added (and alerted like any new event); those the first values
gave stay.
"""

import logging

from django.db import transaction

from webapp.metrics.models import MetricPoint
from webapp.tracking.models import ExternalRun
from worker.detection import EchoTrapHook

logger = logging.getLogger(__name__)

_hooks: dict[int, EchoTrapHook] = {}


def detect(run_id: int) -> int:
    """Judge the run's complete steps not judged yet; returns how many were judged."""
    with transaction.atomic():
        ExternalRun.hold_detection([run_id])
        external = ExternalRun.objects.select_related("run__experiment").filter(pk=run_id).first()
        if external is None:
            return 0
        through = external.judged_through()
        start = -1 if external.detected_through is None else external.detected_through
        if through <= start:
            return 0
        rewritten = external.run.rewrites != external.judged_rewrites
        hook = _hooks.get(run_id)
        if hook is None or hook.last_step != external.detected_through or rewritten:
            try:
                hook = EchoTrapHook(external.run, keep_replayed=rewritten)
            except ValueError as error:  # overrides the detector refuses
                logger.warning("run %s: detector overrides rejected (%s); not judged", run_id, error)
                return 0
        steps = MetricPoint.steps(run_id, after=start, through=through)
        try:
            for step, metrics in steps:
                hook.on_step(external.run, step, metrics)
        except Exception:
            # Its detector may hold steps whose events were rolled back: the next try replays the stored ones.
            _hooks.pop(run_id, None)
            raise
        ExternalRun.objects.filter(pk=run_id).update(
            detected_through=through, judged_rewrites=external.run.rewrites
        )
        hook.last_step = through  # a step with no points (skipped by the script) is judged too: as absent
        if external.run.is_finished:
            _hooks.pop(run_id, None)
        else:
            _hooks[run_id] = hook
    return len(steps)
