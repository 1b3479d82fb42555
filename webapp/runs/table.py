"""The runs table (/runs/ and GET /api/runs): one row per run across a user's experiments. Summary
metrics are annotations computed by the database, so sorting, filtering and paging stay server-side
and a page costs the same few queries at ten runs or ten thousand."""

from collections import Counter
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta

from django.db import DatabaseError, connection
from django.db.models import (
    Case,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    OuterRef,
    Q,
    Subquery,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce, Collate, Now, NullIf
from django.db.models.lookups import Regex

from trainer.overrides import get_dotted
from webapp.alerts.models import DetectorEvent
from webapp.compare.aggregates import SUCCESS, VAL_SUCCESS, best_finite, last_finite
from webapp.core import natural_sort
from webapp.experiments.models import Experiment


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    order: object = None  # what the column sorts by; None: not sortable
    numeric: bool = False  # right-aligned, sorted largest first on the first click
    shown: bool = True  # shown until the user's column choice says otherwise


# The one list of the table's columns: the page, the column chooser and the API's `sort` read it.
COLUMNS = [
    Column("name", "Run", Collate(Coalesce(NullIf("name", Value("")), "label"), natural_sort.COLLATION)),
    Column("experiment", "Experiment", Collate("experiment__name", natural_sort.COLLATION)),
    Column("status", "Status", F("status")),
    Column("env", "Environment", F("config__env__name")),
    Column("algorithm", "Algorithm", F("config__algorithm__advantage")),
    # StarPO and StarPO-S share their algorithm column (ppo). A run logged elsewhere has no preset: stored
    # as "", which sorted before every preset, read as no value to come last as the others' do.
    Column("preset", "Preset", NullIf("preset", Value(""))),
    Column("model", "Model", F("config__model__name"), shown=False),
    Column("seed", "Seed", F("config__seed"), numeric=True, shown=False),
    # The ratio only where the filter reads it: starpo's runs carry 0.25 in their config and keep every group
    Column(
        "filter_ratio",
        "Filter ratio",
        Case(When(config__algorithm__filter="top_ratio", then=F("config__algorithm__filter_ratio"))),
        numeric=True,
        shown=False,
    ),
    Column("actor_lr", "Actor LR", F("config__optim__actor_lr"), numeric=True, shown=False),
    Column("step", "Step", F("step"), numeric=True, shown=False),
    Column("final_val", "Val success (last)", F("final_val_success"), numeric=True),
    Column("best_val", "Val success (best)", F("best_val_success"), numeric=True),
    Column("final_train", "Train success (last)", F("final_train_success"), numeric=True),
    Column("collapse", "Collapse at step", F("collapse_step"), numeric=True),
    Column("duration", "Duration", F("duration"), numeric=True),
    Column("tags", "Tags"),
    Column("notes", "Notes", shown=False),
    Column("created", "Created", F("created_at"), numeric=True, shown=False),
]
BY_KEY = {column.key: column for column in COLUMNS}
SORTS = [prefix + column.key for column in COLUMNS if column.order is not None for prefix in ("", "-")]
DEFAULT_SORT = "-created"

# Columns of any config value the user names (`?config=algorithm.kl_coef`): the grid's own dimensions, and
# the params of a run logged through MLflow (`learning_rate` from TRL, `actor_rollout_ref/actor/optim/lr`
# from veRL), which have no fixed column. Sorted by `sort=config:<path>`.
CONFIG_SORT = "config:"
MAX_CONFIG_COLUMNS = 8
MAX_CONFIG_PATH = 250  # MLflow's longest param key
MAX_CONFIG_SECTIONS = 32  # a path's dot-separated parts: 130 of them nested past Python's recursion limit
# A number written as text (MLflow keeps params as strings: "1e-05"; Postgres writes a JSON number without
# an exponent, 1e25 as 26 digits) sorts as a number. The bounds keep it inside a double's range, so that the
# cast cannot fail: with an exponent of two digits a mantissa of 20 digits and 200 decimals, without one 255
# and 255 (Postgres' most repetitions). Anything else sorts as text, after the numbers.
NUMBER_TEXT = (
    r"^[-+]?(([0-9]{1,20}(\.[0-9]{0,200})?|\.[0-9]{1,200})[eE][-+]?[0-9]{1,2}"
    r"|[0-9]{1,255}(\.[0-9]{0,255})?|\.[0-9]{1,255})$"
)


def config_value(config, path: str):
    """The value at `path` in a run's config: the key of that whole name first (MLflow params are flat,
    and veRL's hold dots and slashes), else the dotted path through nested sections (ours)."""
    if isinstance(config, dict) and path in config:
        return config[path]
    return get_dotted(config, path)


@dataclass(frozen=True)
class ConfigColumn:
    path: str

    @property
    def key(self) -> str:
        return CONFIG_SORT + self.path

    def text(self):
        """The value as text in SQL, read as config_value reads it."""
        flat = KeyTextTransform(self.path, "config")
        *sections, last = self.path.split(".")
        if not sections:
            return flat
        nested = "config"
        for section in sections:
            nested = KeyTransform(section, nested)
        return Coalesce(flat, KeyTextTransform(last, nested))

    def orders(self, descending: bool) -> list:
        """Numbers first, by value; then other values, by text; then runs without the key."""
        text = self.text()
        number = Case(When(Regex(text, Value(NUMBER_TEXT)), then=Cast(text, FloatField())))
        words = Collate(text, natural_sort.COLLATION)
        return [
            expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True)
            for expression in (number, words)
        ]


