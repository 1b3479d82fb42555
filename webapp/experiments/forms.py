"""The new-experiment form. Environment parameters are generated from envs.registry(); the trainer's
own validation (through run_planning.plan) decides what is valid, and its errors land next to the field
they name."""

from urllib.parse import urlencode

import yaml
from django import forms
from django.conf import settings
from django.db.models import F
from django.db.models.functions import Collate

import envs
from trainer.config import PRESETS, PRESETS_HELP_TEXT, TINY_MODEL, TrainConfig
from trainer.overrides import deep_merge, get_dotted
from webapp.core import natural_sort
from webapp.core.fields import CharField, ChoiceField, DecimalNumberField, TickBox, WholeNumberField
from webapp.core.templatetags.echolab import spoken_seconds
from webapp.experiments import form_inputs, run_planning, spec_parsing, specs
from webapp.experiments.models import Run
from webapp.runs import table

MAX_IMPORT_BYTES = 256 * 1024


def param_field_name(env_name: str, param_name: str) -> str:
    return f"env__{env_name}__{param_name}"


def number_input(whole: bool) -> forms.TextInput:
    """A text box for a number: a browser empties a number box holding text it cannot read ("abc",
    "1e400"), and the form would then say "required" and lose what was typed; phones still show digits."""
    return forms.TextInput(attrs={"inputmode": "numeric" if whole else "decimal"})


def _param_field(param) -> forms.Field:
    help_text = f"{param.help} In YAML: env.params.{param.name}".strip()
    common = {"required": False, "label": param.title, "help_text": help_text, "initial": param.default}
    if param.type == "int":
        return WholeNumberField(min_value=param.min, max_value=param.max, widget=number_input(True), **common)
    if param.type == "float":
        return DecimalNumberField(
            min_value=param.min, max_value=param.max, widget=number_input(False), **common
        )
    if param.type == "bool":
        return TickBox(**common)
    if param.type == "choice":
        return ChoiceField(choices=[(c, c) for c in param.choices], **common)
    if param.lines:
        return forms.CharField(
            strip=False, widget=forms.Textarea(attrs={"rows": 5, "class": "code"}), **common
        )
    return forms.CharField(strip=False, **common)


def when_alerts_go() -> str:
    """When an alert email goes, from this server's settings (README: ALERT_GROUP_SECONDS, ALERT_COOLDOWN_SECONDS)."""
    group, cooldown = settings.ALERT_GROUP_SECONDS, settings.ALERT_COOLDOWN_SECONDS
    pace = (
        f"at most one email per run every {spoken_seconds(group)}, later warnings waiting to go with the next"
        if group
        else "each at once"
    )
    again = f"not again within {spoken_seconds(cooldown)}" if cooldown else "again whenever it fires"
    first = (
        f"A collapse is emailed at once (a relapse within {spoken_seconds(group)} of the last waits too)"
        if group
        else "A collapse is emailed at once"
    )
    return f"{first}. Ticked, warnings are too: {pace}; the same warning rule of a run {again}."


class AlertsForm(forms.Form):
    """Who gets an experiment's alert emails, and whether warnings are emailed too: set when it is created
    (ExperimentForm has these fields) and changed later on its page."""

    alert_recipients = forms.CharField(
        required=False,
        max_length=2
        * spec_parsing.MAX_RECIPIENTS_TEXT,  # as typed, names too; the addresses kept meet the limit
        help_text="Emails separated by commas (Bob <bob@example.com> is fine too); empty means you. "
        "They get the detector's alerts, and an email when a run fails.",
    )
    alert_on_warnings = TickBox(required=False, label="Also alert on warnings")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["alert_on_warnings"].help_text = when_alerts_go()

    def _parsed(self, field, parse):
        try:
            return parse(self.cleaned_data[field])
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None

    def clean_alert_recipients(self):
        return self._parsed("alert_recipients", spec_parsing.parse_recipients)


# What a refused field stands for while the rest of the form is planned (ExperimentForm.clean).
PLANNING_FALLBACKS = {
    "name": "",
    "description": "",
    "seeds": [0],
    "grid": {},
    "preset": specs.DEFAULT_PRESET,
    "model": TINY_MODEL,
    "warm_start": "",
    "steps": None,
    "overrides": {},
    "detector_overrides": {},
    "alert_recipients": [],
    "alert_on_warnings": False,
}


