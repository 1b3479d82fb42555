"""A queued run's place in the training queue: on the run page and in the runs table, counting
other users' runs ahead without naming them, and "a GPU" only where GPU workers have been seen."""

from datetime import timedelta

from django.utils import timezone

from tests.factories import streamed_run, table_run
from tests.webapp.forms import experiment_post
from webapp.experiments.models import Run
from webapp.runs import queue


def queued_runs(alice, bob):
    now = timezone.now()
    first = table_run(bob, label="bobs-first", queued_at=now - timedelta(minutes=3))
    mine_ahead = table_run(alice, label="alices-first", queued_at=now - timedelta(minutes=2))
    # its message sent last (again, by the sweeper): its place is when it joined the queue
    target = table_run(alice, label="target", queued_at=now - timedelta(minutes=1), enqueued_at=now)
    unsent = table_run(alice, label="not-sent-yet")  # broker was down: in line all the same
    return first, mine_ahead, target, unsent


def test_positions_follow_the_order_runs_joined_the_queue(alice, bob):
    first, mine_ahead, target, unsent = queued_runs(alice, bob)
    table_run(alice, label="running", status=Run.Status.RUNNING)
    assert queue.positions([target.pk, unsent.pk, first.pk]) == {first.pk: 1, target.pk: 3, unsent.pk: 4}
    target.status = Run.Status.RUNNING
    target.save()
    assert queue.positions([target.pk, unsent.pk]) == {unsent.pk: 3}


def test_place_lists_own_runs_ahead_and_only_counts_others(alice, bob):
    first, mine_ahead, target, unsent = queued_runs(alice, bob)
    table_run(bob, label="training", status=Run.Status.RUNNING)
    streamed_run(bob, label="logged by an MLflow client")  # takes no worker: not counted
    place = queue.place(target, alice)
    assert (place.position, place.ahead, place.others_ahead, place.running) == (3, 2, 1, 1)
    assert place.mine_ahead == [mine_ahead]
    assert place.waits_for == "a free worker"
    assert queue.place(first, bob).mine_ahead == []


def test_run_page_header_says_where_the_run_stands(client, alice, bob):
    first, mine_ahead, target, unsent = queued_runs(alice, bob)
    client.force_login(alice)
    html = " ".join(client.get(target.get_absolute_url()).content.decode().split())
    assert "Number 3 in the queue</strong>; it waits for a free worker." in html
    assert "Ahead of it: 2 queued runs (1 of yours: " in html
    assert "/ alices-first</a>; 1 of other users)." in html
    assert "bobs-first" not in html
    assert "0 runs training now." in html

    table_run(
        bob,
        label="gpu run",
        status=Run.Status.COMPLETED,
        device="cuda:0 NVIDIA H200",
        heartbeat_at=timezone.now(),
    )
    html = " ".join(client.get(target.get_absolute_url()).content.decode().split())
    assert "it waits for a GPU." in html


def test_a_run_that_is_not_queued_shows_no_place(client, alice):
    run = table_run(alice, status=Run.Status.RUNNING)
    client.force_login(alice)
    assert 'id="queue-place"' not in client.get(run.get_absolute_url()).content.decode()


def test_runs_table_shows_the_place_of_queued_runs(client, alice, bob):
    first, mine_ahead, target, unsent = queued_runs(alice, bob)
    client.force_login(alice)
    html = " ".join(client.get("/runs/").content.decode().split())
    assert "number 3 in the queue; waits for a free worker" in html
    assert "number 4 in the queue" in html


def test_new_experiment_message_promises_a_gpu_only_where_one_was_seen(alice_client, alice, bob):
    response = alice_client.post("/experiments/new/", experiment_post(), follow=True)
    assert "Created 1 run; each waits for a free worker." in response.content.decode()
    table_run(bob, status=Run.Status.RUNNING, device="cuda:0 NVIDIA H200", heartbeat_at=timezone.now())
    response = alice_client.post("/experiments/new/", experiment_post(), follow=True)
    assert "Created 1 run; each waits for a GPU." in response.content.decode()
