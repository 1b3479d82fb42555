"""API tokens: created on a page, shown once, stored hashed, accepted as Bearer, revocable."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from tests.helpers import on_sqlite
from webapp.accounts.forms import ApiTokenForm
from webapp.accounts.models import LAST_USED_PRECISION, ApiToken, hash_token


def test_token_is_shown_once_and_stored_hashed(alice_client, alice):
    response = alice_client.post(reverse("tokens"), {"name": "laptop"}, follow=True)
    plain = response.context["new_token"]["token"]
    assert plain.startswith("elab_") and plain in response.content.decode()
    token = ApiToken.objects.get(user=alice)
    assert token.token_hash == hash_token(plain) and plain not in token.token_hash
    assert token.hint == plain[:10]
    again = alice_client.get(reverse("tokens")).content.decode()
    assert plain not in again and token.hint in again and "laptop" in again


def test_bearer_token_authenticates_and_records_last_use(client, alice):
    token, plain = ApiToken.issue(alice, "script")
    response = client.get(reverse("api_experiments"), HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert response.status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_last_use_is_written_at_most_once_a_minute(alice):
    token, plain = ApiToken.issue(alice, "script")
    ApiToken.authenticate(plain)
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    ApiToken.authenticate(plain)
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(
        last_used_at=first - LAST_USED_PRECISION - timedelta(seconds=1)
    )
    ApiToken.authenticate(plain)
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first


def test_a_token_answers_for_its_own_user_and_not_once_the_user_is_deactivated(client, alice, bob):
    _, plain = ApiToken.issue(alice, "script")
    ApiToken.issue(bob, "script")
    assert ApiToken.authenticate(plain) == alice
    alice.is_active = False
    alice.save()
    assert ApiToken.authenticate(plain) is None
    response = client.get(reverse("api_experiments"), HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert response.status_code == 401 and response.json() == {"error": "invalid API token"}


def test_wrong_token_is_401(client, alice):
    ApiToken.issue(alice, "script")
    response = client.get(reverse("api_experiments"), HTTP_AUTHORIZATION="Bearer elab_wrong")
    assert response.status_code == 401 and response.json() == {"error": "invalid API token"}


def test_revoked_token_stops_working(alice_client, client, alice):
    token, plain = ApiToken.issue(alice, "script")
    alice_client.post(reverse("token_revoke", args=[token.pk]))
    assert not ApiToken.objects.exists()
    alice_client.logout()
    assert client.get(reverse("api_runs"), HTTP_AUTHORIZATION=f"Bearer {plain}").status_code == 401


def test_cannot_see_or_revoke_another_users_token(client, alice, bob):
    token, _ = ApiToken.issue(alice, "alice's")
    client.force_login(bob)
    assert "alice&#x27;s" not in client.get(reverse("tokens")).content.decode()
    assert client.post(reverse("token_revoke", args=[token.pk])).status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_token_name_is_required(alice_client):
    response = alice_client.post(reverse("tokens"), {"name": ""})
    assert response.status_code == 400 and response.context["form"].errors["name"]
    assert not ApiToken.objects.exists()


def test_a_second_token_of_one_name_is_refused_naming_the_first(alice_client, alice, bob):
    first, _ = ApiToken.issue(alice, "laptop scripts")
    ApiToken.issue(bob, "ci")  # another user's names are theirs
    response = alice_client.post(reverse("tokens"), {"name": "Laptop Scripts"})
    assert response.context["form"].errors["name"] == [
        f"You have a token named 'laptop scripts' (starts with {first.hint}…): choose another name, "
        "or revoke that one first."
    ]
    assert alice_client.post(reverse("tokens"), {"name": "ci"}).status_code == 302
    assert sorted(ApiToken.objects.filter(user=alice).values_list("name", flat=True)) == [
        "ci",
        "laptop scripts",
    ]


def test_one_name_twice_is_refused_by_the_database_too(alice, bob):
    ApiToken.issue(alice, "laptop scripts")
    ApiToken.issue(bob, "Laptop Scripts")  # another user's names are theirs
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiToken.issue(alice, "LAPTOP scripts")


def test_the_form_compares_names_as_the_database_does(alice_client, alice):
    first, _ = ApiToken.issue(alice, "\N{KELVIN SIGN}")  # lower-cased by Postgres to "k"
    response = alice_client.post(reverse("tokens"), {"name": "k"})
    assert (
        response.context["form"]
        .errors["name"][0]
        .startswith("You have a token named '\N{KELVIN SIGN}' (starts")
    )
    assert list(ApiToken.objects.filter(user=alice)) == [first]


def test_a_name_taken_after_the_form_checked_it_is_the_forms_error_and_one_token(
    alice_client, alice, monkeypatch
):
    first, _ = ApiToken.issue(alice, "laptop scripts")
    checks = []
    real = ApiTokenForm._token_named

    def another_request_saves_in_between(form, name):
        checks.append(name)
        return None if len(checks) == 1 else real(form, name)  # the first check comes before the other save

    monkeypatch.setattr(ApiTokenForm, "_token_named", another_request_saves_in_between)
    response = alice_client.post(reverse("tokens"), {"name": "Laptop Scripts"})
    assert response.status_code == 400
    assert response.context["form"].errors["name"] == [
        f"You have a token named 'laptop scripts' (starts with {first.hint}…): choose another name, "
        "or revoke that one first."
    ]
    assert list(ApiToken.objects.filter(user=alice)) == [first]


@pytest.fixture
def migrated_again_afterwards(transactional_db):
    """The test database at every migration again after a test that moved it back: the tables of the later
    migrations are gone otherwise for the rest of the test process (and a worker started later waits for
    them: worker.celery.wait_for_the_database)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_tokens_of_one_name_made_before_the_rule_are_numbered(migrated_again_afterwards, alice):
    executor = MigrationExecutor(connection)
    before, after = [("accounts", "0001_initial")], [("accounts", "0002_one_token_name_per_user")]
    executor.migrate(before)
    OldToken = executor.loader.project_state(before).apps.get_model("accounts", "ApiToken")
    names = ["ci", "CI", "ci (2)", "ci", "x" * 100, "X" * 100, "laptop"]
    for i, name in enumerate(names):
        OldToken.objects.create(user_id=alice.pk, name=name, token_hash=f"{i:064d}", hint=str(i))
    MigrationExecutor(connection).migrate(after)
    renamed = list(ApiToken.objects.order_by("pk").values_list("name", flat=True))
    assert renamed == ["ci", "CI (3)", "ci (2)", "ci (4)", "x" * 100, "X" * 96 + " (2)", "laptop"]


SQLITE_SCRIPT = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from webapp.accounts.models import ApiToken, LAST_USED_PRECISION
user = get_user_model().objects.create_user("sqlite-token", "s@example.com", "pw-sqlite-123")
token, plain = ApiToken.issue(user, "script")
assert ApiToken.authenticate(plain) == user  # writes last_used_at
assert ApiToken.authenticate(plain) == user  # reads it back through the raw query
earlier = ApiToken.objects.get(pk=token.pk).last_used_at - LAST_USED_PRECISION - timedelta(seconds=1)
ApiToken.objects.filter(pk=token.pk).update(last_used_at=earlier)
assert ApiToken.authenticate(plain) == user and ApiToken.objects.get(pk=token.pk).last_used_at > earlier
print("TOKENS OK")
"""


@pytest.mark.slow
def test_tokens_authenticate_again_and_again_on_sqlite(tmp_path):
    """The embedded database (`./echolab run` without DATABASE_URL) reads the raw query's last_used_at
    without the field's converters: a naive datetime, once a 500 on every second use of a token."""
    assert "TOKENS OK" in on_sqlite(tmp_path, SQLITE_SCRIPT)