class ExperimentForm(AlertsForm):
    # The alert fields last, as the page shows them: the form's first error is the one a user meets first.
    field_order = [
        "name",
        "description",
        "env",
        "model",
        "warm_start",
        "preset",
        "steps",
        "seeds",
        "grid",
        "overrides",
        "detector_overrides",
    ]

    name = forms.CharField(max_length=specs.MAX_NAME)
    description = forms.CharField(
        required=False, max_length=specs.MAX_DESCRIPTION, widget=forms.Textarea(attrs={"rows": 2})
    )
    env = ChoiceField(label="Environment")
    model = forms.CharField(
        initial=TINY_MODEL,
        max_length=500,
        help_text=f"'{TINY_MODEL}' (built locally, trains on CPU), a Hugging Face hub id such as "
        "Qwen/Qwen2.5-0.5B-Instruct, or a folder inside MODEL_ROOT.",
    )
    warm_start = forms.CharField(
        required=False,
        max_length=500,
        help_text="Optional: a model folder inside MODEL_ROOT to start from, e.g. one written by "
        "'python -m trainer sft'; the model above still chooses the settings profile.",
    )
    preset = ChoiceField(
        choices=[(name, name) for name in PRESETS],
        initial=specs.DEFAULT_PRESET,
        help_text=PRESETS_HELP_TEXT,
    )
    steps = WholeNumberField(
        min_value=1,
        max_value=specs.MAX_STEPS,
        initial=TrainConfig.preset(specs.DEFAULT_PRESET).schedule.steps,
        widget=number_input(True),
    )
    seeds = forms.CharField(initial="1", help_text="Comma-separated; each seed is a run.")
    grid = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "optim.actor_lr = 5e-4, 1e-3"}),
        help_text=f"One line per field: 'section.field = value, value'. One run per combination and seed "
        f"(at most {specs.MAX_RUNS}). 'preset = starpo, starpo-s' compares presets. A field the preset "
        "does not read is refused: its runs would be copies (algorithm.filter_ratio under starpo, which keeps "
        "every group).",
    )
    overrides = forms.CharField(
        required=False,
        label="Config overrides (YAML)",
        widget=forms.Textarea(
            attrs={
                "rows": 8,
                "class": "code",
                "placeholder": "algorithm:\n  kl_coef: 0.0\nrollout:\n  group_size: 8",
            }
        ),
        help_text="Any trainer setting, on top of the preset.",
    )
    detector_overrides = forms.CharField(
        required=False,
        label="Detector overrides (YAML or JSON)",
        widget=forms.Textarea(
            attrs={"rows": 3, "class": "code", "placeholder": "grad_spike:\n  tolerance: 5.0"}
        ),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.registry = envs.registry()
        names = list(self.registry)
        self.fields["env"].choices = [(name, name) for name in names]
        # Bandit: the simplest task, learnt in minutes (the demo's)
        self.fields["env"].initial = "bandit" if "bandit" in names else names[0]
        chosen = self.data.get("env") if self.is_bound else None
        for env_name, spec in self.registry.items():
            for param in spec.params:
                field = _param_field(param)
                # Only the chosen environment's parameters are read and validated.
                field.disabled = self.is_bound and env_name != chosen
                self.fields[param_field_name(env_name, param.name)] = field
        self.planned: list[specs.PlannedRun] = []
        self.spec: specs.ExperimentSpec | None = None

    def env_sections(self):
        """(env name, description, bound fields) for the template, one section per environment."""
        return [
            (name, spec.description, [self[param_field_name(name, p.name)] for p in spec.params])
            for name, spec in self.registry.items()
        ]

    def main_fields(self):
        return [self[name] for name in ("name", "description", "env")]

    def clean_model(self):
        return self._parsed("model", spec_parsing.resolve_model)

    def clean_warm_start(self):
        return self._parsed(
            "warm_start", lambda value: spec_parsing.resolve_warm_start(value) if value.strip() else ""
        )

    def clean_seeds(self):
        return self._parsed("seeds", spec_parsing.parse_seeds)

    def clean_grid(self):
        return self._parsed("grid", spec_parsing.parse_grid)

    def clean_overrides(self):
        return self._parsed("overrides", spec_parsing.parse_overrides)

    def clean_detector_overrides(self):
        return self._parsed(
            "detector_overrides",
            lambda text: spec_parsing.check_detector_overrides(
                spec_parsing.parse_mapping(text, "grad_spike: {tolerance: 5.0}")
            ),
        )

    def clean(self):
        data = super().clean()
        env_name = data.get("env")
        params = {}
        if env_name:
            for param in self.registry[env_name].params:
                field_name = param_field_name(env_name, param.name)
                value = data.get(field_name)
                if value is None and param.type in ("int", "float") and field_name not in self.errors:
                    self.add_error(field_name, "This field is required.")
                elif field_name not in self.errors and (
                    value not in (None, "") or param.type in ("str", "bool")
                ):
                    params[param.name] = value
        if not env_name:
            return data
        # Planned even when some fields were refused, each of those at its neutral value, so that every
        # problem shows after one submit (a grid's unknown key with a blank name, not after fixing it).
        given = {
            name: PLANNING_FALLBACKS[name] if name in self.errors else data.get(name)
            for name in PLANNING_FALLBACKS
        }
        self.spec = specs.ExperimentSpec(
            name=given["name"],
            description=given["description"],
            seeds=given["seeds"],
            grid=given["grid"],
            preset=given["preset"],
            env={"name": env_name, "params": params},
            model=given["model"],
            steps=given["steps"],
            detector_overrides=given["detector_overrides"],
            overrides=deep_merge(given["overrides"], {"model": {"warm_start": given["warm_start"]}})
            if given["warm_start"]
            else given["overrides"],
            alert_recipients=given["alert_recipients"],
            alert_on_warnings=given["alert_on_warnings"],
        )
        try:
            planned = run_planning.plan(self.spec)
        except specs.SpecError as error:
            for key, message in error.errors.items():
                self._add_trainer_error(key, message)
        else:
            if not self.errors:
                self.planned = planned
        return data

    def _add_trainer_error(self, key: str, message: str):
        # From the spec: add_error drops a field from cleaned_data, and a plan may report several problems.
        env_name = self.spec.env["name"]
        if key.startswith("env.params."):
            field = param_field_name(env_name, key.removeprefix("env.params."))
            if field in self.fields:
                self.add_error(field, message)
                return
            key = "env"
        if key in self.fields:
            self.add_error(key, message)
        elif get_dotted(self.spec.overrides, key) is not None:
            self.add_error("overrides", f"{key}: {message}")
        else:
            self.add_error(None, f"{key}: {message}")

    @classmethod
    def typed_initial(cls, data) -> dict:
        """The form's values as a browser sent them (a QueryDict), as initial values: what the import of a
        config, sent with them, keeps. A box left unticked sends nothing: it is False, not its default."""
        fields = cls().fields
        if "env" not in data:  # not sent from the form (a script posting the import alone)
            return {}
        return {
            name: data.get(name, False) if isinstance(field, TickBox) else data.get(name)
            for name, field in fields.items()
            if name in data or isinstance(field, TickBox)
        }

    @classmethod
    def initial_from(cls, config: dict, preset: str = "", grid_keys=(), **extra) -> dict:
        """Initial values that reproduce `config` (a saved experiment's, or an imported YAML's)."""
        inputs = form_inputs.describe(config, preset, grid_keys)
        overrides = inputs["overrides"]
        warm_start = (overrides.get("model") or {}).pop("warm_start", None)
        if overrides.get("model") == {}:
            del overrides["model"]
        initial = {
            "env": inputs["env"]["name"],
            "model": form_inputs.display_model(inputs["model"]),
            "warm_start": form_inputs.display_model(warm_start) if warm_start else "",
            "preset": inputs["preset"],
            "overrides": form_inputs.dump_yaml(overrides),
        }
        if isinstance(inputs["steps"], int):
            initial["steps"] = inputs["steps"]
        for name, value in inputs["env"]["params"].items():
            initial[param_field_name(inputs["env"]["name"], name)] = value
        seed = config.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):  # a bare config's own seed
            initial["seeds"] = str(seed)
        initial.update(extra)
        return initial

    @classmethod
    def initial_from_spec(cls, spec: specs.ExperimentSpec, config: dict, name: str | None = None) -> dict:
        """Initial values that create `spec`'s experiment again; `config` is one of its runs' configs
        (the grid and the seeds set their fields again)."""
        return cls.initial_from(
            config,
            "" if spec.config is not None else spec.preset,
            grid_keys=spec.grid,
            name=spec.name if name is None else name,
            description=spec.description,
            seeds=", ".join(str(seed) for seed in spec.seeds),
            grid=form_inputs.grid_text(spec.grid),
            detector_overrides=form_inputs.dump_yaml(spec.detector_overrides),
            alert_recipients=", ".join(spec.alert_recipients),
            alert_on_warnings=spec.alert_on_warnings,
        )

    @classmethod
    def initial_from_experiment(cls, experiment, run=None) -> dict:
        """ "Re-run with changes" of a whole experiment, or of one of its runs: that run's config and seed."""
        seed = run.config.get("seed") if run else None
        spec = specs.ExperimentSpec(
            name=experiment.name,
            description=experiment.description,
            seeds=[seed] if isinstance(seed, int) else experiment.seeds,
            grid={} if run else experiment.grid,
            preset=run.preset if run and run.preset else experiment.preset,
            config=None if experiment.preset else experiment.config,
            detector_overrides=experiment.detector_overrides,
            alert_recipients=experiment.listed_recipients(),
            alert_on_warnings=experiment.alert_on_warnings,
        )
        label = f"{experiment.name} / {run.label}" if run and run.label else experiment.name
        return cls.initial_from_spec(spec, (run or experiment).config, name=f"{label} (re-run)")


