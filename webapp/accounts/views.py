from urllib.parse import urlsplit

from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from webapp.accounts.forms import ApiTokenForm, EmailForm, PasswordForm
from webapp.accounts.models import ApiToken, PasswordResetRequest

NEW_TOKEN_SESSION_KEY = "new_api_token"


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def tokens(request):
    if request.method == "POST":
        form = ApiTokenForm(request.user, request.POST)
        issued = form.save() if form.is_valid() else None
        if issued is not None:
            token, plain = issued
            # Shown on the next page view only: the session forgets it as soon as it is displayed.
            request.session[NEW_TOKEN_SESSION_KEY] = {"name": token.name, "token": plain}
            return redirect("tokens")
    else:
        form = ApiTokenForm(request.user)
    return render(
        request,
        "accounts/tokens.html",
        {
            "form": form,
            "tokens": ApiToken.objects.for_user(request.user).order_by("-created_at"),
            "new_token": request.session.pop(NEW_TOKEN_SESSION_KEY, None),
        },
        status=400 if form.errors else 200,  # as every form of the site answers a refused one
    )


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def account(request):
    """The signed-in user's email and password: two forms on one page, each posted on its own."""
    email_form = EmailForm(instance=request.user)
    password_form = PasswordForm(request.user)
    if request.method == "POST" and "email" in request.POST:
        email_form = EmailForm(request.POST, instance=request.user, request=request)
        if email_form.is_valid():
            email_form.save()
            if request.user.email:
                messages.success(request, "Email saved.")
            else:  # allowed (a user may want no mail), but not without saying what it means
                messages.warning(
                    request,
                    "Email removed: alert emails of experiments that name no recipients of their own now go to "
                    "nobody, and no password-reset link can reach you.",
                )
            return redirect("account")
    elif request.method == "POST":
        password_form = PasswordForm(request.user, request.POST, request=request)
        if password_form.is_valid():
            update_session_auth_hash(request, password_form.save())  # this session stays signed in
            messages.success(request, "Password changed; other sessions are signed out.")
            return redirect("account")
    return render(
        request,
        "accounts/account.html",
        {"email_form": email_form, "password_form": password_form},
        status=400 if email_form.errors or password_form.errors else 200,
    )


@login_required
@require_POST
def token_revoke(request, pk):
    token = get_object_or_404(ApiToken.objects.for_user(request.user), pk=pk)
    token.delete()
    messages.success(request, f"Revoked token '{token.name}' ({token.hint}…); scripts using it now get 401.")
    return redirect("tokens")


def locked_out(request, original_response=None, credentials=None):
    """django-axes' answer to a locked account or address: when to try again, as a time and a wait. Every
    failure during a lockout restarts it (AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT), so this one
    included, the lock ends one cool-off from now."""
    cool_off = get_cool_off(request)
    return render(
        request,
        "accounts/locked_out.html",
        {
            "retry_at": timezone.now() + cool_off,
            "minutes": round(cool_off.total_seconds() / 60),
        },
        status=429,
    )


class PasswordResetView(auth_views.PasswordResetView):
    """Django's reset by email, its link to SITE_URL as every email's link is: Django builds it from the
    request's Host, which a stranger asking for someone's reset chooses (within ALLOWED_HOSTS, any port).
    Its emails are limited per address and per client (PasswordResetRequest)."""

    template_name = "accounts/password_reset.html"
    email_template_name = "emails/password_reset_body.txt"
    html_email_template_name = "emails/password_reset_body.html"
    subject_template_name = "emails/password_reset_subject.txt"

    def form_valid(self, form):
        asked = PasswordResetRequest.ask(form.cleaned_data["email"], self.request.META.get("REMOTE_ADDR", ""))
        if asked == "refuse":
            return render(self.request, "accounts/reset_refused.html", status=429)
        if asked == "again":  # the email sent minutes ago is still good: the same page, nothing sent
            return redirect(self.get_success_url())
        site = urlsplit(settings.SITE_URL)
        form.save(
            domain_override=site.netloc,
            use_https=site.scheme == "https",
            token_generator=self.token_generator,
            from_email=self.from_email,
            email_template_name=self.email_template_name,
            subject_template_name=self.subject_template_name,
            request=self.request,
            html_email_template_name=self.html_email_template_name,
            extra_email_context=self.extra_email_context,
        )
        return redirect(self.get_success_url())


class LogoutView(auth_views.LogoutView):
    """Log out takes a POST (a link or a prefetch must not sign anyone out); a GET, a typed or bookmarked
    address, gets a page with the button instead of a blank 405. After it, the login page says so."""

    http_method_names = ["get", "post", "options"]

    def get(self, request, *args, **kwargs):
        return render(request, "accounts/logout.html")

    def post(self, request, *args, **kwargs):
        response = super().post(request, *args, **kwargs)
        messages.info(request, "You are logged out.")
        return response
