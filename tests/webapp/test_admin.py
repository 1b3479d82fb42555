"""The Django admin lists every EchoLab model for staff, and only for staff."""

import pytest
from django.contrib.auth import get_user_model

from tests.factories import spec_experiment

MODELS = [
    "experiments/experiment",
    "experiments/run",
    "accounts/apitoken",
    "alerts/detectorevent",
    "alerts/notification",
]


@pytest.mark.parametrize("model", MODELS)
def test_admin_changelists_open_for_staff(client, alice, model):
    spec_experiment(alice)
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    assert client.get(f"/admin/{model}/").status_code == 200


def test_admin_refuses_non_staff(alice_client):
    response = alice_client.get("/admin/experiments/experiment/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
