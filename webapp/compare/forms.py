from django import forms

import envs
from trainer.config import TINY_MODEL, TrainConfig
from webapp.compare import ablations
from webapp.compare.ablations import ABLATIONS
from webapp.core.fields import ChoiceField, WholeNumberField
from webapp.experiments import run_planning, spec_parsing, specs
from webapp.experiments.forms import number_input


class AblationForm(forms.Form):
    ablation = ChoiceField(choices=[(a.key, a.title) for a in ABLATIONS.values()], widget=forms.RadioSelect)
    env = ChoiceField(
        label="Environment",
        required=False,
        help_text="The paper's: the environment the paper used for this ablation.",
    )
    model = forms.CharField(
        initial=TINY_MODEL,
        max_length=300,
        help_text="'tiny' (CPU), a hub id like Qwen/Qwen2.5-0.5B-Instruct, or a folder in MODEL_ROOT.",
    )
    seeds = forms.CharField(initial="1, 2", help_text="One run per setting and seed.")
    steps = WholeNumberField(
        required=False,
        min_value=1,
        max_value=specs.MAX_STEPS,
        widget=number_input(True),
        help_text=(
            "Empty: the preset's default for the model: "
            f"{TrainConfig.preset('starpo', model={'name': TINY_MODEL}).schedule.steps} for 'tiny', "
            f"{TrainConfig.preset('starpo', model={'name': 'any/hub-model'}).schedule.steps} (as in the paper) "
            "for the others."
        ),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["env"].choices = [("", "the paper's")] + [(name, name) for name in envs.registry()]

    def clean_model(self):
        try:
            return spec_parsing.resolve_model(self.cleaned_data["model"])
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None

    def clean_seeds(self):
        try:
            return spec_parsing.parse_seeds(self.cleaned_data["seeds"])
        except ValueError as error:
            raise forms.ValidationError(str(error)) from None

    # Where the planner's refusals belong on this form: it has no grid, and its seeds set how many runs
    SPEC_FIELDS = {"grid": "seeds"}

    def clean(self):
        """Also plans the runs (`spec`, `planned`), whenever the fields they need are valid: with the
        preset's steps when the steps are refused, so that a run limit is named with them, not after."""
        data = super().clean()
        self.spec, self.planned = None, []
        if "ablation" in data:
            data["ablation"] = ABLATIONS[data["ablation"]]
            data["env"] = data.get("env") or data["ablation"].default_env
        if all(name in data for name in ("ablation", "model", "seeds")):
            spec = ablations.build_spec(
                data["ablation"], data["env"], data["model"], data["seeds"], data.get("steps")
            )
            try:
                planned = run_planning.plan(spec)
            except specs.SpecError as error:
                self.add_spec_errors(error.errors)
            else:
                if alike := data["ablation"].alike_arms(planned):
                    self.add_error("env", alike)
                else:
                    self.spec, self.planned = spec, planned
        return data

    def add_spec_errors(self, errors: dict[str, str]):
        for key, message in errors.items():
            field = self.SPEC_FIELDS.get(key, key)
            field = field if field in self.fields else None
            self.add_error(field, message if field else f"{key}: {message}")
