"""Every page needs a login; every API endpoint answers 401 JSON without credentials."""

import pytest
from django.urls import reverse

PAGES = [
    ("experiment_list", []),
    ("experiment_new", []),
    ("experiment_detail", [1]),
    ("experiment_rerun", [1]),
    ("experiment_export", [1]),
    ("tokens", []),
    ("account", []),
    ("run_list", []),
    ("run_edit", [1]),
    ("runs_export", []),
    ("compare_csv", []),
]
POSTS = [
    ("experiment_stop", [1]),
    ("experiment_alerts", [1]),
    ("experiment_import", []),
    ("token_revoke", [1]),
    ("run_edit", [1]),
    ("run_archive", [1]),
    ("run_restore", [1]),
]
API = [("api_experiments", []), ("api_experiment", [1]), ("api_runs", []), ("api_run", [1])]


@pytest.mark.parametrize("name, args", PAGES)
def test_pages_redirect_to_login(client, db, name, args):
    url = reverse(name, args=args)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.parametrize("name, args", POSTS)
def test_posts_redirect_to_login(client, db, name, args):
    response = client.post(reverse(name, args=args))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name, args", API)
def test_api_needs_credentials(client, db, name, args):
    response = client.get(reverse(name, args=args))
    assert response.status_code == 401
    assert "authentication required" in response.json()["error"]


def test_login_page_logs_in_and_logout_is_a_post(client, alice):
    assert client.get(reverse("login")).status_code == 200
    response = client.post(reverse("login"), {"username": "alice", "password": "alice-password-1"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    assert b"Log out of EchoLab" in client.get(reverse("logout")).content  # a GET asks, it signs nobody out
    assert client.get("/").status_code == 200
    client.post(reverse("logout"))
    assert client.get("/").status_code == 302


def test_wrong_password_shows_an_error(client, alice):
    response = client.post(reverse("login"), {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