class ImportConfigForm(forms.Form):
    """A trainer config as YAML (a file or pasted text) -> the new-experiment form, prefilled."""

    # Fields of the experiment form's <form> (templates/experiments/new.html): sent with what was typed there.
    file = forms.FileField(
        required=False, label="YAML file", widget=forms.FileInput(attrs={"form": "experiment-form"})
    )
    text = forms.CharField(
        required=False,
        label="or paste YAML",
        widget=forms.Textarea(attrs={"rows": 6, "class": "code", "form": "experiment-form"}),
    )

    def __init__(self, *args, typed: dict | None = None, **kwargs):
        """`typed`: the experiment form's values as sent with the import (ExperimentForm.typed_initial); a
        config of a few settings applies to its environment, preset and seeds."""
        super().__init__(*args, **kwargs)
        self.typed = typed or {}

    def clean(self):
        data = super().clean()
        upload, text = data.get("file"), data.get("text", "")
        if upload:
            if upload.size > MAX_IMPORT_BYTES:
                self.add_error("file", f"the file is {upload.size} bytes; the limit is {MAX_IMPORT_BYTES}")
                return data
            try:
                text = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("file", "the file is not UTF-8 text")
                return data
        field = "file" if upload else "text"
        if not text.strip():
            self.add_error("text", "choose a YAML file or paste a config")
            return data
        try:
            mapping = spec_parsing.parse_mapping(text, "a trainer config (env:, model:, rollout:, ...)")
            imported = (
                self._experiment_initial(mapping, self.typed)
                if spec_parsing.is_experiment_body(mapping)
                else self._config_initial(mapping, self.typed)
            )
            # What the file sets replaces what was typed; the rest (a name it leaves blank) stays.
            data["initial"] = {**self.typed, **{k: v for k, v in imported.items() if v != "" or k != "name"}}
        except ValueError as error:  # YAML problems, ConfigError and SpecError alike
            self.add_error(field, str(error))
        return data

    @staticmethod
    def _config_initial(mapping: dict, typed: dict) -> dict:
        if all(isinstance(mapping.get(name), dict) for name in spec_parsing.CONFIG_SECTIONS):
            config = TrainConfig.from_dict(mapping)  # a whole config, as Export YAML or the trainer writes it
            run_planning.check_limits(config)  # this server's limits, said now rather than at create
            return ExperimentForm.initial_from(config.to_dict())
        # A few settings: overrides on the form as it was sent (its environment, preset and seeds; as it
        # starts where those were not chosen), as its Overrides field takes them, not on the trainer's bare
        # defaults.
        form = ExperimentForm()
        env = typed.get("env") if typed.get("env") in envs.registry() else form.fields["env"].initial
        preset = typed.get("preset") if typed.get("preset") in PRESETS else specs.DEFAULT_PRESET
        config = TrainConfig.preset(preset, **{"env": {"name": env}, **mapping})
        run_planning.check_limits(config)
        imported = ExperimentForm.initial_from(config.to_dict(), preset)
        if "seed" not in mapping:
            imported["seeds"] = form.fields["seeds"].initial
        # Sent with the form: the file sets what it names; the rest of the form stays as typed, and its
        # settings join the typed overrides (the file's win where both set one).
        sets = {"overrides"}
        if "env" in mapping:
            env_fields = f"env__{config.to_dict()['env']['name']}__"
            sets |= {"env", *(name for name in imported if name.startswith(env_fields))}
        if "seed" in mapping:
            sets.add("seeds")
        if "model" in mapping:
            sets |= {"model", "warm_start"}
        if get_dotted(mapping, "schedule.steps") is not None:
            sets.add("steps")
        try:
            typed_overrides = spec_parsing.parse_overrides(typed.get("overrides", ""))
        except ValueError:  # what was typed there does not parse: the file's settings replace it
            typed_overrides = {}
        merged = deep_merge(typed_overrides, yaml.safe_load(imported["overrides"]) or {})
        imported["overrides"] = form_inputs.dump_yaml(merged)
        return {**imported, **typed, **{name: imported[name] for name in sets if name in imported}}

    @staticmethod
    def _experiment_initial(mapping: dict, typed: dict) -> dict:
        # An experiment's export, or one written by hand: checked as the API would create it, every run
        # planned. A hand-written one may leave the name to the form, and without a complete `config`
        # whatever else it leaves out (its environment, preset, ...) stays as typed.
        keep_typed = "config" not in mapping and typed.get("env") in envs.registry()
        body = {"name": "imported", **mapping}
        if keep_typed and "env" not in mapping:
            body["env"] = {"name": typed["env"]}
        spec = spec_parsing.spec_from_json(body)
        planned = run_planning.plan(spec)
        imported = ExperimentForm.initial_from_spec(spec, planned[0].config, name=mapping.get("name", ""))
        if not keep_typed:
            return imported
        sets = set(mapping) | ({"warm_start"} if "model" in mapping else set())
        if "env" in mapping:
            env_fields = f"env__{spec.env['name']}__"
            sets |= {name for name in imported if name.startswith(env_fields)}
        return {**imported, **typed, **{name: imported[name] for name in sets if name in imported}}


