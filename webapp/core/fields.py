"""Form fields every app's forms share."""

import re

from django import forms
from django.core.exceptions import ValidationError

from diagnostics.quoting import quoted


class ChoiceField(forms.ChoiceField):
    """A choice whose error names the choices: Django's own ("Select a valid choice. x is not one of the
    available choices.") names none, and reads oddly as an API's answer."""

    def validate(self, value):
        try:
            super().validate(value)
        except ValidationError as error:
            if error.code != "invalid_choice":
                raise
            allowed = ", ".join(str(key) for key, _ in self.choices if key != "")
            raise ValidationError(
                f"must be one of: {allowed}; got {quoted(value)}", code="invalid_choice"
            ) from None


class CharField(forms.CharField):
    """Text whose length limit is said in the API's words, as the other fields' limits are (Django's:
    "Ensure this value has at most 200 characters (it has 201).")."""

    default_error_messages = {"max_length": "at most %(limit_value)d characters, got %(show_value)d"}


class WholeNumberField(forms.IntegerField):
    """Digits only: "1.0" and " 1" are not integers to the API's schema, so not to this form either. Its
    bounds' messages in the API's words (Django's: "Ensure this value is greater than or equal to 1.")."""

    default_error_messages = {
        "min_value": "must be at least %(limit_value)s",
        "max_value": "must be at most %(limit_value)s",
    }

    def to_python(self, value):
        if value not in self.empty_values and not re.fullmatch(r"-?[0-9]+", str(value)):
            raise forms.ValidationError("must be a whole number, like 3", code="invalid")
        return super().to_python(value)


class DecimalNumberField(forms.FloatField):
    """A number in ASCII digits (Python's float() reads "٥" as 5), its bounds' messages as WholeNumberField's."""

    default_error_messages = WholeNumberField.default_error_messages

    def to_python(self, value):
        text = str(value).strip()
        if value not in self.empty_values and not re.fullmatch(
            r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", text
        ):
            raise forms.ValidationError("must be a number, like 0.8", code="invalid")
        return super().to_python(value)


TICKED = "on"  # what a browser sends for a ticked box without a value attribute


class TickBoxInput(forms.CheckboxInput):
    """A checkbox that hands its field the text as sent (absent: False), and never writes a value
    attribute, so that a ticked box always sends TICKED."""

    def value_from_datadict(self, data, files, name):
        return data.get(name, False)

    def format_value(self, value):
        return None


class TickBox(forms.BooleanField):
    """A checkbox that takes what a browser sends for one: TICKED when ticked, nothing when not. Django's
    BooleanField reads any other text ("banana") as ticked."""

    widget = TickBoxInput

    def to_python(self, value):
        if value is None or isinstance(value, bool):  # unticked, or a disabled field's initial value
            return bool(value)
        if value == TICKED:
            return True
        raise ValidationError(
            f"a checkbox sends {TICKED!r} when ticked and nothing when not; got {quoted(value)}",
            code="invalid",
        )
