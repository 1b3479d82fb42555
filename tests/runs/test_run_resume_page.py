"""The run page's Resume button: shown for a stopped or failed run that EchoLab trains, and it queues the run
again with a message saying where it continues."""

import re
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format

from tests.factories import make_checkpoint, make_run
from webapp.experiments.models import Run


def test_a_stopped_run_is_resumed_from_its_page(alice_client, alice, purge_broker, settings, tmp_path):
    settings.CHECKPOINT_ROOT = tmp_path
    run = make_run(alice, status="stopped", step=7)
    make_checkpoint(run, 5)
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'id="resume-form"' in page and ">Resume</button>" in page

    answer = alice_client.post(reverse("run_resume", args=[run.pk]), follow=True)
    shown = answer.content.decode()
    assert "Resumed: queued again; it continues from its last checkpoint." in shown
    assert ">Resume</button>" not in shown and ">Queued<" in shown

    again = alice_client.post(reverse("run_resume", args=[run.pk]), follow=True).content.decode()
    assert f"Run {run.pk} is queued: only a stopped or failed run can be resumed." in again


def test_a_run_stopped_before_it_trained_says_it_starts_from_step_0(
    alice_client, alice, purge_broker, settings, tmp_path
):
    settings.CHECKPOINT_ROOT = tmp_path
    never_started = make_run(alice, status="stopped", step=0)
    answer = alice_client.post(reverse("run_resume", args=[never_started.pk]), follow=True).content.decode()
    assert "Resumed: queued again; it starts from step 0 (it had trained no step)." in answer
    no_checkpoint = make_run(alice, status="stopped", step=3)
    answer = alice_client.post(reverse("run_resume", args=[no_checkpoint.pk]), follow=True).content.decode()
    assert "Resumed: queued again; it starts again from step 0: no checkpoint of it was saved." in answer
    # saved while its metrics could not be written: the worker drops checkpoints ahead of the stored steps
    ahead = make_run(alice, status="failed", step=15)
    make_checkpoint(ahead, 30)
    answer = alice_client.post(reverse("run_resume", args=[ahead.pk]), follow=True).content.decode()
    assert "it starts again from step 0: its checkpoints are all ahead of its stored steps" in answer
    # failed before its first checkpoint: the trainer made its folder all the same (and pruning may empty it)
    early = make_run(alice, status="failed", step=3)
    (early.checkpoint_dir / "checkpoints").mkdir(parents=True)
    answer = alice_client.post(reverse("run_resume", args=[early.pk]), follow=True).content.decode()
    assert "it starts again from step 0: no checkpoint of it was saved." in answer


def test_no_resume_for_a_completed_run(alice_client, alice):
    run = make_run(alice, status="completed")
    assert ">Resume</button>" not in alice_client.get(run.get_absolute_url()).content.decode()


def test_a_run_resumed_and_stopped_again_in_the_queue_still_says_when_it_trained(
    alice_client, alice, purge_broker
):
    """Resumed, then stopped again before a worker took it: its page said "Started –" beside the steps,
    the worker and the duration of the attempt it had trained."""
    run = make_run(alice)
    assert run.claim("vm", 1, "cpu")
    started = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(started_at=started, step=12)
    run.refresh_from_db()
    assert run.finish(Run.Status.STOPPED)
    run.resume()
    run.request_stop()
    page = alice_client.get(run.get_absolute_url()).content.decode()
    shown = re.search(r"<dt>Started</dt><dd>(.*?)</dd>", page)[1]
    assert shown == date_format(timezone.localtime(started), "DATETIME_FORMAT")
