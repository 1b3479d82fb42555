from django import forms
from django.contrib.auth import get_user_model


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'laptop scripts'.")


class EmailForm(forms.ModelForm):
    """The account's email: where alerts go when an experiment names no recipients, and where a password
    reset link is sent; so changing it asks for the password (a session left open must not be enough to
    take the account over through a reset)."""

    password = forms.CharField(widget=forms.PasswordInput, label="Your password", strip=False)

    def clean_password(self):
        if not self.instance.check_password(self.cleaned_data["password"]):
            raise forms.ValidationError("This is not your password.")
        return ""

    class Meta:
        model = get_user_model()
        fields = ["email"]
        help_texts = {
            "email": "Alerts of experiments that name no recipients go here; so does a password reset link."
        }
