"""Runs trained elsewhere and logged with the `mlflow` client. An MLflow experiment of a user is an EchoLab
experiment (imported, like an uploaded metrics file, with no trainer config) and each MLflow run is an
EchoLab run of it, so run pages, charts, the detector, alerts, compare and export treat them as any other.

What MLflow has and a native run has not lives here: the experiment's MLflow name (unique per user), the
run's MLflow id and tags, and how far the detector has judged it. Params are the run's config. Metric keys
are renamed to ours on the way in (diagnostics.aliases), so `reward` from TRL is charted and judged as
`train/reward_mean`; the run remembers the name it logged (`ExternalRun.logged_as`), so the client reads
back `reward`, as from MLflow's own server.

The detector judges a step once it is complete: when a later step arrives (a script may log one key at a
time) or the run ends. That happens in a worker (worker/external.py), sent after each write commits.

Lock order. Two transactions that take the same locks in opposite orders can deadlock (Postgres then
aborts one), so every transaction that touches an MLflow run takes them in this order, skipping any:
1. the run's detection lock (ExternalRun.hold_detection: the detector's worker, and a delete, which must
   not remove a run under a detection writing its events);
2. the Run row: writers (ingest.write, log, update, mark_lost, the alerts' cooldown) take FOR NO KEY
   UPDATE, which leaves alone the KEY SHARE lock a detector event's foreign key check takes at commit;
   only a delete takes FOR UPDATE, and it holds the detection lock already;
3. the ExternalRun row (its tags, lost_at, detected_through): never held while waiting for the Run row.
"""

import contextlib
import json
import math
import random
import re
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import cached_property

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from diagnostics.aliases import ALIASES, alias_of, renaming
from diagnostics.metrics import OUTCOME_KEYS, PATTERN_ALIASES, out_of_bounds
from diagnostics.series import key_problem
from webapp.core.converters import parse_id
from webapp.experiments.models import Experiment, Run
from webapp.metrics import ingest
from webapp.metrics.models import MetricPoint
from webapp.tracking import protocol
from webapp.tracking.protocol import MlflowError, invalid

DEFAULT_EXPERIMENT_ID = "0"  # the client's experiment when the script sets none
# What MLflow's server takes as an experiment id (Python's int(), in ASCII digits).
_EXPERIMENT_ID = re.compile(r"\s*([-+]?)([0-9]+)\s*")
DEFAULT_EXPERIMENT_NAME = "Default"
RUN_NAME_TAG = "mlflow.runName"
PARENT_RUN_TAG = "mlflow.parentRunId"  # set by mlflow.start_run(nested=True)
DATASET_CONTEXT_TAG = (
    "mlflow.data.context"  # an input's tag: what the run used a dataset for (training, eval)
)
# Given back with every run (not stored): the run's id and page in EchoLab.
ECHOLAB_RUN_ID_TAG = f"{protocol.ECHOLAB_TAG_PREFIX}run_id"
ECHOLAB_RUN_URL_TAG = f"{protocol.ECHOLAB_TAG_PREFIX}run_url"
# Our keys that other trainers' names are renamed to: the ones ExternalRun.logged_as keeps a name for.
OUR_KEYS_WITH_ALIASES = frozenset(ALIASES.values()) | {ours for _, ours in PATTERN_ALIASES}
# The first key of the detection lock's pg_advisory_xact_lock(int, int), the second being the run's id:
# any constant, as long as nothing else in the database takes advisory locks under it.
DETECTION_LOCK = 1_000_016


class ExternalExperimentQuerySet(models.QuerySet):
    def for_user(self, user):
        return self.filter(owner=user)