def sort_link(key: str, first_descending: bool, sort: str) -> tuple[str, str]:
    """A sortable header's aria-sort state and the sort a click on it asks for."""
    current, descending = sort.removeprefix("-"), sort.startswith("-")
    if key != current:
        return "none", ("-" if first_descending else "") + key
    return ("descending", key) if descending else ("ascending", "-" + key)


def headers(sort: str) -> list[dict]:
    """Per column: its aria-sort state and the sort a click on its header asks for."""
    out = []
    for column in COLUMNS:
        state, click = (
            sort_link(column.key, column.numeric, sort) if column.order is not None else (None, None)
        )
        out.append({"column": column, "aria_sort": state, "click": click})
    return out


def config_headers(paths: list[str], sort: str) -> list[dict]:
    """The same for the config columns asked for, in their order; the first click sorts ascending."""
    out = []
    for path in paths:
        state, click = sort_link(ConfigColumn(path).key, False, sort)
        out.append({"path": path, "aria_sort": state, "click": click})
    return out


def with_summary(runs):
    """Each run with final_val_success, best_val_success, final_train_success (finite values only),
    collapse_step (the detector's first collapse event) and duration (start to finish, or to now)."""
    first_collapse = (
        DetectorEvent.objects.filter(run=OuterRef("pk"), level=DetectorEvent.Level.COLLAPSE)
        .order_by("step")
        .values("step")[:1]
    )
    return runs.select_related("experiment").annotate(
        final_val_success=last_finite(VAL_SUCCESS),
        best_val_success=best_finite(VAL_SUCCESS),
        final_train_success=last_finite(SUCCESS),
        collapse_step=Subquery(first_collapse),
        duration=Case(  # Run.training_time, in SQL to sort by
            When(
                started_at__isnull=False,
                then=ExpressionWrapper(
                    Coalesce("finished_at", Now()) - F("started_at") + F("earlier_training"),
                    output_field=DurationField(),
                ),
            ),
            # between attempts (resumed, or stopped in the queue again): the earlier attempts' time
            When(earlier_training__gt=timedelta(0), then=F("earlier_training")),
            default=None,
            output_field=DurationField(),
        ),
    )


def sorted_by(runs, sort: str):
    """`sort` is a column key or config:<path>, "-" first for descending; runs without a value come last
    either way, and the id breaks ties so that pages do not overlap."""
    key, descending = sort.removeprefix("-"), sort.startswith("-")
    if key.startswith(CONFIG_SORT):
        orders = ConfigColumn(key.removeprefix(CONFIG_SORT)).orders(descending)
    else:
        order = BY_KEY[key].order
        orders = [order.desc(nulls_last=True) if descending else order.asc(nulls_last=True)]
    return runs.order_by(*orders, "-id" if descending else "id")


