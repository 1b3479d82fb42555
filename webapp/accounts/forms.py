from django import forms
from django.contrib.auth import get_user_model


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'laptop scripts'.")


class EmailForm(forms.ModelForm):
    """The account's email: where alerts go when an experiment names no recipients, and where a password
    reset link is sent."""

    class Meta:
        model = get_user_model()
        fields = ["email"]
        help_texts = {
            "email": "Alerts of experiments that name no recipients go here; so does a password reset link."
        }