class ExternalExperiment(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mlflow_experiments"
    )
    name = models.CharField(max_length=protocol.MAX_EXPERIMENT_NAME_LENGTH)
    experiment = models.OneToOneField(Experiment, on_delete=models.CASCADE, related_name="mlflow")
    tags = models.JSONField(default=dict, blank=True)
    # Where its runs' files go when the script named a place (create_experiment's artifact_location: a
    # bucket, a shared path): the client writes them there itself, as with an MLflow server that does not
    # serve artifacts, and EchoLab neither receives nor lists them. Blank: EchoLab keeps them.
    artifact_location = models.CharField(max_length=protocol.MAX_ARTIFACT_LOCATION_LENGTH, blank=True)
    # MLflow's last_update_time: its store moves it when an experiment is renamed (or deleted, restored)
    renamed_at = models.DateTimeField(null=True, blank=True)

    objects = ExternalExperimentQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="mlflow_experiment_name_unique")
        ]
        ordering = ["experiment_id"]

    def __str__(self):
        return self.name

    @property
    def mlflow_id(self) -> str:
        """Its id in MLflow's API: the EchoLab experiment's, but "0" for the user's Default one, as MLflow's
        server answers for the experiment a script that sets none logs to."""
        return DEFAULT_EXPERIMENT_ID if self.name == DEFAULT_EXPERIMENT_NAME else str(self.experiment_id)

    @classmethod
    def create(
        cls, owner, name: str, tags: dict | None = None, artifact_location: str = ""
    ) -> "ExternalExperiment":
        """RESOURCE_ALREADY_EXISTS when the user has an MLflow experiment of that name."""
        try:
            with transaction.atomic():
                experiment = Experiment.objects.create(
                    owner=owner,
                    name=name,
                    config={},
                    imported=True,
                    description="Trained elsewhere; logged through EchoLab's MLflow endpoint.",
                )
                return cls.objects.create(
                    owner=owner,
                    name=name,
                    experiment=experiment,
                    tags=tags or {},
                    artifact_location=artifact_location,
                )
        except IntegrityError:
            raise MlflowError("RESOURCE_ALREADY_EXISTS", f"experiment {name!r} already exists") from None

    def rename(self, name: str) -> None:
        """MLflow's rename, which the EchoLab experiment follows. The Default experiment is known by its name
        (its id "0", mlflow_id): it keeps it, and no other takes it."""
        if DEFAULT_EXPERIMENT_NAME in (self.name, name) and name != self.name:
            raise invalid(
                "new_name",
                f"the experiment named {DEFAULT_EXPERIMENT_NAME!r} is id 0, where scripts that choose none log: "
                "it keeps its name, and no other experiment takes it",
            )
        try:
            with transaction.atomic():
                self.renamed_at = timezone.now()
                ExternalExperiment.objects.filter(pk=self.pk).update(name=name, renamed_at=self.renamed_at)
                Experiment.objects.filter(pk=self.experiment_id).update(name=name)
        except IntegrityError:
            raise MlflowError("RESOURCE_ALREADY_EXISTS", f"experiment {name!r} already exists") from None
        self.name = self.experiment.name = name

    def change_tags(self, key: str, value: str | None) -> None:
        """Set a tag, or delete it (value None: RESOURCE_DOES_NOT_EXIST when it has none, in MLflow's words),
        under the experiment's row lock: concurrent calls keep each other's tags."""
        with transaction.atomic():
            tags = (
                ExternalExperiment.objects.select_for_update().values_list("tags", flat=True).get(pk=self.pk)
            )
            if value is not None:
                tags[key] = value
            elif tags.pop(key, None) is None:
                raise MlflowError(
                    "RESOURCE_DOES_NOT_EXIST",
                    f"No tag with name: {key} in experiment with id {self.mlflow_id}",
                )
            ExternalExperiment.objects.filter(pk=self.pk).update(tags=tags)
        self.tags = tags

    @classmethod
    def get_for(cls, owner, experiment_id: str) -> "ExternalExperiment":
        """The user's experiment with that MLflow id; "0" is their "Default" one, made on first use.
        Another user's experiment does not exist, as far as this user can tell."""
        found = cls.find_for(owner, experiment_id)
        if found is None:
            raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"no experiment with id {experiment_id!r}")
        return found

    @classmethod
    def refuse_missing(cls, owner, experiment_id: str) -> None:
        """get_for's refusal of an experiment that is not there, making none: the Default one (id 0) is
        there on MLflow's server always."""
        integer = _EXPERIMENT_ID.fullmatch(experiment_id)
        if integer is None or (integer[2].lstrip("0") or "0") != DEFAULT_EXPERIMENT_ID:
            cls.get_for(owner, experiment_id)

    @classmethod
    def find_for(cls, owner, experiment_id: str) -> "ExternalExperiment | None":
        """get_for, or None where it says the experiment does not exist. An id that is not an integer is
        refused, as MLflow's server refuses it (an integer of no experiment of the user's is not there)."""
        integer = _EXPERIMENT_ID.fullmatch(experiment_id)
        if integer is None:
            raise MlflowError(
                "INVALID_PARAMETER_VALUE",
                f"Invalid experiment ID {experiment_id!r}. Experiment ID must be a valid integer.",
            )
        sign, digits = integer.groups()
        # " 7", "+7" and "007" name experiment 7, as int() reads them
        experiment_id = digits.lstrip("0") or "0"
        if sign == "-" and experiment_id != "0":
            return None
        if experiment_id == DEFAULT_EXPERIMENT_ID:
            found = cls.objects.for_user(owner).filter(name=DEFAULT_EXPERIMENT_NAME).first()
            if found is None:
                try:
                    return cls.create(owner, DEFAULT_EXPERIMENT_NAME)
                except MlflowError:  # made meanwhile by a concurrent request
                    return cls.objects.for_user(owner).get(name=DEFAULT_EXPERIMENT_NAME)
            return found
        number = parse_id(experiment_id)
        if number is None:
            return None
        return cls.objects.for_user(owner).select_related("experiment").filter(experiment_id=number).first()

    def searched(self, name: str):
        """The value experiments/search filters and sorts the experiment by; None: it has none."""
        if name.startswith("tags."):
            return self.tags.get(name.removeprefix("tags."))
        return {
            "name": lambda: self.name,
            "experiment_id": lambda: float(self.mlflow_id),
            "creation_time": lambda: protocol.millis(self.experiment.created_at),
            "last_update_time": lambda: self.last_update_time,
        }[name]()

    @property
    def location(self) -> str:
        """Where its runs' files go: its own artifact_location, else EchoLab's artifact proxy."""
        return self.artifact_location or f"mlflow-artifacts:/{self.mlflow_id}"

    @property
    def last_update_time(self) -> int:
        return protocol.millis(self.renamed_at or self.experiment.created_at)

    def to_mlflow(self) -> dict:
        created = protocol.millis(self.experiment.created_at)
        return {
            "experiment_id": self.mlflow_id,
            "name": self.name,
            "artifact_location": self.location,
            "lifecycle_stage": "active",
            "creation_time": created,
            "last_update_time": self.last_update_time,
            "tags": protocol.pairs(self.tags),
        }


def new_run_uuid() -> str:
    return uuid.uuid4().hex


# A run the script does not name is named as MLflow's server names one: an adjective, a noun and a number
# ("bright-owl-417"), from word lists of our own.
_NAME_WORDS = (
    "amber bold brave bright calm clever cool crisp curious dapper eager fancy gentle glad golden happy "
    "honest jolly keen kind lively lucky merry mighty nimble polite proud quick quiet rare shy silent "
    "sleek smart steady sunny swift tidy vivid warm wise zesty",
    "ant bat bear bee boar carp cat crab crane crow deer dog dove duck eel elk finch fox frog goat gull "
    "hare hawk heron horse lark lion lynx mole moth newt owl ox panda seal shrew snail swan toad trout "
    "vole wasp whale wolf wren yak",
)


def random_run_name() -> str:
    adjective, noun = (random.choice(words.split()) for words in _NAME_WORDS)
    return f"{adjective}-{noun}-{random.randrange(1000)}"


