from django import forms
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.forms import PasswordChangeForm
from django.db import IntegrityError, transaction
from django.db.models import Value
from django.db.models.functions import Lower

from webapp.accounts.models import ApiToken


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'laptop scripts'.")

    def __init__(self, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_name(self):
        """One token per name: two called "laptop scripts" cannot be told apart in the list or when one
        is revoked."""
        name = self.cleaned_data["name"]
        taken = self._token_named(name)
        if taken is not None:
            raise forms.ValidationError(self._taken_message(taken))
        return name

    def save(self) -> tuple[ApiToken, str] | None:
        """(token, its plain text), or None with the name's error when a token of that name was made since
        the form was checked (the same form submitted twice at once)."""
        name = self.cleaned_data["name"]
        try:
            with transaction.atomic():
                return ApiToken.issue(self.user, name)
        except IntegrityError:
            self.add_error("name", self._taken_message(self._token_named(name)))
            return None

    def _token_named(self, name: str) -> ApiToken | None:
        """Compared as the database's constraint compares them: lower-cased by the database."""
        return (
            ApiToken.objects.for_user(self.user)
            .alias(folded=Lower("name"))
            .filter(folded=Lower(Value(name)))
            .first()
        )

    @staticmethod
    def _taken_message(taken: ApiToken | None) -> str:
        if taken is None:  # revoked again meanwhile
            return "A token of this name was made at the same time: reload the page to see your tokens."
        return (
            f"You have a token named {taken.name!r} (starts with {taken.hint}…): choose another name, "
            "or revoke that one first."
        )


def is_own_password(request, user, password: str) -> bool:
    """The signed-in user's password, checked as the login page checks one: django-axes counts each
    failure and locks the account out as it does there, so a session left open is no way to guess it."""
    return authenticate(request, username=user.get_username(), password=password) == user


class EmailForm(forms.ModelForm):
    """The account's email: where alerts go when an experiment names no recipients, and where a password
    reset link is sent; so changing it asks for the password (a session left open must not be enough to
    take the account over through a reset)."""

    password = forms.CharField(widget=forms.PasswordInput, label="Your password", strip=False)

    def __init__(self, *args, request=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.request = request

    def clean_password(self):
        if not is_own_password(self.request, self.instance, self.cleaned_data["password"]):
            raise forms.ValidationError("This is not your password.")
        return ""

    class Meta:
        model = get_user_model()
        fields = ["email"]
        help_texts = {
            "email": "Alerts of experiments that name no recipients go here; so does a password reset link."
        }


class PasswordForm(PasswordChangeForm):
    """Django's password change, with a password rule's error ("too common") under the new password it is
    about, not under its confirmation, and no autofocus: the account page has the email form above it."""

    def __init__(self, *args, request=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.request = request
        self.fields["old_password"].widget.attrs.pop("autofocus", None)

    def clean_old_password(self):
        old = self.cleaned_data["old_password"]
        if not is_own_password(self.request, self.user, old):
            raise forms.ValidationError(self.error_messages["password_incorrect"], code="password_incorrect")
        return old

    def clean(self):
        self.validate_passwords("new_password1", "new_password2")
        self.validate_password_for_user(self.user, "new_password1")
        return forms.Form.clean(self)
