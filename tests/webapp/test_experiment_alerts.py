"""An experiment's alert settings (recipients, warnings too) change after it is created: on its page and
with PATCH /api/experiments/<id>. Bad input is named and changes nothing; another user's is a 404."""

import json

import pytest
from django.urls import reverse

from tests.factories import make_experiment
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Experiment
from webapp.tracking.models import ExternalExperiment


@pytest.fixture
def experiment(alice):
    return make_experiment(alice, "sweep", alert_recipients="first@example.com")


def stored(experiment):
    experiment = Experiment.objects.get(pk=experiment.pk)
    return experiment.alert_recipients, experiment.alert_on_warnings


def test_the_page_saves_them_and_shows_them(alice_client, experiment):
    url = reverse("experiment_alerts", args=[experiment.pk])
    data = {"alert_recipients": "me@example.com, team@example.com", "alert_on_warnings": "on"}
    response = alice_client.post(url, data, follow=True)
    assert stored(experiment) == ("me@example.com, team@example.com", True)
    page = response.content.decode()
    assert "Alert settings saved." in page
    assert "alerts to me@example.com, team@example.com (warnings too)" in page


def test_the_settings_say_when_an_email_goes_by_this_servers_settings(alice_client, experiment, settings):
    settings.ALERT_GROUP_SECONDS, settings.ALERT_COOLDOWN_SECONDS = 600, 7200
    page = alice_client.get(experiment.get_absolute_url()).content.decode()
    assert (
        "A collapse is emailed at once (a relapse within 10 minutes of the last waits too). Ticked, warnings "
        "are too: at most one email per run every 10 minutes, "
        "later warnings waiting to go with the next; the same warning rule of a run not again within 2 hours."
    ) in page
    settings.ALERT_GROUP_SECONDS, settings.ALERT_COOLDOWN_SECONDS = 0, 3600
    page = alice_client.get(experiment.get_absolute_url()).content.decode()
    assert (
        "A collapse is emailed at once. Ticked, warnings are too: each at once; the same warning rule of a run "
        "not again within 1 hour."
    ) in page


def test_a_bad_address_is_named_keeps_what_was_typed_and_changes_nothing(alice_client, experiment):
    url = reverse("experiment_alerts", args=[experiment.pk])
    response = alice_client.post(url, {"alert_recipients": "me@example.com, not-an-email"})
    assert response.status_code == 400
    assert "&#x27;not-an-email&#x27; is not a valid email address" in response.content.decode()
    assert 'value="me@example.com, not-an-email"' in response.content.decode()
    assert "<title>Error: " in response.content.decode()  # as every refused form's page: heard first
    assert stored(experiment) == ("first@example.com", False)
    # The refused form was shown at this address: opened again (a reload), it leads to the settings
    again = alice_client.get(url)
    assert again.status_code == 302 and again["Location"] == f"{experiment.get_absolute_url()}#alert-settings"


def test_another_users_experiment_is_a_404(bob_client, experiment):
    url = reverse("experiment_alerts", args=[experiment.pk])
    assert bob_client.post(url, {"alert_recipients": "bob@example.com"}).status_code == 404
    assert stored(experiment) == ("first@example.com", False)


@pytest.fixture
def patch(client, alice):
    token = ApiToken.issue(alice, "tests")[1]

    def send(experiment, body):
        return client.patch(
            reverse("api_experiment", args=[experiment.pk]),
            json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )

    return send