@contextmanager
def without_jit():
    """Postgres JIT-compiles a query whose estimated cost is high, as a sort over thousands of per-run
    subqueries is; at 5,000 runs compiling took 3 s of a 3.6 s request (bench/runs_table.py), the query
    itself 0.6 s. Evaluate the table's queries inside this block."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('jit'), set_config('jit', 'off', false)")
        before = cursor.fetchone()[0]
    try:
        yield
    finally:
        # In a transaction that failed this raises; its rollback then restores the setting anyway.
        with suppress(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('jit', %s, false)", [before])


def search(runs, text: str):
    return runs.filter(
        Q(name__icontains=text)
        | Q(label__icontains=text)
        | Q(notes__icontains=text)
        | Q(experiment__name__icontains=text)
    )


def with_tag(runs, tag: str):
    # Tags are lower-case words without quotes (webapp.runs.forms.TAG), so the quoted tag matches one
    # whole element of the JSON list; unlike `contains`, this lookup works on SQLite too.
    return runs.filter(tags__icontains=f'"{tag}"')


def choices(runs) -> dict[str, list[str]]:
    """The values the filters offer: those the user's runs have."""

    def distinct(field):
        values = runs.order_by().values_list(field, flat=True).distinct()
        return sorted({value for value in values if isinstance(value, str) and value})

    tag_lists = runs.order_by().values_list("tags", flat=True).distinct()
    tags = sorted({tag for tags in tag_lists for tag in tags or []})
    return {
        "env": distinct("config__env__name"),
        "algorithm": distinct("config__algorithm__advantage"),
        "tag": tags,
        "experiment": experiment_choices(runs),
    }


def experiment_choices(runs) -> list[tuple[int, str]]:
    """(id, name) of the experiments the runs are in, newest first; a name two experiments share gets
    each one's creation date, so that the option says which one it is."""
    experiments = list(
        Experiment.objects.filter(pk__in=runs.order_by().values("experiment_id"))
        .order_by("-created_at", "-id")
        .values_list("pk", "name", "created_at")
    )
    names = Counter(name for _, name, _ in experiments)
    return [
        (pk, name if names[name] == 1 else f"{name} ({created:%Y-%m-%d %H:%M})")
        for pk, name, created in experiments
    ]


OFFERED_FROM = 100  # the latest runs whose config paths the column chooser offers
MAX_OFFERED = 1000


def config_paths(runs) -> list[str]:
    """The config paths the column chooser offers: every value's path in the user's latest runs."""
    paths = set()

    def walk(mapping: dict, prefix: str):
        for key, value in mapping.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict) and value:
                walk(value, path)
            elif len(path) <= MAX_CONFIG_PATH:
                paths.add(path)

    for config in runs.order_by("-created_at").values_list("config", flat=True)[:OFFERED_FROM]:
        if isinstance(config, dict):
            walk(config, "")
    return sorted(paths, key=natural_sort.sort_key)[:MAX_OFFERED]


def summary(run) -> dict:
    """A run of with_summary() as the API shows its table row's summary."""
    return {
        "final_val_success": run.final_val_success,
        "best_val_success": run.best_val_success,
        "final_train_success": run.final_train_success,
        "collapse_step": run.collapse_step,
        "duration_seconds": run.duration.total_seconds() if run.duration is not None else None,
    }


def row(run, queue_position: int | None, config_columns: list[str]) -> dict:
    """One run of the table as GET /api/runs answers it, with its values of the config columns asked for."""
    return {
        **run.to_dict(),
        "display_name": run.display_name,
        "experiment_name": run.experiment.name,
        "env": get_dotted(run.config, "env.name"),
        "algorithm": get_dotted(run.config, "algorithm.advantage"),
        "summary": summary(run),
        "config_columns": {path: config_value(run.config, path) for path in config_columns},
        "queue_position": queue_position,
    }