class ExternalRunQuerySet(models.QuerySet):
    def for_user(self, user):
        return self.filter(run__experiment__owner=user)


class ExternalRun(models.Model):
    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="mlflow")
    run_uuid = models.CharField(max_length=32, unique=True, default=new_run_uuid)
    user_id = models.CharField(
        max_length=255, blank=True, help_text="MLflow's user_id, as the client sent it."
    )
    tags = models.JSONField(default=dict, blank=True)
    # The highest step the detector has judged (worker/external.py); None before the first.
    detected_through = models.IntegerField(null=True, blank=True)
    # The run's Run.rewrites when the detector last judged: more since, and steps it judged were sent again.
    judged_rewrites = models.PositiveIntegerField(default=0)
    lost_at = models.DateTimeField(null=True, blank=True, help_text="When the sweeper found it silent.")
    # Writes refused (a step out of range, a fraction of 55, a param changed): the client's asynchronous
    # logging (TRL's) reports a refusal only in the script's own log, so the run page says so.
    refused_writes = models.PositiveIntegerField(default=0)
    last_refusal = models.TextField(blank=True)
    last_refused_at = models.DateTimeField(null=True, blank=True)
    # Our key -> the name this run logged it under first, for each of our keys that other trainers'
    # names are renamed to (`train/reward_mean` -> `reward`): it keeps that name's points from then on,
    # and the client reads them back under it (to_mlflow). A run made before this field has none.
    logged_as = models.JSONField(default=dict, blank=True)
    # The datasets it used (runs/log-inputs: mlflow.log_input), as runs/get answers them, first logged first.
    inputs = models.JSONField(default=list, blank=True)
    # Stored keys the script logs without a step, numbered in the order they arrive (_numbered).
    stepless = models.JSONField(default=list, blank=True)
    # Of each such key, the point MLflow's store answers as its value (get_run, searches): the newest by the
    # client's timestamp, then the largest, which need not be the last to arrive: [timestamp, value as
    # protocol.double writes it]. A key numbered before this field was kept has none: its last point.
    stepless_newest = models.JSONField(default=dict, blank=True)

    objects = ExternalRunQuerySet.as_manager()

    HOST = ingest.MLFLOW_HOST  # an MLflow run's Run.host: what tells one apart in a run's state, at no query

    def __str__(self):
        return self.run_uuid

    @property
    def artifact_dir(self):
        """The files its script logged (webapp.tracking.artifacts), named by its random id: a run made after
        a database restore cannot find an older run's folder under its own name."""
        return settings.ARTIFACT_ROOT / self.run_uuid

    @property
    def artifact_uri(self) -> str:
        """Where the client sends its files: under its experiment's location, as MLflow's server makes the
        path (EchoLab's artifact proxy, unless the experiment names a place of its own)."""
        return f"{self.run.experiment.mlflow.location.rstrip('/')}/{self.run_uuid}/artifacts"

    def tags_listed(self) -> list[tuple[str, str]]:
        """The script's tags as its run page lists them: its own first, then the client's mlflow.* ones."""
        return sorted(self.tags.items(), key=lambda tag: (tag[0].startswith("mlflow."), tag[0]))

    def parent(self) -> "ExternalRun | None":
        """The run this one is nested in, if it is its owner's too."""
        parent_id = self.tags.get(PARENT_RUN_TAG)
        if not parent_id:
            return None
        owner = self.run.experiment.owner
        return ExternalRun.objects.for_user(owner).select_related("run").filter(run_uuid=parent_id).first()

    @staticmethod
    def hold_detection(run_ids) -> None:
        """Wait until no detection of these runs is under way, and keep others from starting until this
        transaction ends (the first lock of the module docstring's order: a transaction-level advisory
        lock, not the ExternalRun row, which writers take after the Run row). SQLite, the embedded
        default, has no row locks to order (one writer at a time) and no advisory locks: nothing to do."""
        ids = sorted(run_ids)
        if connection.vendor != "postgresql" or not ids:
            return
        with connection.cursor() as cursor:
            # One statement, in id order (two deletes of overlapping runs take turns): the sorted subquery
            # is scanned, and each lock taken, in its order.
            cursor.execute(
                "SELECT count(pg_advisory_xact_lock(%s, id)) FROM (SELECT unnest(%s::int[]) AS id ORDER BY 1) ids",
                [DETECTION_LOCK, ids],
            )

    @classmethod
    def find_for(cls, owner, run_id: str) -> "ExternalRun | None":
        """The user's run with that MLflow id; None for another user's run or one that is not there."""
        return (
            cls.objects.for_user(owner)
            .select_related("run__experiment__mlflow")
            .filter(run_uuid=run_id)
            .first()
        )

    @classmethod
    def get_for(cls, owner, run_id: str) -> "ExternalRun":
        found = cls.find_for(owner, run_id)
        if found is None:
            raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"no run with id {run_id!r}")
        return found

    @classmethod
    def get_active_for(cls, owner, run_id: str) -> "ExternalRun":
        """get_for, for a write: a deleted (archived) run takes none until restored, as in MLflow."""
        return cls.active(cls.get_for(owner, run_id), run_id)

    @staticmethod
    def active(found: "ExternalRun", run_id: str) -> "ExternalRun":
        """`found`, unless it is deleted (archived): then the refusal of a write to it."""
        if found.run.archived_at is not None:
            raise MlflowError(
                "INVALID_PARAMETER_VALUE",
                f"The run {run_id} must be in the 'active' state. Current state is deleted.",
            )
        return found

    @classmethod
    def start(
        cls, experiment: ExternalExperiment, name: str, tags: dict, user_id: str, start_time: datetime
    ) -> "ExternalRun":
        """A running EchoLab run in `experiment`. A name used before is used again: MLflow allows it,
        and the runs stay apart by id (the run pages show both)."""
        name = name or tags.get(RUN_NAME_TAG) or random_run_name()
        with transaction.atomic():
            run = Run.objects.create(
                experiment=experiment.experiment,
                label=name[:300],
                config={},
                status=Run.Status.RUNNING,
                attempt=1,
                started_at=start_time,
                heartbeat_at=timezone.now(),
                host=cls.HOST,
            )
            return cls.objects.create(run=run, user_id=user_id[:255], tags={**tags, RUN_NAME_TAG: name})

    # Writing. Each method takes the run's row lock before its first write (as ingest.write does), so
    # concurrent calls for one run take turns.

    def log(
        self,
        metrics: list[tuple[str, float, int, int | None]],
        params: dict[str, str],
        tags: dict[str, str],
        where: str = "metrics[{index}].",
    ) -> None:
        """Metrics as (key, value, step, timestamp or None), renamed to ours, kept with their timestamps;
        params become the config (a param keeps its first value, as in MLflow); tags are kept. All or
        nothing. `where` names a metric's fields in errors: a log-batch's list, or "" for log-metric's one
        metric, whose fields are the request's."""
        self.check_metrics(metrics, where)
        named, claims = self._points(metrics, self.logged_as, where)
        at_zero = any(step == 0 for step, *_ in named)  # perhaps logged without a step
        if tags.get(RUN_NAME_TAG) == "":
            # MLflow's store renames a run only to a non-empty name: an empty one changes nothing
            tags = {key: value for key, value in tags.items() if key != RUN_NAME_TAG}
        with transaction.atomic():
            if params or tags or claims or at_zero:
                run = Run.objects.select_for_update(no_key=True).only("config").get(pk=self.run_id)
            if claims:
                named = self._claim(metrics, where)
            if at_zero:
                named = self._numbered(named)
            points, logged_at = _collapsed(named)
            if params:
                changed = {key: value for key, value in params.items() if run.config.get(key, value) != value}
                if changed:
                    key = next(iter(changed))
                    raise invalid(
                        f"params[{key!r}]",
                        f"is already {run.config[key]!r}; MLflow params cannot change (got {changed[key]!r})",
                    )
                run.config = {**run.config, **params}
                Run.objects.filter(pk=run.pk).update(config=run.config)
            if tags:
                self._add_tags(tags)
                if RUN_NAME_TAG in tags:
                    Run.objects.filter(pk=run.pk).update(label=tags[RUN_NAME_TAG][:300])
            # A key logged without steps is numbered in arrival order (_numbered): its points are no steps of
            # the run, whose step the detector judges by (a loss logged per batch beside a success logged per
            # epoch would carry the run past epochs whose success has not come yet), unless it is the run's
            # outcome (_counted_outcome).
            unstepped = frozenset(self.stepless)
            if points:
                # which locks the run's row first
                try:
                    ingest.write(
                        self.run_id, points, finished_ok=True, logged_at=logged_at, unstepped=unstepped
                    )
                except ingest.Invalid as error:  # more keys than a run may log
                    # named as the request names it: log-batch's list, log-metric's own `key`
                    field = "metrics" if where else "key"
                    raise invalid(field, next(iter(error.errors.values()))) from None
            stepped = max((step for step, key, _ in points if key not in unstepped), default=None)
            counted = self._counted_outcome() if points else None
            self._heard_from(stepped if counted is None else max(counted, stepped or 0))
        if points:
            transaction.on_commit(lambda: send_detection_soon(self.run_id))

    @classmethod
    def ingested(cls, run: Run, points: list[tuple[int, str, float | None]]) -> None:
        """`points` were written into `run` through POST /api/runs/<id>/metrics (which moved its heartbeat
        and step on, and takes no points for a lost run): if it is an MLflow run, its detector judges them
        as log-batch's. `run.step` becomes the run's new step."""
        if run.host != cls.HOST or not points:
            return
        run.step = max(run.step or 0, max(step for step, _, _ in points))
        transaction.on_commit(lambda: send_detection_soon(run.pk))

    @contextlib.contextmanager
    def refusals_noted(self):
        """A write into the run whose refusal (MlflowError) is counted on the run, after its transaction
        rolled back, and raised on to the client."""
        try:
            yield
        except MlflowError as error:
            if error.status == 400:
                ExternalRun.objects.filter(pk=self.pk).update(
                    refused_writes=F("refused_writes") + 1,
                    last_refusal=error.message[:2000],
                    last_refused_at=timezone.now(),
                )
            raise

    def add_inputs(self, datasets: list[dict]) -> None:
        """runs/log-inputs: each dataset (protocol.dataset_input) once, by name and digest; one logged again
        keeps its first record, as MLflow's store does."""
        with transaction.atomic():
            inputs = (
                ExternalRun.objects.select_for_update(no_key=True)
                .values_list("inputs", flat=True)
                .get(pk=self.pk)
            )
            known = {(each["dataset"]["name"], each["dataset"]["digest"]) for each in inputs}
            for each in datasets:
                identity = (each["dataset"]["name"], each["dataset"]["digest"])
                if identity not in known:
                    known.add(identity)
                    inputs.append(each)
            # Kept in the run's row, which every runs/get reads: bounded, as MLflow's body limit bounds a call
            size = len(json.dumps(inputs))
            if len(inputs) > protocol.MAX_DATASETS_PER_RUN or size > protocol.MAX_DATASET_BYTES_PER_RUN:
                raise invalid(
                    "datasets",
                    f"the run would keep {len(inputs):,} datasets in {size:,} bytes; EchoLab keeps at most "
                    f"{protocol.MAX_DATASETS_PER_RUN:,} a run, in {protocol.MAX_DATASET_BYTES_PER_RUN:,} bytes",
                )
            self.inputs = inputs
            ExternalRun.objects.filter(pk=self.pk).update(inputs=inputs)

    def delete_tag(self, key: str) -> None:
        """runs/delete-tag: the tag gone, as MLflow's store deletes it; a tag the run does not have is
        RESOURCE_DOES_NOT_EXIST, with MLflow's message."""
        with transaction.atomic():
            # The Run row first, as every writer of the tags takes it (log, update): a delete between their
            # read and their write was undone by it
            Run.objects.select_for_update(no_key=True).filter(pk=self.run_id).first()
            tags = ExternalRun.objects.values_list("tags", flat=True).get(pk=self.pk)
            if key not in tags:
                raise MlflowError(
                    "RESOURCE_DOES_NOT_EXIST", f"No tag with name: {key} in run with id {self.run_uuid}"
                )
            self.tags = {name: value for name, value in tags.items() if name != key}
            ExternalRun.objects.filter(pk=self.pk).update(tags=self.tags)

    def _add_tags(self, tags: dict[str, str]) -> None:
        """Under the run's row lock: the tags as stored now, not as this request read them."""
        self.tags = {**ExternalRun.objects.values_list("tags", flat=True).get(pk=self.pk), **tags}
        ExternalRun.objects.filter(pk=self.pk).update(tags=self.tags)

    @staticmethod
    def check_metrics(metrics, where: str = "metrics[{index}].") -> None:
        """Each metric's step, name and value (a fraction within 0..1); a refusal names the first bad one."""
        named = set()  # a batch names a few keys many times (50 keys x 20 steps): each is checked once
        for index, (key, value, step, _) in enumerate(metrics):
            if not 0 <= step <= ingest.MAX_STEP:
                raise invalid(
                    f"{where.format(index=index)}step", f"must be between 0 and {ingest.MAX_STEP}, got {step}"
                )
            if key not in named:
                # MLflow's rule, then the one rule for metric names (files, ingest, here)
                problem = protocol.mlflow_name_problem(key) or key_problem(key)
                if problem:
                    raise invalid(f"{where.format(index=index)}key", problem)
                named.add(key)
            problem = out_of_bounds(key, value)  # a success rate of 7.5
            if problem:
                raise invalid(f"{where.format(index=index)}value", problem)

    @staticmethod
    def renames_any(points: list[tuple[int, str, float | None]]) -> bool:
        """Whether points sent to POST /api/runs/<id>/metrics hold another trainer's name for one of our
        keys (api_points would rename them); most batches hold none and need no lookup."""
        return any(alias_of(key) is not None for key in {key for _, key, _ in points})

    def api_points(self, points: list[tuple[int, str, float | None]]) -> list[tuple[int, str, float | None]]:
        """Points sent to POST /api/runs/<id>/metrics, named as log-batch names them, so that a script
        logging both ways keeps one series per quantity and the run page charts it (`reward` either way is
        the run's `train/reward_mean`, read back by the client as `reward`); our own key is kept as sent
        (it joins the series a foreign name took). Inside the caller's transaction, with the write: a
        name taking our key is stored with the points."""
        metrics = [(key, value, step, None) for step, key, value in points]
        named, claims = self._points(metrics, self.logged_as, "points[{index}].", ours_joins=True)
        if claims:
            Run.objects.select_for_update(no_key=True).filter(pk=self.run_id).first()
            named = self._claim(metrics, "points[{index}].", ours_joins=True)
        return _collapsed(named)[0]

    def _claim(self, metrics, where: str, ours_joins: bool = False) -> list:
        """The metrics named again from the names stored now, which another request may have claimed,
        and this call's claims stored; under the run's row lock, which the caller holds."""
        self.logged_as = ExternalRun.objects.values_list("logged_as", flat=True).get(pk=self.pk)
        named, claims = self._points(metrics, self.logged_as, where, ours_joins)
        self.logged_as = {**self.logged_as, **claims}
        ExternalRun.objects.filter(pk=self.pk).update(logged_as=self.logged_as)
        return named

    @staticmethod
    def _points(metrics, logged_as: dict[str, str], where: str, ours_joins: bool = False):
        """(step, stored key, value, timestamp) for each metric, in the call's order, and the run's new
        `logged_as` entries. A foreign name takes our key unless the run keeps
        that key for another name: in one call our own name, else the first alias, wins, as in
        diagnostics.aliases.renaming; across calls, the name logged first. Our own name cannot be logged
        once an alias has taken it (there is nowhere else to keep it): refused, naming both, unless
        `ours_joins` (EchoLab's own API, whose client reads our names: it joins the alias's series)."""
        first_index = {}
        for index, (key, *_) in enumerate(metrics):
            first_index.setdefault(key, index)
        stored, unclaimed = {}, []
        for key in first_index:
            ours = key if key in OUR_KEYS_WITH_ALIASES else alias_of(key)
            if ours is None:
                stored[key] = key
            elif ours not in logged_as:
                unclaimed.append(key)
            elif logged_as[ours] == key:
                stored[key] = ours
            elif key != ours or ours_joins:  # an alias of a key another name took keeps its own; so
                stored[key] = key  # does our own name through EchoLab's API, joining that name's points
            else:
                raise invalid(
                    f"{where.format(index=first_index[key])}key",
                    f"{key!r} is where this run keeps the {logged_as[ours]!r} it logged first (EchoLab's "
                    f"name for it); log one of the two names",
                )
        named = renaming(unclaimed)
        stored.update(named)
        claims = {ours: key for key, ours in named.items() if ours in OUR_KEYS_WITH_ALIASES}
        return [(step, stored[key], value, timestamp) for key, value, step, timestamp in metrics], claims

    def _numbered(self, named: list) -> list:
        """The points of keys the script logs without a step (at the client's default step 0, again and
        again, as `for ...: mlflow.log_metric("loss", v)` does) numbered in the order they arrive, 0, 1, 2,
        ..., so that they chart as a series instead of overwriting one point; the client still reads step 0
        for each (to_mlflow, get_metric_history), as MLflow answers. A key becomes one when it is logged at
        step 0 twice in one call, or again after a point at step 0 that is its only one; a step-0 point of
        any other key is stored at step 0. A step-0 point stored already, or earlier in the call, value and
        timestamp alike, is one the client sent again (a retry): kept once, as MLflow's store keeps it. Under
        the run's row lock, which the caller holds."""
        stepless = set(ExternalRun.objects.values_list("stepless", flat=True).get(pk=self.pk))
        named = self._without_copies(named, stepless)
        zero = Counter(key for step, key, *_ in named if step == 0)
        newest = MetricPoint.newest(self.run_id, sorted(zero))
        # (nothing stored, or only a point at step 0) and (twice in this call, or once more)
        numbered = stepless | {
            key
            for key, count in zero.items()
            if newest.get(key, (0,))[0] == 0 and (count > 1 or key in newest)
        }
        if numbered - stepless:
            ExternalRun.objects.filter(pk=self.pk).update(stepless=sorted(numbered))
        self.stepless = sorted(numbered)  # as stored now: another call may have numbered a key meanwhile
        if not numbered:
            return named
        following = {key: newest[key][0] + 1 if key in newest else 0 for key in numbered}
        out = []
        for step, key, value, timestamp in named:
            if step == 0 and key in numbered:
                step, following[key] = following[key], following[key] + 1
            out.append((step, key, value, timestamp))
        self._keep_stepless_newest(out, numbered, newest)
        return out

    def _keep_stepless_newest(self, named: list, numbered: set[str], newest: dict) -> None:
        """stepless_newest with this call's points of the numbered keys (a key numbered only now starts
        from its one stored point, `newest`); under the run's row lock, which the caller holds."""
        kept = ExternalRun.objects.values_list("stepless_newest", flat=True).get(pk=self.pk)
        changed = dict(kept)
        for key in numbered - set(kept):
            if key in newest:
                _, value, timestamp = newest[key]
                changed[key] = [timestamp, protocol.double(value)]
        for _, key, value, timestamp in named:
            if key not in numbered:
                continue
            point = [timestamp, protocol.double(value)]
            if key not in changed or _mlflow_order(point) > _mlflow_order(changed[key]):
                changed[key] = point
        if changed != kept:
            ExternalRun.objects.filter(pk=self.pk).update(stepless_newest=changed)
        self.stepless_newest = changed

    def stepless_outcome(self) -> str | None:
        """The run's outcome (the first of OUTCOME_KEYS it logs: the success the detector follows) as stored,
        when it is logged without steps; else None."""
        if not any((alias_of(key) or key) in OUTCOME_KEYS for key in self.stepless):
            return None
        logged = Run.objects.values_list("latest_metrics", flat=True).get(pk=self.run_id)
        stored = {(alias_of(key) or key): key for key in logged}  # ours -> as stored
        outcome = next((stored[key] for key in OUTCOME_KEYS if key in stored), None)
        return outcome if outcome in self.stepless else None

    def _counted_outcome(self) -> int | None:
        """When the run logs its outcome without steps, the number of its newest point: the run's step, so
        that the detector judges each key's nth point as the nth step (`for ...: mlflow.log_metrics({"success":
        s, ...})`). None otherwise: a run whose outcome has steps goes by them."""
        outcome = self.stepless_outcome()
        return None if outcome is None else MetricPoint.newest(self.run_id, [outcome])[outcome][0]

    def _without_copies(self, named: list, stepless: set[str]) -> list:
        """`named` without the step-0 points the client sent before, value and timestamp alike (a retry, or
        a copy in the same call: asynchronous logging gathers calls into one batch), whether stored at step 0
        or numbered (a key of `stepless`)."""
        sent = [(key, value, timestamp) for step, key, value, timestamp in named if step == 0]
        stored = (
            MetricPoint.objects.filter(Q(step=0) | Q(key__in=stepless))
            .filter(
                run_id=self.run_id,
                key__in={key for key, _, _ in sent},
                logged_at__in={timestamp for _, _, timestamp in sent if timestamp is not None},
            )
            .values_list("key", "value", "logged_at")
        )
        seen = {(key, _comparable(value), at) for key, value, at in stored}
        kept = []
        for step, key, value, timestamp in named:
            point = (key, _comparable(value), timestamp)
            if step == 0 and point in seen:
                continue
            if step == 0 and timestamp is not None:
                seen.add(point)
            kept.append((step, key, value, timestamp))
        return kept

    @classmethod
    def resume_lost(cls, user, pk: int) -> bool:
        """Run again the user's run `pk` if it is an MLflow run marked lost (and not archived: log-batch
        refuses an archived run too); whether it was one."""
        lost = (
            cls.objects.for_user(user)
            .filter(pk=pk, lost_at__isnull=False, run__archived_at__isnull=True)
            .first()
        )
        if lost is not None:
            lost._heard_from(None)
        return lost is not None

    def _heard_from(self, step: int | None) -> None:
        """Keep the run's progress and heartbeat; a run the sweeper found lost runs again."""
        now = timezone.now()
        fields = {"heartbeat_at": now}
        if step is not None:
            fields["step"] = Greatest(F("step"), step)
        Run.objects.filter(pk=self.run_id).update(**fields)
        if self.lost_at is not None:
            Run.objects.filter(pk=self.run_id, status=Run.Status.FAILED).update(
                status=Run.Status.RUNNING, error="", finished_at=None
            )
            ExternalRun.objects.filter(pk=self.pk).update(lost_at=None)
            self.lost_at = None

    def update(self, status: str | None, end_time: datetime | None, name: str) -> None:
        """runs/update: the client's status (end_run sends FINISHED, FAILED or KILLED) and name."""
        with transaction.atomic():
            run = Run.objects.select_for_update(no_key=True).get(pk=self.run_id)
            fields = {}
            if name:
                fields["label"] = name[:300]
                self._add_tags({RUN_NAME_TAG: name})
            if end_time is not None and run.started_at is not None and end_time < run.started_at:
                started = run.started_at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
                raise invalid(
                    "end_time", f"{protocol.millis(end_time)} is before the run started ({started} UTC)"
                )
            if status:
                ours = protocol.RUN_STATUSES[status]
                finished = ours in Run.FINISHED
                fields.update(
                    status=ours,
                    # A start a little ahead (the client's clock) is no negative duration.
                    finished_at=(end_time or max(timezone.now(), run.started_at or EARLIEST))
                    if finished
                    else None,
                    error="failed (the client says)" if ours == Run.Status.FAILED else "",
                )
                if self.lost_at is not None:
                    ExternalRun.objects.filter(pk=self.pk).update(lost_at=None)
                    self.lost_at = None
            Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now(), **fields)
            if fields.get("status") == Run.Status.FAILED and run.status != Run.Status.FAILED:
                run.refresh_from_db()
                run.tell_failure()
        if status:
            # The last step is complete now: judge it.
            transaction.on_commit(lambda: send_detection(self.run_id))

    LOST = "lost: "  # how a lost run's error starts: its email tells how such a run resumes

    def mark_lost(self, silent_for: int) -> bool:
        """running -> failed ("lost") when nothing arrived for `silent_for` seconds. Data arriving later
        makes it running again."""
        now = timezone.now()
        since = self.run.heartbeat_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        with transaction.atomic():  # lost and its email together
            lost = Run.objects.filter(
                pk=self.run_id,
                status=Run.Status.RUNNING,
                heartbeat_at__lt=now - timedelta(seconds=silent_for),
            ).update(
                status=Run.Status.FAILED,
                finished_at=F("heartbeat_at"),  # it ended when it was last heard from, not when found silent
                error=f"{self.LOST}nothing arrived from the MLflow client since {since} "
                f"(MLFLOW_LOST_AFTER={silent_for} s); its next logging call resumes it",
            )
            if lost:
                ExternalRun.objects.filter(pk=self.pk).update(lost_at=now)
                self.lost_at = now
                transaction.on_commit(lambda: send_detection(self.run_id))
                Run.objects.get(pk=self.run_id).tell_failure()
        return lost == 1

    def judged_through(self) -> int:
        """The last step the detector may judge now: every step of a finished run, and every step but the
        newest of a running one (more of its keys may still come)."""
        run = Run.objects.only("status", "step").get(pk=self.run_id)
        return run.step if run.status in Run.FINISHED else run.step - 1

    @classmethod
    def behind(cls) -> "ExternalRunQuerySet":
        """Runs with steps the detector may judge but has not: their message was lost (broker down)."""
        judged = Coalesce(F("detected_through"), -1)
        return cls.objects.filter(
            Q(run__status=Run.Status.RUNNING, run__step__gt=judged + 1)
            | Q(run__status__in=Run.FINISHED, run__step__gt=judged)
        )

    # Reading.

    def stored_key(self, name: str) -> str:
        """Where the points the client logged under `name` are: our key, if `name` took it (ours is
        found under its own name too; a run made before `logged_as` renamed every alias to ours), unless
        points are stored under `name` itself (EchoLab's own metrics API writes keys as sent). `logged_as` first:
        a name that took our key stays there after it stops being an alias (TRL's reward_std)."""
        ours = next((ours for ours, logged in self.logged_as.items() if logged == name), alias_of(name))
        if ours is None or self.logged_as.get(ours, name) != name:
            return name
        return name if MetricPoint.objects.filter(run_id=self.run_id, key=name).exists() else ours

    def tags_shown(self) -> dict[str, str]:
        """The run's tags as the client reads them, and searches them: with EchoLab's own two."""
        run = self.run
        return {
            **self.tags,
            ECHOLAB_RUN_ID_TAG: str(run.pk),
            ECHOLAB_RUN_URL_TAG: settings.SITE_URL + run.get_absolute_url(),
        }

    @cached_property
    def metrics_shown(self) -> dict[str, tuple[float | None, int, int | None]]:
        """{name: (its value at its highest step, that step, when the client logged it there)} for each key
        of the run, named as the client logged it (searched and sorted by, and answered, under that name)."""
        run = self.run
        keys = sorted(run.latest_metrics)
        newest = MetricPoint.newest(run.pk, keys) if keys else {}

        def shown(key: str) -> str:
            """The name the client logged `key` under, unless that name has points of its own (written
            through EchoLab's own API): then ours, so no name is answered twice."""
            name = self.logged_as.get(key, key)
            return key if name in run.latest_metrics else name

        for key, (logged_at, value) in self.stepless_newest.items():
            if key in newest:  # a key logged without steps is at step 0 for the client (_numbered)
                newest[key] = (0, float(value), logged_at)
        return {
            shown(key): (value, 0 if key in self.stepless else step, logged_at)
            for key, (step, value, logged_at) in ((key, newest.get(key, (0, None, None))) for key in keys)
        }

    def searched(self, name: str):
        """The value runs/search filters and sorts the run by (webapp/tracking/search.py); None: it has none."""
        entity, _, key = name.partition(".")
        if entity == "params":
            value = self.run.config.get(key)
            return None if value is None else str(value)
        if entity == "tags":
            return self.tags_shown().get(key)
        if entity == "metrics":  # a null sent to EchoLab's own API is NaN, as runs/get answers it
            found = self.metrics_shown.get(key)
            return None if found is None else (math.nan if found[0] is None else found[0])
        if entity == "datasets":  # one value a dataset; the context is the input's tag
            if key == "context":
                return [
                    tag["value"]
                    for each in self.inputs
                    for tag in each["tags"]
                    if tag["key"] == DATASET_CONTEXT_TAG
                ]
            return [each["dataset"][key] for each in self.inputs]
        run = self.run
        return {
            "run_name": lambda: run.label,
            "status": lambda: protocol.MLFLOW_STATUS_OF[run.status],
            "run_id": lambda: self.run_uuid,
            "user_id": lambda: self.user_id,
            "start_time": lambda: protocol.millis(run.started_at),
            "end_time": lambda: protocol.millis(run.finished_at),
            "artifact_uri": lambda: self.artifact_uri,
        }[name]()

    def to_mlflow(self) -> dict:
        run = self.run
        heard = protocol.millis(run.heartbeat_at)
        metrics = [
            protocol.metric(name, value, step, at, heard)
            for name, (value, step, at) in self.metrics_shown.items()
        ]
        info = {
            "run_id": self.run_uuid,
            "run_uuid": self.run_uuid,
            "run_name": run.label,
            "experiment_id": run.experiment.mlflow.mlflow_id,
            "user_id": self.user_id,
            "status": protocol.MLFLOW_STATUS_OF[run.status],
            "start_time": protocol.millis(run.started_at),
            "artifact_uri": self.artifact_uri,
            # MLflow's deleted runs are EchoLab's archived ones: hidden from lists, restorable
            "lifecycle_stage": "deleted" if run.archived_at else "active",
        }
        if run.finished_at:
            info["end_time"] = protocol.millis(run.finished_at)
        return {
            "info": info,
            "data": {
                "metrics": metrics,
                "params": protocol.pairs(run.config),
                # and what a script needs for EchoLab's own API (POST /api/runs/<id>/metrics) and pages
                "tags": protocol.pairs(self.tags_shown()),
            },
            "inputs": {"dataset_inputs": self.inputs} if self.inputs else {},
        }


