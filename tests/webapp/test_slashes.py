"""A page's address works with or without its trailing slash."""


def test_a_trailing_slash_a_page_does_not_have_redirects_to_it(alice_client):
    response = alice_client.get("/import/")
    assert (response.status_code, response["Location"]) == (301, "/import")
    response = alice_client.get("/runs/7/trajectories/?step=5")
    assert (response.status_code, response["Location"]) == (301, "/runs/7/trajectories?step=5")
    assert alice_client.get("/runs").status_code == 301  # Django's APPEND_SLASH, the other way


def test_a_slash_on_an_address_that_is_no_page_either_way_stays_a_404(alice_client, client, db):
    assert alice_client.get("/nothing-here/").status_code == 404
    assert alice_client.get("/runs/99999/").status_code == 404  # the page exists, the run does not
    assert client.get("/api/runs/1/stop/").status_code in (401, 404)  # an API URL is not redirected