def test_patch_changes_what_it_names_and_keeps_the_rest(patch, experiment):
    response = patch(experiment, {"alert_on_warnings": True})
    assert response.status_code == 200, response.content
    assert response.json()["alert_recipients"] == ["first@example.com"]
    assert stored(experiment) == ("first@example.com", True)
    response = patch(experiment, {"alert_recipients": ["a@example.com", "b@example.com"]})
    assert response.json()["alert_recipients"] == ["a@example.com", "b@example.com"]
    assert stored(experiment) == ("a@example.com, b@example.com", True)
    patch(experiment, {"alert_recipients": ""})  # empty: the owner
    assert Experiment.objects.get(pk=experiment.pk).recipients() == ["alice@example.com"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"alert_recipients": ["a@example.com", "nope"]}, "alert_recipients"),
        ({"alert_on_warnings": "yes"}, "alert_on_warnings"),
        ({"alert_recipients": {}}, "alert_recipients"),
        ({"alert_recipients": None}, "alert_recipients"),
        ({"name": "renamed"}, "name"),
        ({}, None),
        ([], None),
    ],
)
def test_patch_refuses_bad_input_naming_it(patch, experiment, body, field):
    response = patch(experiment, body)
    assert response.status_code == 400
    if field:
        assert list(response.json()["errors"]) == [field]
    assert stored(experiment) == ("first@example.com", False)


def test_what_the_api_takes_the_page_shows_and_saves_again(patch, alice_client, experiment):
    addresses = [f"{'a' * 60}{i:02d}@{'b' * 60}.example.org" for i in range(14)]  # 1,918 characters
    assert patch(experiment, {"alert_recipients": addresses}).status_code == 200
    page = alice_client.get(experiment.get_absolute_url()).content.decode()
    assert ", ".join(addresses) in page
    # Typed with names, as a mail client copies them: longer than the list kept, which meets the limit.
    typed = ", ".join(f"Person {i} <{address}>" for i, address in enumerate(addresses))
    url = reverse("experiment_alerts", args=[experiment.pk])
    saved = alice_client.post(url, {"alert_recipients": typed, "alert_on_warnings": "on"})
    assert saved.status_code == 302 and stored(experiment) == (", ".join(addresses), True)


def test_patch_on_another_users_experiment_is_a_404(client, bob, experiment):
    token = ApiToken.issue(bob, "bob")[1]
    response = client.patch(
        reverse("api_experiment", args=[experiment.pk]),
        json.dumps({"alert_on_warnings": True}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 404
    assert stored(experiment) == ("first@example.com", False)


def test_an_account_without_email_is_told_its_alerts_go_to_nobody(alice_client, alice, experiment):
    alice.email = ""
    alice.save()
    for url in (reverse("experiment_detail", args=[experiment.pk]), reverse("experiment_new")):
        page = alice_client.get(url).content.decode()
        assert "Your account has no email: left empty, alerts go to nobody." in page
        assert f'href="{reverse("account")}"' in page
    alice.email = "alice@lab.example"
    alice.save()
    page = alice_client.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert "alerts go to nobody" not in page and "alerts to first@example.com" in page


def test_an_imported_experiment_says_nothing_is_emailed_and_has_no_alert_settings(alice_client, alice):
    imported = make_experiment(alice, name="from a file", imported=True)
    page = alice_client.get(reverse("experiment_detail", args=[imported.pk])).content.decode()
    assert (
        "imported from a file: its detector events are listed on its run's page, no alert is emailed" in page
    )
    assert "Alert settings" not in page and "alerts to" not in page
    # Logged live through the MLflow endpoint: imported too, and it alerts as a native run does.
    live = ExternalExperiment.create(alice, "live").experiment
    page = alice_client.get(reverse("experiment_detail", args=[live.pk])).content.decode()
    assert "trained elsewhere · alerts to" in page and "Alert settings" in page


def test_alert_settings_of_an_experiment_imported_from_a_file_are_refused(patch, alice_client, alice):
    """They were stored, and nothing would ever read them."""
    imported = make_experiment(alice, name="from a file", imported=True)
    response = patch(imported, {"alert_on_warnings": True})
    assert response.status_code == 409
    assert response.json()["error"] == (
        f"experiment {imported.pk} was imported from a file: its runs were judged once, when imported, and "
        "nothing is emailed"
    )
    url = reverse("experiment_alerts", args=[imported.pk])
    page = alice_client.post(url, {"alert_recipients": "x@example.com"}, follow=True).content.decode()
    assert f"Experiment {imported.pk} was imported from a file" in page
    assert stored(imported) == ("", False)
    live = ExternalExperiment.create(alice, "live").experiment  # logged through MLflow: it alerts
    assert patch(live, {"alert_on_warnings": True}).status_code == 200
