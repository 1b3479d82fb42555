"""Failed logins are throttled by django-axes, per account and per client address; a locked-out user is
told when to try again, and the right password does not get through a lockout."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

LIMIT = 5


def attempt(username, password, address="10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(reverse("login"), {"username": username, "password": password})


def logged_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.client.session


@pytest.fixture(autouse=True)
def limits(settings):
    settings.AXES_FAILURE_LIMIT = LIMIT
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


def test_thirty_wrong_passwords_then_the_right_one_is_refused(alice):
    for _ in range(30):
        attempt("alice", "wrong")
    response = attempt("alice", "alice-password-1")
    assert not logged_in(response)
    assert response.status_code == 429
    text = response.content.decode()
    assert "Too many failed logins" in text
    shown = re.search(r"Try again after <strong>(\d\d):(\d\d) UTC</strong> \((\d+) minutes from now\)", text)
    assert shown, text
    expected = timezone.now() + timedelta(minutes=15)
    assert shown.group(3) == "15"
    assert abs((int(shown.group(1)) * 60 + int(shown.group(2))) - (expected.hour * 60 + expected.minute)) in (
        0,
        1,
        1439,
    )


def test_the_account_is_locked_from_every_address(alice):
    for number in range(LIMIT):
        attempt("alice", "wrong", address=f"10.0.1.{number}")
    assert attempt("alice", "alice-password-1", address="10.0.2.1").status_code == 429


def test_an_address_is_locked_for_every_account(alice, bob):
    for number in range(LIMIT):
        attempt(f"nobody{number}", "wrong", address="10.0.3.1")
    assert attempt("bob", "bob-password-1", address="10.0.3.1").status_code == 429
    assert logged_in(attempt("bob", "bob-password-1", address="10.0.3.2"))


def test_fewer_failures_than_the_limit_still_log_in_and_a_success_resets_the_count(alice):
    for _ in range(LIMIT - 1):
        assert attempt("alice", "wrong").status_code == 200
    assert logged_in(attempt("alice", "alice-password-1"))
    for _ in range(LIMIT - 1):
        attempt("alice", "wrong")
    assert logged_in(attempt("alice", "alice-password-1"))


def test_the_lock_ends_after_the_cool_off(alice, settings):
    for _ in range(LIMIT):
        attempt("alice", "wrong")
    assert attempt("alice", "alice-password-1").status_code == 429
    from axes.models import AccessAttempt

    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert logged_in(attempt("alice", "alice-password-1"))
