"""The run page's Resume button: shown for a stopped or failed run that EchoLab trains, and it queues the run
again with a message saying where it continues."""

from django.urls import reverse

from tests.factories import make_run


def test_a_stopped_run_is_resumed_from_its_page(alice_client, alice, purge_broker):
    run = make_run(alice, status="stopped", step=7)
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'id="resume-form"' in page and ">Resume</button>" in page

    answer = alice_client.post(reverse("run_resume", args=[run.pk]), follow=True)
    shown = answer.content.decode()
    assert "Resumed: queued again; it continues from its last checkpoint." in shown
    assert ">Resume</button>" not in shown and ">Queued<" in shown

    again = alice_client.post(reverse("run_resume", args=[run.pk]), follow=True).content.decode()
    assert f"Run {run.pk} is queued: only a stopped or failed run can be resumed." in again


def test_no_resume_for_a_completed_run(alice_client, alice):
    run = make_run(alice, status="completed")
    assert ">Resume</button>" not in alice_client.get(run.get_absolute_url()).content.decode()