def _mlflow_order(point: list) -> tuple:
    """A [timestamp, value] of stepless_newest as MLflow's store orders a key's points at one step to pick
    its newest: by timestamp, then value, a NaN counting as 0 and an infinity as the largest finite float
    (what its SQL store keeps of them)."""
    timestamp, value = point
    value = float(value)
    if math.isnan(value):
        value = 0.0
    elif math.isinf(value):
        value = math.copysign(sys.float_info.max, value)
    return (-1 if timestamp is None else timestamp, value)


def _comparable(value: float | None):
    """A value as a retry's copy compares equal to it: NaN equals no float, not even NaN (MLflow's store keeps
    a NaN point once too, its value stored apart from is_nan)."""
    return "NaN" if value is not None and math.isnan(value) else value


def _collapsed(named: list) -> tuple[list, dict]:
    """(step, key, value) points from (step, key, value, timestamp) ones, the last of a repeated (step, key)
    winning as in ingest, and {(step, key): timestamp} of those that have one."""
    points = {(step, key): (value, timestamp) for step, key, value, timestamp in named}
    logged_at = {point: timestamp for point, (_, timestamp) in points.items() if timestamp is not None}
    return [(step, key, value) for (step, key), (value, _) in points.items()], logged_at


# Before it no training run was logged: a start_time of 123 (or of seconds, 1.7e9: January 1970) is a
# client's bug, and would make a run 57 years long that tops every sort by duration.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
# A client's clock may run ahead of this server's, by this much at most: a start in the year 2100 gave a
# finished run a duration of minus 73 years.
AHEAD = timedelta(days=1)


