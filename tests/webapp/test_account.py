"""A user who is not staff manages their own account: the email alerts go to, the password, and a reset
by email when it is forgotten (through a real SMTP server)."""

import re

from django.contrib.auth import get_user_model

User = get_user_model()


def test_the_account_page_saves_the_email_and_refuses_a_bad_one(alice_client, alice):
    page = alice_client.get("/account/")
    assert page.status_code == 200 and b"Save email" in page.content
    refused = alice_client.post("/account/", {"email": "not an address", "password": "alice-password-1"})
    assert refused.status_code == 400 and b"Enter a valid email address." in refused.content
    assert User.objects.get(pk=alice.pk).email == alice.email  # nothing written
    # An open session is not enough: the address a reset link goes to needs the password.
    wrong = alice_client.post("/account/", {"email": "mallory@evil.example", "password": "guess"})
    assert b"This is not your password." in wrong.content
    assert User.objects.get(pk=alice.pk).email == alice.email
    saved = alice_client.post(
        "/account/", {"email": "alice@lab.example", "password": "alice-password-1"}, follow=True
    )
    assert b"Email saved." in saved.content
    assert User.objects.get(pk=alice.pk).email == "alice@lab.example"
    removed = alice_client.post("/account/", {"email": "", "password": "alice-password-1"}, follow=True)
    assert (
        "Email removed: alert emails of experiments that name no recipients of their own now go to nobody"
        in (removed.content.decode())
    )
    assert User.objects.get(pk=alice.pk).email == ""


def test_the_account_page_changes_the_password_and_keeps_this_session(alice_client, alice):
    wrong = alice_client.post(
        "/account/",
        {
            "old_password": "not it",
            "new_password1": "a-new-long-pass-42",
            "new_password2": "a-new-long-pass-42",
        },
    )
    assert wrong.status_code == 400 and b"Your old password was entered incorrectly" in wrong.content
    changed = alice_client.post(
        "/account/",
        {
            "old_password": "alice-password-1",
            "new_password1": "a-new-long-pass-42",
            "new_password2": "a-new-long-pass-42",
        },
        follow=True,
    )
    assert b"Password changed" in changed.content
    assert User.objects.get(pk=alice.pk).check_password("a-new-long-pass-42")
    assert alice_client.get("/account/").status_code == 200  # still signed in here


def test_a_password_rule_is_said_under_the_new_password_and_nothing_takes_the_focus(alice_client):
    page = alice_client.get("/account/")
    assert b"autofocus" not in page.content  # the email form is first on the page
    weak = alice_client.post(
        "/account/",
        {"old_password": "alice-password-1", "new_password1": "password", "new_password2": "password"},
    )
    form = weak.context["password_form"]
    assert "This password is too common." in form.errors["new_password1"]
    assert "new_password2" not in form.errors
    mismatch = alice_client.post(
        "/account/",
        {"old_password": "alice-password-1", "new_password1": "a-long-pass-42", "new_password2": "x"},
    )
    assert list(mismatch.context["password_form"].errors) == ["new_password2"]  # the confirmation's own


def test_a_forgotten_password_is_reset_through_the_emailed_link(
    client, alice, smtp_server, use_smtp, settings
):
    use_smtp(smtp_server.port)
    settings.SITE_URL = "https://echolab.lab.example"
    User.objects.filter(pk=alice.pk).update(email="alice@lab.example")
    assert b"Forgot your password?" in client.get("/accounts/login/").content
    # The link goes to SITE_URL, not to the Host the asker sent (a stranger can ask for anyone's reset).
    sent = client.post(
        "/accounts/password-reset/", {"email": "alice@lab.example"}, follow=True, HTTP_HOST="localhost:6666"
    )
    assert b"Check your email" in sent.content
    [message] = smtp_server.messages
    assert message["To"] == "alice@lab.example" and message["Subject"] == "[EchoLab] Reset your password"
    text = message.get_body(("plain",)).get_content()
    link = re.search(r"https://echolab\.lab\.example(/accounts/reset/\S+/)", text).group(1)
    form = client.get(link, follow=True)
    assert b"Choose a new password" in form.content and b"Set password" in form.content
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "reset-pass-1234", "new_password2": "reset-pass-1234"},
        follow=True,
    )
    assert b"Password set" in done.content
    assert User.objects.get(pk=alice.pk).check_password("reset-pass-1234")
    assert b"no longer valid" in client.get(link, follow=True).content  # the link works once


def test_guessing_the_password_from_an_open_session_is_locked_out_as_logins_are(
    alice_client, alice, settings
):
    """The account page checked the password with no limit: a stolen session could guess it forever."""
    for guess in range(settings.AXES_FAILURE_LIMIT - 1):
        wrong = alice_client.post(
            "/account/",
            {
                "old_password": f"guess-{guess}",
                "new_password1": "n3w-pass-word",
                "new_password2": "n3w-pass-word",
            },
        )
        assert wrong.status_code == 400 and b"Your old password was entered incorrectly" in wrong.content
    locked = alice_client.post("/account/", {"email": "mallory@evil.example", "password": "one-more-guess"})
    assert locked.status_code == 429 and b"Too many failed logins" in locked.content
    right = alice_client.post(
        "/account/",
        {
            "old_password": "alice-password-1",
            "new_password1": "n3w-pass-word",
            "new_password2": "n3w-pass-word",
        },
    )
    assert right.status_code == 429  # locked out for the cool-off, the right password too
    assert User.objects.get(pk=alice.pk).check_password("alice-password-1")
    assert User.objects.get(pk=alice.pk).email == alice.email


def test_log_out_by_address_offers_the_button_and_the_login_page_confirms(alice_client):
    page = alice_client.get("/accounts/logout/")
    assert page.status_code == 200 and b"Log out of EchoLab as <strong>alice</strong>?" in page.content
    assert alice_client.get("/account/").status_code == 200  # a GET signs nobody out
    out = alice_client.post("/accounts/logout/", follow=True)
    assert b"You are logged out." in out.content and out.redirect_chain[-1][0].startswith("/accounts/login/")
    assert alice_client.get("/account/").status_code == 302  # signed out now


def test_reset_emails_are_limited_per_address_and_per_client(client, alice, smtp_server, use_smtp):
    """A security tester sent 8 resets of one account in a row: 8 emails from this server's address."""
    from webapp.accounts.models import PasswordResetRequest

    use_smtp(smtp_server.port)
    User.objects.filter(pk=alice.pk).update(email="alice@lab.example")
    for _ in range(3):
        sent = client.post("/accounts/password-reset/", {"email": "Alice@Lab.example"}, follow=True)
        assert b"Check your email" in sent.content  # the same answer each time: nothing said of the limit
    assert len(smtp_server.messages) == 1  # the first email is still good
    others = [f"nobody{n}@lab.example" for n in range(PasswordResetRequest.CLIENT_PER_HOUR - 3)]
    for address in others:
        assert client.post("/accounts/password-reset/", {"email": address}).status_code == 302
    refused = client.post("/accounts/password-reset/", {"email": "alice@lab.example"})
    assert refused.status_code == 429 and b"Too many reset requests" in refused.content
    elsewhere = client.post("/accounts/password-reset/", {"email": "bob@lab.example"}, REMOTE_ADDR="10.0.0.9")
    assert elsewhere.status_code == 302  # another client is not refused
    assert len(smtp_server.messages) == 1
