"""Form fields every app's forms share."""

from django import forms
from django.core.exceptions import ValidationError

from diagnostics.series import clip


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
                f"must be one of: {allowed}; got {clip(value)}", code="invalid_choice"
            ) from None