def from_millis(value: int | None, field: str) -> datetime | None:
    """A request's `field` (milliseconds since 1970) as a time; an error naming the field if it is none, or
    if it is before EARLIEST or more than AHEAD after now."""
    if value is None:
        return None
    try:
        time = datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise invalid(field, f"{value} is not a time in milliseconds since 1970") from None
    if time < EARLIEST:
        raise invalid(
            field,
            f"{value} is {time:%Y-%m-%d %H:%M:%S} UTC, before {EARLIEST:%Y}: a time in milliseconds since 1970 "
            "(seconds times 1,000) is expected",
        )
    now = timezone.now()
    if time > now + AHEAD:
        raise invalid(
            field,
            f"{value} is {time:%Y-%m-%d %H:%M:%S} UTC, more than a day after this server's clock "
            f"({now:%Y-%m-%d %H:%M:%S} UTC): a time in milliseconds since 1970 is expected",
        )
    return time


def send_detection(run_id: int, eta: datetime | None = None) -> bool:
    """Ask a worker to judge the run's complete steps (at `eta`, if given). With the broker down the sweeper
    asks again (ExternalRun.behind)."""
    from worker import queues

    return queues.send(queues.DETECT_EXTERNAL_RUN, [run_id], queues.DEFAULT, eta=eta)


