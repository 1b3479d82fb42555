"""Experiments and their runs. Postgres is the source of truth for a run's state; a Celery message
only says "go look at run N", so every state change here is a conditional UPDATE that a second,
stale or duplicated actor cannot win."""

import logging
import math
import shutil
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from diagnostics.aliases import renaming
from diagnostics.detector import fewest_steps_for_a_collapse
from diagnostics.metrics import CLOCK_KEYS, OUTCOME_KEYS
from trainer import checkpoint_files

logger = logging.getLogger(__name__)

# A training run's worker writes its heartbeat every few seconds, through steps of any length: silent this
# long, it is stopped or gone, and its run's ETA means nothing (the sweeper requeues it later).
ETA_SILENCE = 60.0


class ExperimentQuerySet(models.QuerySet):
    def for_user(self, user):
        return self.filter(owner=user)


class Experiment(models.Model):
    """What a user configured: a base trainer config, seeds and an optional grid. It expands into runs."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="experiments")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # The trainer preset the config started from ("" when a complete config was given); "re-run with
    # changes" shows the config as this preset plus overrides.
    preset = models.CharField(max_length=40, blank=True)
    # The trainer's config as TrainConfig.to_dict() gives it; validated by the trainer before saving.
    config = models.JSONField()
    seeds = models.JSONField(default=list)
    # {"algorithm.filter_ratio": [0.25, 0.5, 1.0], ...}: one run per combination and seed.
    grid = models.JSONField(default=dict, blank=True)
    # Per-experiment detector rule overrides, as diagnostics.Detector(overrides=...) takes them.
    detector_overrides = models.JSONField(default=dict, blank=True)
    alert_recipients = models.TextField(blank=True, help_text="Comma-separated; empty means the owner.")
    alert_on_warnings = models.BooleanField(default=False)
    # When its page last sent a test alert email: at most one a minute per user (TEST_EMAIL_INTERVAL)
    alert_test_at = models.DateTimeField(null=True, blank=True)
    imported = models.BooleanField(default=False, help_text="Metrics uploaded from a file, not trained here.")
    # Of an imported file's bytes: a second import of the same file is told which run already holds it.
    import_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    # The paper ablation it was created for (webapp.compare.ablations.ABLATIONS key), "" otherwise.
    ablation = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ExperimentQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "-created_at"])]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("experiment_detail", args=[self.pk])

    @property
    def from_file(self) -> bool:
        """Imported from a file: judged once, when imported, and nothing is emailed. An experiment logged
        live through the MLflow endpoint (webapp.tracking, its `mlflow` row) is imported too, and alerts."""
        return self.imported and not hasattr(self, "mlflow")

    @classmethod
    def create_with_runs(cls, owner, spec, planned=None) -> "Experiment":
        """Save the experiment and one run per (grid combination x seed), all or nothing, and send
        the runs to the workers once the transaction commits. Raises specs.SpecError when invalid."""
        from webapp.experiments import run_planning

        planned = planned if planned is not None else run_planning.plan(spec)
        with transaction.atomic():
            experiment = cls.objects.create(
                owner=owner,
                name=spec.name,
                description=spec.description,
                preset="" if spec.config is not None else spec.preset,
                config=planned[0].config,
                seeds=spec.seeds,
                grid=spec.grid,
                detector_overrides=spec.detector_overrides,
                alert_recipients=", ".join(spec.alert_recipients),
                alert_on_warnings=spec.alert_on_warnings,
            )
            runs = Run.objects.bulk_create(
                [
                    Run(
                        experiment=experiment,
                        label=run.label,
                        config=run.config,
                        preset=run.preset,
                        total_steps=run.config["schedule"]["steps"],
                    )
                    for run in planned
                ]
            )
            for run in runs:
                transaction.on_commit(run.enqueue)
        return experiment

    def status_counts(self, runs=None) -> dict[str, int]:
        """Runs per status: of `runs` (a queryset of this experiment's runs) or of all of them."""
        counts = dict.fromkeys(Run.Status.values, 0)
        for status in (self.runs.all() if runs is None else runs).values_list("status", flat=True):
            counts[status] += 1
        return counts

    def to_dict(self, runs=None) -> dict:
        data = {
            "id": self.pk,
            "name": self.name,
            "description": self.description,
            "preset": self.preset,
            "config": self.config,
            "seeds": self.seeds,
            "grid": self.grid,
            "detector_overrides": self.detector_overrides,
            "alert_recipients": self.recipients(),
            "alert_on_warnings": self.alert_on_warnings,
            "imported": self.imported,
            "created_at": self.created_at.isoformat(),
            "url": self.get_absolute_url(),
        }
        if runs is not None:
            data["runs"] = [run.to_dict() for run in runs]
        return data

    def export_body(self) -> dict:
        """This experiment as POST /api/experiments takes it: importing it (or sending it) creates the same
        runs. One made from a preset is written as the form shows it, preset, env, model, steps and the
        overrides on top of the preset (so a grid may vary the preset); one made from a complete config
        as that config (the first run's; the seeds and the grid set their own fields again in each run)."""
        body = {"name": self.name, "description": self.description, "seeds": self.seeds}
        if self.grid:
            body["grid"] = self.grid
        if self.detector_overrides:
            body["detector_overrides"] = self.detector_overrides
        if self.alert_recipients:
            body["alert_recipients"] = self.listed_recipients()
        body["alert_on_warnings"] = self.alert_on_warnings
        if self.preset:
            body.update(self._preset_inputs())
        else:
            body["config"] = self.config
        return body

    def _preset_inputs(self) -> dict:
        from webapp.experiments import form_inputs

        # The overrides are what the first run's config adds to the preset that run started from.
        first = self.runs.order_by("pk").only("preset").first()
        inputs = form_inputs.describe(
            self.config, first.preset if first and first.preset else self.preset, self.grid
        )
        overrides = inputs["overrides"]
        warm_start = (overrides.get("model") or {}).get("warm_start")
        if warm_start:  # a folder under the server's model root, as the user typed it
            overrides["model"]["warm_start"] = form_inputs.display_model(warm_start)
        body = {
            "preset": self.preset,
            "env": inputs["env"],
            "model": form_inputs.display_model(inputs["model"]),
        }
        if isinstance(inputs["steps"], int):
            body["steps"] = inputs["steps"]
        return {**body, "overrides": overrides} if overrides else body

    class NotAlerted(ValueError):
        """Alert settings for an experiment imported from a file: its runs were judged once, when imported."""

    def set_alerts(self, recipients: list[str], on_warnings: bool) -> None:
        """Who gets this experiment's alert emails (empty: the owner), and whether warnings are sent too."""
        if self.from_file:
            raise self.NotAlerted(
                f"experiment {self.pk} was imported from a file: its runs were judged once, when imported, and "
                "nothing is emailed"
            )
        self.alert_recipients = ", ".join(recipients)
        self.alert_on_warnings = on_warnings
        self.save(update_fields=["alert_recipients", "alert_on_warnings"])

    TEST_EMAIL_INTERVAL = timedelta(minutes=1)

    class TestEmailTooSoon(Exception):
        """A test email went out less than TEST_EMAIL_INTERVAL ago (from any experiment of this owner)."""

        def __init__(self, wait_seconds: int):
            super().__init__(wait_seconds)
            self.wait_seconds = wait_seconds

    def claim_test_email(self) -> None:
        """Mark a test email as sent now, or TestEmailTooSoon: the button sends mail to any address a user
        saved, at once, so it must not be a relay (a click a second, 50 addresses each)."""
        now = timezone.now()
        cutoff = now - self.TEST_EMAIL_INTERVAL
        with transaction.atomic():
            # The owner's row lock: two clicks at once (two tabs, two experiments) take turns here.
            type(self.owner).objects.select_for_update().filter(pk=self.owner_id).first()
            last = (
                Experiment.objects.filter(owner_id=self.owner_id, alert_test_at__gt=cutoff)
                .order_by("-alert_test_at")
                .values_list("alert_test_at", flat=True)
                .first()
            )
            if last is not None:
                raise Experiment.TestEmailTooSoon(
                    math.ceil((last + self.TEST_EMAIL_INTERVAL - now).total_seconds())
                )
            Experiment.objects.filter(pk=self.pk).update(alert_test_at=now)

    def listed_recipients(self) -> list[str]:
        """The addresses set on the experiment; none means the owner."""
        return [address.strip() for address in self.alert_recipients.split(",") if address.strip()]

    def recipients(self) -> list[str]:
        return self.listed_recipients() or ([self.owner.email] if self.owner.email else [])

    def delete_with_runs(self) -> int:
        """Delete the experiment and its runs with everything recorded about them (Run.delete_with_data),
        all or nothing; returns how many runs went. Run.StillTraining, and nothing deleted, while one of its
        runs is queued or running."""
        with transaction.atomic():
            # Its row lock first: a run added meanwhile (an MLflow client starting one in it) waits for
            # this delete rather than slipping past the runs' check.
            Experiment.objects.select_for_update().filter(pk=self.pk).first()
            try:
                deleted = self.runs.all().delete_with_data()
            except Run.StillTraining as refusal:
                raise Run.StillTraining(refusal.runs, self._training_refusal(refusal.runs)) from None
            Experiment.objects.filter(pk=self.pk).delete()  # and its MLflow name, if it has one
        return deleted

    @property
    def delete_refusal(self) -> str | None:
        """Why the experiment cannot be deleted now, naming each run not finished (queued or running), or None (as the
        page shows it; delete_with_runs checks again under its locks)."""
        training = self.runs.filter(status__in=(Run.Status.QUEUED, Run.Status.RUNNING)).select_related(
            "experiment"
        )
        runs = list(training.order_by("pk"))
        return self._training_refusal(runs) if runs else None

    # Up to this many runs in the way are each named with its state; more are counted (a grid's 64 runs
    # made a paragraph of the same sentence).
    NAMED_REFUSALS = 3

    def _training_refusal(self, runs: list["Run"]) -> str:
        if len(runs) == 1:
            return f"experiment {self.pk} has a run not finished: {runs[0].delete_refusal}"
        # A running run whose stop was asked is "stopping": nothing more to do but wait for it.
        state = {run.pk: "stopping" if run.stop_requested else run.status for run in runs}
        counts = Counter(state.values())
        if len(runs) <= self.NAMED_REFUSALS:
            states = ", ".join(f"run {run.pk} {state[run.pk]}" for run in runs)
        else:
            states = ", ".join(
                f"{counts[each]} {each}" for each in ("running", "stopping", "queued") if counts[each]
            )
        if self.imported:
            advice = (
                "they are logged by MLflow clients, which EchoLab cannot stop: end them in their scripts "
                f"(mlflow.end_run()), or wait until each is marked lost after {settings.MLFLOW_LOST_AFTER} s "
                "without a call, then delete it"
            )
        elif counts["stopping"] == len(runs):
            advice = "delete it once they have stopped"
        else:
            at_once = " (a queued run stops at once)" if counts["queued"] else ""
            advice = f"stop them first{at_once}, then delete it once they have stopped"
        return f"experiment {self.pk} has {len(runs)} runs not finished ({states}): {advice}"


class RunQuerySet(models.QuerySet):
    def for_user(self, user):
        return self.filter(experiment__owner=user)

    def active(self):
        return self.filter(archived_at__isnull=True)

    def archived(self):
        return self.filter(archived_at__isnull=False)

    def archive(self) -> int:
        """Archive those not archived yet (hidden from lists, kept whole, restorable); how many were."""
        return self.active().update(archived_at=timezone.now())

    def restore(self) -> int:
        return self.archived().update(archived_at=None)

    def in_queue_order(self):
        """The runs waiting for a worker, in the order workers take them (Run.next_in_queue) and pages
        show them (webapp.runs.queue): by when each joined the queue, whoever's, whatever message is sent."""
        return self.filter(status=Run.Status.QUEUED).order_by(*Run.QUEUE_ORDER)

    def delete_with_data(self) -> int:
        """Delete these runs and everything recorded about them, all or nothing, and return how many went:
        metric points and their rollups, step records, samples, detector events and their alert emails,
        the MLflow record; their checkpoint and artifact folders are removed once the transaction commits (a failure
        there is logged: the rows are gone either way). Run.StillTraining, naming each run that is queued
        or running, and nothing deleted: its worker (or MLflow client) would go on writing into rows that
        no longer exist.

        One DELETE per table, children first: a run may hold millions of points, which Django's cascade
        would read into Python (it does for any model with a signal receiver or a cascade of its own)."""
        from webapp.alerts.models import DetectorEvent, Notification
        from webapp.metrics.models import MetricPoint, MetricRollup, Sample, StepRecord
        from webapp.tracking.artifacts import remove_run_folders
        from webapp.tracking.models import ExternalRun

        with transaction.atomic():
            # Locks before the check, in webapp.tracking's order. The MLflow runs' detection first: no
            # detector writes events of a run being deleted. Then the runs' rows: a worker's claim, an
            # ingest batch and an MLflow call each lock or update the run's row before writing, so none
            # writes between the check and the delete (metric points have no foreign key to refuse an
            # orphan).
            ExternalRun.hold_detection(self.filter(host=ExternalRun.HOST).values_list("pk", flat=True))
            runs = list(self.select_for_update(of=("self",)).select_related("experiment"))
            training = [run for run in sorted(runs, key=lambda run: run.pk) if run.delete_refusal]
            if training:
                raise Run.StillTraining(training)
            ids = [run.pk for run in runs]
            # A run's alert emails and events are few (the detector reports changes, not every step): the
            # cascade's reading them (and deleting the links between them) costs little.
            Notification.objects.filter(run_id__in=ids).delete()
            DetectorEvent.objects.filter(run_id__in=ids).delete()
            for data in (Sample, StepRecord, MetricRollup, MetricPoint):
                data.objects.filter(run_id__in=ids).delete()
            artifacts = [
                run.artifact_dir for run in ExternalRun.objects.filter(run_id__in=ids).only("run_uuid")
            ]
            Run.objects.filter(pk__in=ids).delete()
            checkpoints = [run.checkpoint_dir for run in runs]
            transaction.on_commit(lambda: remove_folders(checkpoints))
            transaction.on_commit(lambda: remove_run_folders(artifacts))
        return len(ids)


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        STOPPED = "stopped"

    FINISHED = (Status.COMPLETED, Status.FAILED, Status.STOPPED)

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="runs")
    label = models.CharField(max_length=300, help_text="What sets this run apart: seed and grid values.")
    config = models.JSONField(help_text="The complete trainer config this run trains with.")
    # The trainer preset its config started from: the experiment's, or the grid's `preset` value.
    preset = models.CharField(max_length=40, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    stop_requested = models.BooleanField(default=False)

    # Where and how often it ran.
    attempt = models.PositiveIntegerField(default=0)
    attempt_log = models.JSONField(default=list, help_text="One entry per attempt: host, start, end, reason.")
    # RUN_MAX_ATTEMPTS counts the attempts since this one: a run its owner resumed gets them afresh.
    resumed_at_attempt = models.PositiveIntegerField(default=0)
    # A page that polls for new steps only must fetch the series whole again when this grows.
    rewrites = models.PositiveIntegerField(
        default=0, help_text="Batches written at or before a key's newest step (a step sent again, or late)."
    )
    host = models.CharField(max_length=255, blank=True)
    pid = models.IntegerField(null=True, blank=True)
    # The claimer's PID namespace (/proc/self/ns/pid): containers may share a host name, not process ids.
    pid_namespace = models.CharField(max_length=64, blank=True, default="")
    device = models.CharField(max_length=255, blank=True)

    # Progress, kept by the worker.
    step = models.IntegerField(default=0, help_text="Steps finished so far.")
    total_steps = models.IntegerField(default=0)
    eta_seconds = models.FloatField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    latest_metrics = models.JSONField(default=dict, help_text="Last value of each metric key, for lists.")

    error = models.TextField(blank=True)
    traceback = models.TextField(blank=True)

    # What the user keeps about a run (the runs table): a name shown instead of the label, tags,
    # notes, and archiving, which hides the run from lists until it is restored (nothing is deleted).
    name = models.CharField(max_length=200, blank=True, help_text="Shown instead of the label when set.")
    tags = models.JSONField(default=list, blank=True, help_text="Lower-case words, see webapp.runs.forms.")
    notes = models.TextField(blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    enqueued_at = models.DateTimeField(null=True, blank=True, help_text="When the last message was sent.")
    queued_at = models.DateTimeField(
        default=timezone.now,
        help_text="Its place in the queue: when it was created or resumed. A run requeued because its "
        "worker went keeps it, and so does one whose message is sent again.",
    )
    started_at = models.DateTimeField(null=True, blank=True, help_text="When the current attempt started.")
    finished_at = models.DateTimeField(null=True, blank=True)
    # A resumed run's duration is this plus the current attempt's, without the downtime between them.
    earlier_training = models.DurationField(
        default=timedelta(0), help_text="Training time of the earlier attempts (start to last heartbeat)."
    )

    objects = RunQuerySet.as_manager()
    QUEUE_ORDER = ("queued_at", "id")  # RunQuerySet.in_queue_order

    class Meta:
        ordering = ["experiment_id", "id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self):
        return f"{self.experiment.name} / {self.display_name}"

    def get_absolute_url(self):
        return reverse("run_detail", args=[self.pk])

    @property
    def eta(self) -> float | None:
        """Seconds left while it trains, as its worker last said; None when it is not training (a run
        finished before finish() cleared its ETA kept its last attempt's), or when its worker has been
        silent for ETA_SILENCE (a killed worker's run showed the same ETA for minutes)."""
        if self.status != self.Status.RUNNING or self.eta_seconds is None:
            return None
        silent = (timezone.now() - self.heartbeat_at).total_seconds() if self.heartbeat_at else 0.0
        return None if silent > ETA_SILENCE else self.eta_seconds

    @property
    def display_name(self) -> str:
        return self.name or self.label or f"Run {self.pk}"

    def archive(self) -> None:
        Run.objects.filter(pk=self.pk).archive()
        self.refresh_from_db(fields=["archived_at"])

    def restore(self) -> None:
        Run.objects.filter(pk=self.pk).restore()
        self.refresh_from_db(fields=["archived_at"])

    def to_dict(self, config: bool = False) -> dict:
        data = {
            "id": self.pk,
            "experiment": self.experiment_id,
            "label": self.label,
            "preset": self.preset,
            "status": self.status,
            "stop_requested": self.stop_requested,
            "step": self.step,
            "total_steps": self.total_steps,
            "eta_seconds": self.eta,
            "latest_metrics": self.latest_metrics,
            "attempt": self.attempt,
            "host": self.host,
            "device": self.device,
            "error": self.error,
            "created_at": self.created_at.isoformat(),
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "heartbeat_at": self.heartbeat_at.isoformat() if self.heartbeat_at else None,
            "name": self.name,
            "tags": self.tags,
            "notes": self.notes,
            "archived_at": self.archived_at.isoformat() if self.archived_at else None,
            "url": self.get_absolute_url(),
        }
        if config:
            data["config"] = self.config
        return data

    @property
    def progress_percent(self) -> int:
        """Share of total_steps done, 0 to 100: the one formula behind the run page, the payload it polls
        (webapp.metrics.api.run_state) and the experiment page."""
        if self.status == self.Status.COMPLETED:
            return 100
        return min(100, round(100 * self.step / self.total_steps)) if self.total_steps else 0

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def stopped_before_training(self) -> bool:
        """Stopped in the queue before any worker started it: nothing was trained or logged."""
        return self.status == self.Status.STOPPED and self.attempt == 0 and not self.experiment.imported

    @property
    def clock_key(self) -> str:
        """The seconds-per-step key its page's training-time axis sums: the first of CLOCK_KEYS it logged
        (TRL's step_time for a TRL run; ours when it logged none of them, yet)."""
        logged = self.latest_metrics or {}
        return next((key for key in CLOCK_KEYS if key in logged), CLOCK_KEYS[0])

    def too_short_for_a_collapse(self) -> tuple[int, int, str | None] | None:
        """(steps the collapse rule needs, steps this run logged of its outcome key, that key) for a finished
        run that logged fewer, so can get no collapse event (its page says so rather than a "None" that reads
        as healthy); else None. Logged steps of the key the rule judges (OUTCOME_KEYS: success, then
        validation success, then mean reward), not the step count: an import may log every 100th."""
        if (
            not self.is_finished
            or self.stopped_before_training
            or self.events.filter(level="collapse").exists()
            or not self.metric_points.exists()  # it logged nothing (failed loading its model): the page says so
        ):
            return None
        try:
            needs = fewest_steps_for_a_collapse(self.experiment.detector_overrides)
        except ValueError:  # overrides stored before a rule changed: the worker said so when it judged
            return None
        if needs is None:
            return None
        # Stored as logged: EchoLab's metrics API keeps other trainers' names (TRL's reward, RAGEN's
        # train/<env>/success), which the detector reads as ours.
        named = renaming(self.metric_points.values_list("key", flat=True).distinct())
        stored = {ours: key for key, ours in named.items() if ours in OUTCOME_KEYS}
        outcome = next((stored[key] for key in OUTCOME_KEYS if key in stored), None)
        logged = self.metric_points.filter(key=outcome).values("step")[:needs].count() if outcome else 0
        return (needs, logged, outcome) if logged < needs else None

    @property
    def attempt_started_at(self):
        """When its latest attempt started. A resume clears started_at (that attempt's time moves to
        earlier_training), so a run resumed and then stopped again in the queue, or requeued and stopped
        there, has it only in its attempt log."""
        if self.started_at or not self.attempt_log:
            return self.started_at
        started = self.attempt_log[-1].get("started")
        return datetime.fromisoformat(started) if started else None

    @property
    def earlier_attempts(self) -> list[dict]:
        """The attempt log less the attempt the page already shows: a finished run's last entry is the
        end of its current attempt (its status says how that ended)."""
        if self.is_finished:
            return [entry for entry in self.attempt_log if entry.get("attempt") != self.attempt]
        return self.attempt_log

    def enqueue(self) -> bool:
        """Send "train run N" to the gpu queue. With the broker down the run simply stays queued and
        the sweeper sends it later, so a failure here is logged, not raised."""
        from worker import queues

        if not queues.send(queues.TRAIN_RUN, [self.pk], queues.GPU):
            return False
        Run.objects.filter(pk=self.pk).update(enqueued_at=timezone.now())
        return True

    @classmethod
    def next_in_queue(cls, passed_over=()) -> "Run | None":
        """The run a free worker takes: the first in queue order that is not being stopped. Every "train
        a run" message makes a worker take the first run, not the one it named: the broker's order (a
        message sent again, one a worker held when it stopped and gave back) is not the queue's, and a
        lost message then leaves the newest run waiting for the sweeper, not an old one."""
        return (
            cls.objects.in_queue_order()
            .filter(stop_requested=False, experiment__imported=False)
            .exclude(pk__in=passed_over)
            .select_related("experiment__owner")
            .first()
        )

    def claim(self, host: str, pid: int, device: str, pid_namespace: str = "") -> bool:
        """queued -> running for exactly one caller; a duplicate or stale message gets False."""
        now = timezone.now()
        claimed = Run.objects.filter(pk=self.pk, status=self.Status.QUEUED, stop_requested=False).update(
            status=self.Status.RUNNING,
            attempt=F("attempt") + 1,
            host=host,
            pid=pid,
            pid_namespace=pid_namespace,
            device=device,
            started_at=now,
            heartbeat_at=now,
            eta_seconds=None,  # an earlier attempt's: this one's comes with its first step
            error="",
            traceback="",
        )
        self.refresh_from_db()
        return claimed == 1

    class TrainedElsewhere(ValueError):
        """Stop asked of a run that another process trains (an MLflow client, an import): nothing here can
        stop it."""

    class StillTraining(ValueError):
        """Delete asked of queued or running runs: stop them first. `runs`: those runs; the message is each
        one's delete_refusal, unless one is given (an experiment's)."""

        def __init__(self, runs: list, message: str = ""):
            super().__init__(message or "; ".join(run.delete_refusal for run in runs))
            self.runs = runs

    @property
    def delete_refusal(self) -> str | None:
        """Why the run cannot be deleted now, and what to do, or None: a queued or running run would go on
        being written (by its worker, or by the MLflow client that logs it)."""
        if self.status == self.Status.QUEUED:
            return f"run {self.pk} is queued: stop it first (a queued run stops at once), then delete it"
        if self.status != self.Status.RUNNING:
            return None
        if self.experiment.imported:
            return (
                f"run {self.pk} is running: it is logged by an MLflow client, which EchoLab cannot stop; end "
                "it in its script (mlflow.end_run()), or wait until it is marked lost after "
                f"{settings.MLFLOW_LOST_AFTER} s without a call, then delete it"
            )
        if self.stop_requested:
            return f"run {self.pk} is stopping: delete it once it has stopped, at its next step boundary"
        return f"run {self.pk} is running: stop it first, then delete it once it has stopped"

    def delete_with_data(self) -> None:
        """Delete this run and everything recorded about it (RunQuerySet.delete_with_data); a run deleted
        meanwhile is no error. Run.StillTraining while it is queued or running."""
        Run.objects.filter(pk=self.pk).delete_with_data()

    @property
    def has_checkpoints(self) -> bool:
        return self.checkpoint_dir.is_dir()

    def _checkpoint_steps(self) -> list[int]:
        """The steps its complete checkpoints on disk resume at."""
        return [
            checkpoint_files.step_of(path)
            for path in checkpoint_files.list_checkpoints(str(self.checkpoint_dir))
        ]

    @property
    def resumable_checkpoint(self) -> bool:
        """Whether a checkpoint at or before its stored step is on disk: the worker resumes from the newest
        such, and drops those ahead (trainer.checkpoint.drop_after)."""
        return any(step <= self.step for step in self._checkpoint_steps())

    @property
    def resumes_from(self) -> str:
        """Where its next attempt starts if resumed, in words: the worker continues from the last checkpoint
        it finds, and without one starts at step 0 (a run stopped while queued had none)."""
        if self.resumable_checkpoint:
            return "it continues from its last checkpoint"
        if self._checkpoint_steps():  # not its folder: the trainer makes that before its first checkpoint
            return (
                "it starts again from step 0: its checkpoints are all ahead of its stored steps (saved while "
                "its metrics could not be written), and resuming from one would skip steps"
            )
        if self.step == 0:
            return "it starts from step 0 (it had trained no step)"
        return "it starts again from step 0: no checkpoint of it was saved"

    def request_stop(self) -> None:
        """A queued run stops at once and never starts; a running one stops at its next step boundary; a
        finished one has nothing to stop (whoever trained it)."""
        if self.experiment.imported and not self.is_finished:
            raise Run.TrainedElsewhere(
                f"run {self.pk} is trained elsewhere (its experiment was imported or started by an MLflow "
                "client): EchoLab cannot stop it; stop the process that trains it"
            )
        now = timezone.now()
        with transaction.atomic():
            # started_at None: a requeued run's last attempt was counted in earlier_training when it was
            # requeued.
            Run.objects.filter(pk=self.pk, status=self.Status.QUEUED).update(
                status=self.Status.STOPPED,
                stop_requested=True,
                finished_at=now,
                started_at=None,
                attempt_log=self._log_noting(f"stopped in the queue {now:%Y-%m-%d %H:%M} UTC"),
            )
        Run.objects.filter(pk=self.pk, status=self.Status.RUNNING).update(stop_requested=True)
        self.refresh_from_db()

    def _log_noting(self, note: str) -> list[dict]:
        """The attempt log as stored, with `note` added to its last attempt's reason: what became of the run
        after that attempt ended (resumed, stopped again in the queue) belongs to no attempt of its own.
        Call it in the transaction that writes the log: it locks the run's row, so no other writer (a
        sweeper's requeue) adds an entry between this read and that write."""
        stored = Run.objects.select_for_update(no_key=True).only("attempt_log").filter(pk=self.pk).first()
        log = list(stored.attempt_log if stored else self.attempt_log)
        if log:
            log[-1] = {**log[-1], "reason": f"{log[-1]['reason']}; {note}"}
        return log

    class NotResumable(ValueError):
        """Resume asked of a run that is not stopped or failed."""

    def resume(self) -> None:
        """A stopped or failed run goes back to the queue with its metrics, events and checkpoints kept: its
        next attempt continues from its last checkpoint (the worker finds it; a run stopped before it
        started begins at step 0), with RUN_MAX_ATTEMPTS attempts afresh; sent to the gpu queue on commit."""
        if self.experiment.imported:
            raise Run.TrainedElsewhere(
                f"run {self.pk} is trained elsewhere (its experiment was imported or started by an MLflow "
                "client): EchoLab cannot resume it; resume the process that trained it"
            )
        trained = (
            (self.finished_at - self.started_at) if self.started_at and self.finished_at else timedelta(0)
        )
        with transaction.atomic():
            log = self._log_noting(f"resumed {timezone.now():%Y-%m-%d %H:%M} UTC")
            resumed = Run.objects.filter(
                pk=self.pk, status__in=(self.Status.STOPPED, self.Status.FAILED)
            ).update(
                status=self.Status.QUEUED,
                queued_at=timezone.now(),  # a new request: behind the runs queued before it
                eta_seconds=None,
                stop_requested=False,
                started_at=None,  # its attempt's time is now in earlier_training; the next attempt sets it
                finished_at=None,
                error="",
                traceback="",
                resumed_at_attempt=F("attempt"),
                earlier_training=F("earlier_training") + trained,
                attempt_log=log,
            )
        self.refresh_from_db()
        if not resumed:
            raise Run.NotResumable(
                f"run {self.pk} is {self.get_status_display().lower()}: only a stopped or failed run can be resumed"
            )
        transaction.on_commit(self.enqueue)

    def finish(self, status: str, error: str = "", traceback: str = "") -> bool:
        """running -> a final state, only for the attempt that owns the run."""
        assert status in self.FINISHED
        with transaction.atomic():  # failed and its email together: a retried finish() finds it done
            finished = Run.objects.filter(
                pk=self.pk, status=self.Status.RUNNING, attempt=self.attempt
            ).update(
                status=status,
                error=error,
                traceback=traceback,
                finished_at=timezone.now(),
                eta_seconds=None,  # nothing is left to wait for
                attempt_log=self.attempt_log
                + [self._attempt_entry(error.splitlines()[0] if error else status)],
            )
            self.refresh_from_db()
            if finished and status == self.Status.FAILED:
                self.tell_failure()
        return finished == 1

    def tell_failure(self) -> None:
        """The email that says this run has just failed (webapp.alerts: to its experiment's recipients)."""
        from webapp.alerts.models import Notification

        Notification.tell_failure(self)

    # Why a worker shutting down (Ctrl-C, SIGTERM) requeued its run: at a step boundary, after a checkpoint,
    # so that attempt lost nothing and is not one of the RUN_MAX_ATTEMPTS a run may lose.
    SHUT_DOWN = "worker shut down"

    def lost_attempts(self, log: list[dict]) -> int:
        """Attempts in `log` since the run was resumed that lost their worker (a clean shutdown did not)."""
        return sum(
            entry["attempt"] > self.resumed_at_attempt and not entry["reason"].startswith(self.SHUT_DOWN)
            for entry in log
        )

    def requeue(self, reason: str) -> bool:
        """running -> queued (its worker died or shut down), recording why the attempt ended. A run whose
        stop was requested is not requeued: it is to be finished as stopped."""
        requeued = Run.objects.filter(
            Q(pk=self.pk, status=self.Status.RUNNING, attempt=self.attempt, stop_requested=False)
        ).update(
            status=self.Status.QUEUED,
            pid=None,
            eta_seconds=None,  # it knows nothing of the wait in the queue
            attempt_log=self.attempt_log + [self._attempt_entry(reason)],
            earlier_training=self.earlier_training + self._attempt_time(),
            # its attempt's time is now in earlier_training (a duration counted the wait in the queue too)
            started_at=None,
        )
        self.refresh_from_db()
        return requeued == 1

    def give_up(self, reason: str) -> bool:
        """running (stale heartbeat, attempts used up) -> failed, the error listing every attempt's end."""
        log = self.attempt_log + [self._attempt_entry(reason)]
        since = [entry for entry in log if entry["attempt"] > self.resumed_at_attempt]  # since it was resumed
        lost = self.lost_attempts(log)
        shut_down = f", {len(since) - lost} more ended by a worker shutting down" if len(since) > lost else ""
        error = f"gave up after {lost} attempt{'s' * (lost != 1)}{shut_down}:\n" + "\n".join(
            f"attempt {entry['attempt']} on {entry['host'] or '?'}: {entry['reason']}" for entry in since
        )
        with transaction.atomic():  # failed and its email together
            failed = Run.objects.filter(pk=self.pk, status=self.Status.RUNNING, attempt=self.attempt).update(
                # It ended when it was last heard from, not when the sweeper noticed (a duration is training
                # time).
                status=self.Status.FAILED,
                error=error,
                attempt_log=log,
                pid=None,
                eta_seconds=None,
                finished_at=Coalesce(F("heartbeat_at"), Value(timezone.now())),
            )
            self.refresh_from_db()
            if failed:
                self.tell_failure()
        return failed == 1

    def _attempt_time(self) -> timedelta:
        """The current attempt's training time: from its start to its last heartbeat."""
        if self.started_at is None:
            return timedelta(0)
        return max(timedelta(0), (self.heartbeat_at or timezone.now()) - self.started_at)

    @property
    def training_time(self) -> timedelta | None:
        """Start to finish (to now while it runs) over all attempts, without the time between them."""
        if self.started_at is None:
            return self.earlier_training or None  # stopped while queued again, or never started
        return self.earlier_training + ((self.finished_at or timezone.now()) - self.started_at)

    def _attempt_entry(self, reason: str) -> dict:
        return {
            "attempt": self.attempt,
            "host": self.host,
            "device": self.device,
            "started": self.started_at.isoformat() if self.started_at else None,
            "ended": timezone.now().isoformat(),
            "reason": reason,
        }

    @property
    def checkpoint_dir(self):
        return settings.CHECKPOINT_ROOT / str(self.pk)


def remove_folders(folders: list[Path], what: str = "checkpoints of deleted run") -> None:
    """Remove deleted runs' folders (checkpoints; webapp.tracking.artifacts' too). Called after the rows are
    gone, so a failure (a read-only disk, a file in use, a tree too deep) is logged, not raised: the run is
    deleted all the same, and the next folder still goes."""
    for folder in folders:
        try:
            shutil.rmtree(folder)
        except FileNotFoundError:  # never made: no checkpoint, no artifact
            pass
        except Exception as error:  # never a 500 for a delete that has committed
            logger.error("%s %s not removed: %s", what, folder.name, error)
