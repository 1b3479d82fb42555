"""What the runs table accepts: its query (the page and GET /api/runs share one form), a run's
name, tags and notes, and the trajectory viewer's filters."""

import math
import re

from django import forms
from django.core.paginator import Paginator

from diagnostics.quoting import quoted
from trainer.config import ADVANTAGES
from webapp.core.fields import CharField, ChoiceField, WholeNumberField
from webapp.core.templatetags.echolab import reward as reward_text
from webapp.experiments.models import Run
from webapp.runs import table

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
TAG = re.compile(r"[a-z0-9][a-z0-9._:-]{0,39}")
MAX_TAGS = 20
MAX_PAGE_SIZE = 200


class ConfigPathsField(forms.Field):
    """The `config` parameter, given once per column: each a path into a run's config (webapp.runs.table
    reads it), in the order given; a path given twice is one column."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value) -> list[str]:
        if isinstance(value, str):  # a form built from a dict (code, tests): one path, not its letters
            value = [value]
        paths = list(dict.fromkeys(value or []))
        if len(paths) > table.MAX_CONFIG_COLUMNS:
            raise forms.ValidationError(
                f"at most {table.MAX_CONFIG_COLUMNS} config columns, got {len(paths)}"
            )
        for path in paths:
            problem = config_path_problem(path)
            if problem:
                raise forms.ValidationError(f"{quoted(path)} {problem}")
        return paths


def config_path_problem(path: str) -> str | None:
    """Why `path` cannot name a config value (a key, or sections joined by dots), or None."""
    if not path.strip():
        return "is empty: name a config key, like algorithm.kl_coef"
    if len(path) > table.MAX_CONFIG_PATH:
        return f"is {len(path)} characters long, at most {table.MAX_CONFIG_PATH}"
    if CONTROL.search(path):
        return "holds a control character"
    if path.count(".") >= table.MAX_CONFIG_SECTIONS:  # each one a step of the sort's JSON lookup
        return f"has {path.count('.') + 1} sections; at most {table.MAX_CONFIG_SECTIONS}"
    return None


class RunTableForm(forms.Form):
    """Filters, sort and page. Every field is optional; a bad value is an error naming the field, never
    silently ignored."""

    # Not stripped: what is checked is what was sent (the API's schema bounds the raw value).
    q = CharField(required=False, max_length=200, strip=False, label="Search")
    status = ChoiceField(required=False, choices=[("", "Any status"), *Run.Status.choices])
    env = CharField(required=False, max_length=100, strip=False, label="Environment")
    algorithm = ChoiceField(required=False, choices=[("", "Any"), *((name, name) for name in ADVANTAGES)])
    tag = CharField(required=False, max_length=40, strip=False)
    experiment = WholeNumberField(required=False, min_value=1, max_value=2**63 - 1)
    archived = ChoiceField(required=False, choices=[("false", "Active runs"), ("true", "Archived runs")])
    sort = CharField(
        required=False, max_length=len(table.CONFIG_SORT) + table.MAX_CONFIG_PATH + 1, strip=False
    )
    config = ConfigPathsField(required=False, label="Config columns")
    page = WholeNumberField(required=False, min_value=1, max_value=2**31 - 1)
    page_size = WholeNumberField(required=False, min_value=1, max_value=MAX_PAGE_SIZE)

    FILTERS = ("q", "status", "env", "algorithm", "tag", "experiment")

    def clean_sort(self):
        sort = self.cleaned_data["sort"]
        key = sort.removeprefix("-")
        if not sort or sort in table.SORTS:
            return sort
        if key.startswith(table.CONFIG_SORT):
            problem = config_path_problem(key.removeprefix(table.CONFIG_SORT))
            if problem:
                raise forms.ValidationError(f"the config path {problem}")
            return sort
        raise forms.ValidationError(
            f"must be a column ({', '.join(table.SORTS[::2])}) or config:<path>, "
            f"'-' first for descending; got {quoted(sort)}"
        )

    def clean_tag(self):
        tag = self.cleaned_data["tag"]
        if tag and not TAG.fullmatch(tag):
            raise forms.ValidationError(tag_problem(tag))
        return tag

    @property
    def archived_view(self) -> bool:
        return self.cleaned_data.get("archived") == "true"

    @property
    def sort_key(self) -> str:
        return self.cleaned_data.get("sort") or table.DEFAULT_SORT

    def runs(self, user):
        """The caller's runs this query selects, with their summary metrics, in order."""
        data = self.cleaned_data
        runs = Run.objects.for_user(user)
        runs = runs.archived() if self.archived_view else runs.active()
        if data["q"].strip():
            runs = table.search(runs, data["q"].strip())
        for field, lookup in (
            ("status", "status"),
            ("env", "config__env__name"),
            ("algorithm", "config__algorithm__advantage"),
            ("experiment", "experiment_id"),
        ):
            if data[field] not in ("", None):
                runs = runs.filter(**{lookup: data[field]})
        if data["tag"]:
            runs = table.with_tag(runs, data["tag"])
        return table.sorted_by(table.with_summary(runs), self.sort_key)

    def paginator(self, user, default_size: int) -> Paginator:
        return Paginator(self.runs(user), self.cleaned_data.get("page_size") or default_size)

    def error_summary(self) -> str:
        return "; ".join(f"{field}: {' '.join(errors)}" for field, errors in self.errors.items())