class ExperimentListForm(forms.Form):
    """The experiment list's filters, sort and page, from its address: a bad value is named above the list
    (the runs table's way), never dropped for everything or for page 1."""

    # The columns a header click sorts by (as overview.annotated names their values), whether the first
    # click sorts largest first, and the sort select's words for each way (a phone shows no headers)
    SORTS = {
        "created": (F("created_at"), True, ("Oldest first", "Newest first")),
        "name": (Collate("name", natural_sort.COLLATION), False, ("Name, A to Z", "Name, Z to A")),
        "runs": (F("run_count"), True, ("Fewest runs", "Most runs")),
        "collapsed": (F("runs_collapsed"), True, ("Fewest runs collapsed", "Most runs collapsed")),
    }
    DEFAULT_SORT = "-created"

    q = CharField(required=False, max_length=200, label="Search")
    env = ChoiceField(required=False, label="Environment")  # an unknown one is named, not an empty list
    status = ChoiceField(required=False, choices=[("", "Any status"), *Run.Status.choices])
    sort = ChoiceField(
        required=False,
        choices=[
            (("-" if descending else "") + key, words[descending])
            for key, (_, first_descending, words) in SORTS.items()
            for descending in (first_descending, not first_descending)
        ],
    )
    page = WholeNumberField(required=False, min_value=1, max_value=2**31 - 1)

    FILTERS = ("q", "env", "status")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["env"].choices = [("", "Any environment"), *((name, name) for name in envs.registry())]

    def apply(self, experiments):
        data = self.cleaned_data
        if data["q"]:
            experiments = experiments.filter(name__icontains=data["q"])
        if data["env"]:
            experiments = experiments.filter(config__env__name=data["env"])
        if data["status"]:
            # A subquery, not a join: a join would multiply the annotated counts.
            with_status = Run.objects.active().filter(status=data["status"]).values("experiment_id")
            experiments = experiments.filter(pk__in=with_status)
        return experiments

    @property
    def sort_key(self) -> str:
        return self.cleaned_data.get("sort") or self.DEFAULT_SORT

    def ordered(self, experiments):
        """In the order asked for; the id breaks ties, so that pages do not overlap."""
        key, descending = self.sort_key.removeprefix("-"), self.sort_key.startswith("-")
        order, _, _ = self.SORTS[key]
        return experiments.order_by(
            order.desc() if descending else order.asc(), "-id" if descending else "id"
        )

    def headers(self) -> dict[str, dict]:
        """Per sortable column: its aria-sort state and the address a click on its header opens."""
        out = {}
        for key, (_, first_descending, _) in self.SORTS.items():
            state, click = table.sort_link(key, first_descending, self.sort_key)
            out[key] = {"aria_sort": state, "query": urlencode({**self._filters(), "sort": click})}
        return out

    def query_string(self) -> str:
        """The filters and the sort as an address' query, without the page."""
        sort = {"sort": self.cleaned_data["sort"]} if self.cleaned_data["sort"] else {}
        return urlencode({**self._filters(), **sort})

    @property
    def page_words(self) -> tuple[str, str]:
        """The links to the page before and after: which way in time, where the list is sorted by date."""
        by_date = {"-created": ("← Newer", "Older →"), "created": ("← Older", "Newer →")}
        return by_date.get(self.sort_key, ("← Previous", "Next →"))

    @property
    def filtered(self) -> bool:
        return bool(self._filters())

    def _filters(self) -> dict:
        return {name: self.cleaned_data[name] for name in self.FILTERS if self.cleaned_data[name]}