class DetectionThrottle:
    """Detection asked after a run's batches, at most once every `every` seconds per run from this process:
    a script logging fast (a replay, a backlog sent in batches) asks at once, then once more when the
    second is up, for every batch since, instead of once a batch (a broker round trip each, a third of a
    batch's own write). A detection judges every complete step, so one message covers them all; a run
    logging a step every few seconds is judged after each, as before."""

    def __init__(self, every: float = 1.0, send=send_detection, clock=time.monotonic):
        self.every, self.send, self.clock = every, send, clock
        self.planned: dict[int, float] = {}  # run id -> when its last message was sent or is due
        self.lock = threading.Lock()

    def __call__(self, run_id: int) -> None:
        now = self.clock()
        with self.lock:
            last = self.planned.get(run_id)
            if last is not None and last > now:
                return  # a message is due later, for this batch too
            if last is None or now >= last + self.every:
                self.planned[run_id] = now
                wait = 0.0
            else:
                self.planned[run_id] = last + self.every
                wait = last + self.every - now
            if len(self.planned) > 10_000:  # forget runs not asked about for a minute
                self.planned = {pk: at for pk, at in self.planned.items() if at > now - 60}
        self.send(run_id, timezone.now() + timedelta(seconds=wait) if wait else None)


# After each write of points (log-batch, the ingest API); a run's end and loss ask at once (send_detection).
send_detection_soon = DetectionThrottle()
