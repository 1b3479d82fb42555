"""The experiment page's "Send a test email": a real SMTP server gets it at once, and the page says whether
it went (refused, unreachable) and to whom."""

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.factories import make_experiment
from tests.helpers import SmtpInbox, serve_smtp
from webapp.experiments.models import Experiment


def send_test(client, experiment):
    response = client.post(reverse("experiment_alert_test", args=[experiment.pk]), follow=True)
    assert response.status_code == 200
    return [str(message) for message in response.context["messages"]]


def test_the_saved_recipients_get_a_test_email_and_the_page_says_so(
    alice_client, alice, smtp_server, use_smtp
):
    use_smtp(smtp_server.port)
    experiment = make_experiment(alice, name="FrozenLake PPO")
    experiment.set_alerts(["bob@example.com", "carol@example.com"], on_warnings=True)
    assert send_test(alice_client, experiment) == [
        f"Sent a test alert email to bob@example.com, carol@example.com: it went via 127.0.0.1:{smtp_server.port}."
    ]
    [envelope] = smtp_server.envelopes
    assert envelope.rcpt_tos == ["bob@example.com", "carol@example.com"]
    [message] = smtp_server.messages
    assert message["Subject"] == "[EchoLab] Test alert for FrozenLake PPO"
    text = message.get_body(("plain",)).get_content()
    assert 'a test of the alert emails of experiment "FrozenLake PPO", sent by alice' in text
    assert "reports a collapse on one of its runs, or a warning," in text  # warnings are emailed too
    assert f"/experiments/{experiment.pk}/" in text
    html = message.get_body(("html",)).get_content()
    assert "<bdi>FrozenLake PPO</bdi>" in html


def test_a_refused_or_unreachable_mail_server_is_named_on_the_page(alice_client, alice, use_smtp):
    experiment = make_experiment(alice)
    experiment.set_alerts(["bob@example.com"], on_warnings=False)
    with serve_smtp(SmtpInbox(reply="550 mailbox unavailable")) as inbox:
        use_smtp(inbox.port)
        [said] = send_test(alice_client, experiment)
    # the server it tried is named: an operator's "Name or service not known" did not say which
    sent_to = f"The test email to bob@example.com was not sent via 127.0.0.1:{inbox.port}: "
    assert said.startswith(sent_to + "SMTPDataError: ") and "550" in said
    Experiment.objects.update(alert_test_at=None)  # a minute later
    use_smtp(inbox.port)  # nothing listens there now
    [said] = send_test(alice_client, experiment)
    assert said.startswith(sent_to + "ConnectionRefusedError: ")


def test_no_recipients_or_another_users_experiment_sends_nothing(
    alice_client, alice, bob, smtp_server, use_smtp
):
    use_smtp(smtp_server.port)
    alice.email = ""
    alice.save()
    assert send_test(alice_client, make_experiment(alice)) == [
        "No test email: this experiment's alerts go to nobody "
        "(no recipients are saved and your account has no email)."
    ]
    theirs = make_experiment(bob)
    assert alice_client.post(reverse("experiment_alert_test", args=[theirs.pk])).status_code == 404
    assert alice_client.get(reverse("experiment_alert_test", args=[theirs.pk])).status_code in (404, 405)
    assert smtp_server.envelopes == []


def test_one_test_email_a_minute_whatever_the_experiment(alice_client, alice, smtp_server, use_smtp):
    # The button mails any saved address at once: not a relay (a click a second, 50 addresses each)
    use_smtp(smtp_server.port)
    first, second = make_experiment(alice, name="one"), make_experiment(alice, name="two")
    assert send_test(alice_client, first)[0].startswith("Sent a test alert email")
    [said] = send_test(alice_client, second)
    assert said.startswith(
        "No test email: one went out less than a minute ago (one a minute at most); try again in"
    )
    assert len(smtp_server.envelopes) == 1
    Experiment.objects.update(alert_test_at=timezone.now() - Experiment.TEST_EMAIL_INTERVAL)
    assert send_test(alice_client, second)[0].startswith("Sent a test alert email")
    assert len(smtp_server.envelopes) == 2


@pytest.mark.browser
@pytest.mark.slow
def test_the_page_a_test_email_leads_back_to_has_the_alert_settings_open(page):
    experiment = make_experiment(page.user, name="FrozenLake PPO")
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    assert not page.get_by_role("button", name="Send a test email").is_visible()  # folded
    page.locator("#alert-settings summary").click()
    page.get_by_role("button", name="Send a test email").click()
    page.wait_for_url("**#alert-settings")
    assert page.locator(".messages").inner_text().startswith("Sent a test alert email")
    assert page.get_by_role("button", name="Send a test email").is_visible()  # open, where the user was


@pytest.mark.browser
@pytest.mark.slow
def test_recipients_typed_but_not_saved_are_asked_about_before_a_test_email(page):
    from tests.helpers import answer_next_dialog

    experiment = make_experiment(page.user, name="FrozenLake PPO")
    experiment.set_alerts(["bob@example.com"], on_warnings=False)
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    page.locator("#alert-settings summary").click()
    page.get_by_label("Alert recipients").fill("eve@example.com")
    questions = answer_next_dialog(page, accept=False)
    page.get_by_role("button", name="Send a test email").click()
    assert questions == [
        "The recipients typed above are not saved: the test email goes to the saved ones (bob@example.com), "
        "and what you typed is lost when the page reloads. Send it anyway?"
    ]
    assert page.get_by_label("Alert recipients").input_value() == "eve@example.com"  # nothing sent, kept
    assert Experiment.objects.get(pk=experiment.pk).alert_test_at is None