def is_tag_in_any_case(word: str) -> bool:
    """A tag once lower-cased, as typed in ASCII: lower() makes the Kelvin sign a "k"."""
    return word.isascii() and TAG.fullmatch(word.lower()) is not None


def tag_problem(tag: str) -> str:
    """Why `tag`, as the user typed it, is not one."""
    if len(tag) > 40:
        return f"{quoted(tag)} is not a tag: {len(tag)} characters, at most 40"
    if is_tag_in_any_case(tag):  # a filter takes a tag as stored: lower-case
        return f"{quoted(tag)} is not a tag: tags are lower-case, {quoted(tag.lower())}"
    return (
        f"{quoted(tag)} is not a tag: use lower-case letters, digits and . _ : - "
        "(at most 40 characters, starting with a letter or digit)"
    )


class TagsField(forms.CharField):
    """Tags typed as "baseline, frozenlake sweep-3" (commas or spaces) -> ["baseline", "frozenlake", ...], or
    given as a list (the API), each item one tag: "a b" is refused, not split in two."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        if isinstance(value, list):
            words = value
        else:
            words = [word for word in re.split(r"[,\s]+", (value or "").strip()) if word]
        bad = [word for word in words if not is_tag_in_any_case(word)]
        if bad:
            raise forms.ValidationError(tag_problem(bad[0]))  # as typed: "Tag!", not "tag!"
        tags = list(dict.fromkeys(word.lower() for word in words))
        if len(tags) > MAX_TAGS:
            raise forms.ValidationError(f"{len(tags)} tags; a run has at most {MAX_TAGS}")
        return tags


class RunEditForm(forms.ModelForm):
    # The app's CharField: "at most 200 characters, got 201", as every other text limit says it
    name = CharField(
        required=False,
        max_length=Run._meta.get_field("name").max_length,
        help_text="Shown instead of the label (empty: the label).",
    )
    tags = TagsField(
        required=False,
        max_length=2000,
        help_text="Words separated by commas or spaces, e.g. baseline, sweep-3",
    )
    notes = CharField(required=False, max_length=10_000, widget=forms.Textarea(attrs={"rows": 5}))

    class Meta:
        model = Run
        fields = ["name", "tags", "notes"]

    def clean_name(self):
        return self.cleaned_data["name"].strip()

    def save(self, commit=True):
        """Only the fields the form edits: the run's worker writes its step, heartbeat and status meanwhile,
        and a save of the whole row would put back the values it was loaded with."""
        run = super().save(commit=False)
        if commit:
            run.save(update_fields=self.Meta.fields)
        return run


class RewardField(forms.FloatField):
    default_error_messages = {"invalid": "must be a number, like 0.5"}


class TrajectoryFilterForm(forms.Form):
    """The trajectory viewer's filters, read from its address so that a link, a reload and a step
    change keep them. A bad value is named on the page and that filter is left off."""

    outcome = ChoiceField(
        required=False, choices=[("", "any"), ("success", "success"), ("failure", "failure")]
    )
    reward = RewardField(
        required=False,
        label="Total reward at least",
        widget=forms.NumberInput(attrs={"step": "any", "inputmode": "decimal"}),
    )
    format = ChoiceField(
        required=False,
        choices=[("", "any"), ("valid", "every action valid"), ("invalid", "some action invalid")],
    )

    def __init__(self, data):
        super().__init__(data, auto_id="filter-%s")
        self.is_valid()  # fills cleaned_data with the good fields; errors name the bad ones

    def carried(self) -> list[tuple[str, str]]:
        """The filters in force as (name, value as sent), for a form that changes the step."""
        return [
            (name, self.data[name]) for name in self.fields if self.cleaned_data.get(name) not in ("", None)
        ]

    def keeps(self, sample: dict) -> bool:
        """Whether a sample (as `trajectories.trajectory` shows it) passes every valid filter. The
        reward is compared as the page prints it (`reward` template filter), as the page's script does."""
        outcome, least, format_ = (self.cleaned_data.get(name) for name in ("outcome", "reward", "format"))
        if outcome and sample["success"] is not (outcome == "success"):
            return False
        if format_ and sample["format_valid"] is not (format_ == "valid"):
            return False
        if least is None:
            return True
        try:
            shown = float(reward_text(sample["reward"]))
        except ValueError:  # "-": no reward recorded
            return False
        return math.isfinite(shown) and shown >= least
