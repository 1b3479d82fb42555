"""runs/search and experiments/search against MLflow's own answers: the same runs logged through the real
`mlflow` client into EchoLab and into MLflow's SQL store (what `mlflow server` keeps its runs in, here in
SQLite), then the same searches asked of both. Both must name the same runs in the same order."""

import math
import time

import pytest

from tests.tracking.conftest import point_mlflow_at
from webapp.accounts.models import ApiToken

RUNS = [  # name, lr param, team tag, reward at step 0 then 1, status
    ("lr-nan", "1e-3", "ops", (0.2, float("nan")), "FINISHED"),
    ("lr-a", "1e-3", "rl", (0.1, 0.2), "FINISHED"),
    ("lr-b", "3e-4", "rl", (0.4, 0.9), "FINISHED"),
    ("LR-c", "1e-4", None, (0.5, 0.5), "FAILED"),
    ("plain", None, None, None, "FINISHED"),
    ("lr-d", "3e-4", "ops", (0.7, float("nan")), "KILLED"),
    ("lr_e", "1e-2", "rl", (0.3, 0.3), "FINISHED"),
]
SEARCHES = [  # filter, order_by
    ("", ["metrics.reward DESC"]),
    ("", ["metrics.reward ASC"]),
    ("", ["params.lr"]),
    ("", ["params.lr DESC", "metrics.reward DESC"]),
    ("", ["attributes.start_time ASC"]),
    ("", ["run_name DESC"]),
    ("", ["tags.team", "run_name"]),
    ("metrics.reward > 0.4", ["metrics.reward DESC"]),
    ("metrics.reward <= 0.3", []),
    ("metrics.reward != 0.5", ["run_name"]),
    ("attributes.run_name LIKE 'lr-%'", ["run_name"]),
    ("run_name ILIKE 'lr-%'", ["run_name"]),
    ("run_name LIKE 'lr_e'", []),
    ("tags.team IS NULL", ["run_name"]),
    ("tags.team IS NOT NULL AND params.lr = '3e-4'", ["run_name"]),
    ("params.lr != '1e-3'", []),
    ("params.lr LIKE '%e-4'", ["metrics.reward DESC"]),
    ("attributes.status = 'FINISHED'", ["metrics.reward DESC", "run_name"]),
    ("status != 'FINISHED'", []),
    ("attributes.start_time > 0 AND tags.team = 'rl'", ["attributes.start_time DESC"]),
    ("attributes.created > 0", ["attribute.created ASC"]),  # the names MLflow's UI shows
    ("attributes.artifact_uri LIKE '%/artifacts'", ["run_name"]),
]


def log_runs(client, experiment_id: str) -> dict[str, str]:
    """The RUNS into `experiment_id`, a second apart (start times order them); name -> run id."""
    start = int(time.time() * 1000) - 60_000
    ids = {}
    for index, (name, lr, team, rewards, status) in enumerate(RUNS):
        run = client.create_run(experiment_id, run_name=name, start_time=start + 1000 * index)
        if lr is not None:
            client.log_param(run.info.run_id, "lr", lr)
        if team is not None:
            client.set_tag(run.info.run_id, "team", team)
        for step, reward in enumerate(rewards or ()):
            client.log_metric(run.info.run_id, "reward", reward, step=step)
        client.set_terminated(run.info.run_id, status)
        ids[name] = run.info.run_id
    return ids


@pytest.fixture
def both(live_server, alice, monkeypatch, tmp_path, purge_broker):
    """(EchoLab's client, an MLflow SQL store's client), each with an experiment "sweep"."""
    import mlflow

    point_mlflow_at(monkeypatch, live_server.url, ApiToken.issue(alice, "mlflow")[1])
    peer = mlflow.MlflowClient(
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", registry_uri=(tmp_path / "registry").as_uri()
    )
    clients = [mlflow.MlflowClient(), peer]
    yield [(client, client.create_experiment("sweep")) for client in clients]
    mlflow.set_tracking_uri(None)


def test_searches_name_the_same_runs_in_the_same_order_as_mlflow(both):
    logged = [(client, experiment_id, log_runs(client, experiment_id)) for client, experiment_id in both]
    found = []
    for filter_string, order_by in SEARCHES:
        answers = [
            [
                run.info.run_name
                for run in client.search_runs([experiment_id], filter_string, order_by=order_by)
            ]
            for client, experiment_id, _ in logged
        ]
        assert answers[0] == answers[1], (filter_string, order_by)
        found.append(answers[0])
    # the best by reward, then NaN (the newest first), then none
    assert found[0] == ["lr-b", "LR-c", "lr_e", "lr-a", "lr-d", "lr-nan", "plain"]
    assert all(found), "every search finds some runs: agreeing on none would say little"
    # a list of run ids: each store's own
    answers = []
    for client, experiment_id, ids in logged:
        listed = f"attributes.run_id IN ('{ids['lr-a']}', '{ids['plain']}')"
        answers.append(
            [run.info.run_name for run in client.search_runs([experiment_id], listed, order_by=["run_name"])]
        )
    assert answers[0] == answers[1] == ["lr-a", "plain"]


def test_experiment_searches_agree_with_mlflow(both):
    for client, experiment_id in both:
        client.create_experiment("another", tags={"team": "ops"})
        client.set_experiment_tag(experiment_id, "team", "rl")
    for filter_string, order_by in [
        ("name LIKE '%wee%'", []),
        ("name != 'sweep'", ["name"]),
        ("tags.team = 'rl'", []),
        ("tags.team IS NOT NULL", ["name DESC"]),
    ]:
        answers = [
            [
                e.name
                for e in client.search_experiments(filter_string=filter_string, order_by=order_by)
                if e.name != "Default"
            ]
            for client, _ in both
        ]
        assert answers[0] == answers[1] != [], (filter_string, order_by)


@pytest.mark.parametrize(
    "name", ["eval: acc/mean-1.0", "bad key!?", "a<b>", "../x", "/abs", "a//b", "x/", "é_ok"]
)
def test_the_names_mlflow_refuses_are_refused_alike(both, name):
    import mlflow

    taken = []
    for client, experiment_id in both:
        run = client.create_run(experiment_id)
        try:
            client.log_param(run.info.run_id, name, "1")
            client.log_metric(run.info.run_id, name, 1.0, step=0)
            taken.append(True)
        except mlflow.MlflowException:
            taken.append(False)
    assert taken[0] == taken[1], name


def test_quotes_inside_a_searched_value_are_read_as_mlflow_reads_them(both):
    """MLflow keeps a value as written between its quotes: 'it''s' and 'it\\'s' find no "it's" (and were a 400
    here, naming the wrong part); "it's" in double quotes finds it."""
    for client, experiment_id in both:
        for name in ("it's", 'say "hi"', "plain"):
            client.set_terminated(client.create_run(experiment_id, run_name=name).info.run_id)
    filters = [
        "run_name = 'it''s'",
        "run_name LIKE 'it\\'%'",
        'run_name = "say ""hi"""',
        "run_name != 'it''s'",
    ]
    for filter_string in [*filters, 'run_name = "it\'s"', "run_name LIKE '%\"hi\"'"]:
        answers = [
            sorted(run.info.run_name for run in client.search_runs([experiment_id], filter_string))
            for client, experiment_id in both
        ]
        assert answers[0] == answers[1], filter_string
    assert answers == [['say "hi"'], ['say "hi"']]


def test_datasets_a_run_used_are_kept_and_answered_as_mlflow_answers_them(both):
    from mlflow.entities import Dataset, DatasetInput, InputTag

    train = Dataset("bandit-train", "92a7ac9c", "s3", '{"uri": "s3://bucket/train.npy"}', profile='{"n": 6}')
    evaluation = Dataset("bandit-eval", "0b1c2d3e", "local", '{"uri": "/data/eval.jsonl"}', schema='{"a": 1}')
    answers = []
    for client, experiment_id in both:
        run_id = client.create_run(experiment_id).info.run_id
        client.log_inputs(run_id, [DatasetInput(train, [InputTag("mlflow.data.context", "training")])])
        client.log_inputs(
            run_id,
            [
                DatasetInput(evaluation, [InputTag("mlflow.data.context", "eval")]),
                DatasetInput(train, [InputTag("mlflow.data.context", "again")]),  # logged again: kept once
            ],
        )
        inputs = client.get_run(run_id).inputs.dataset_inputs
        answers.append(
            sorted(
                (
                    each.dataset.name,
                    each.dataset.digest,
                    each.dataset.source_type,
                    each.dataset.source,
                    each.dataset.schema,
                    each.dataset.profile,
                    sorted((tag.key, tag.value) for tag in each.tags),
                )
                for each in inputs
            )  # fmt: skip
        )
    ours, theirs = answers
    assert ours == theirs
    assert [name for name, *_ in ours] == ["bandit-eval", "bandit-train"]


DATASET_SEARCHES = [
    "datasets.name = 'bandit-train'",
    "dataset.name != 'bandit-train'",
    "datasets.context = 'eval'",
    "datasets.context IN ('eval', 'test')",
    "datasets.digest NOT IN ('0b1c2d3e')",
    "datasets.name LIKE 'bandit%' AND params.lr = '1e-4'",
    "datasets.name ILIKE '%EVAL'",
]


def test_searches_by_the_datasets_runs_used_find_what_mlflow_finds(both):
    from mlflow.entities import Dataset, DatasetInput, InputTag

    train = Dataset("bandit-train", "92a7ac9c", "s3", '{"uri": "s3://b/train"}')
    evaluation = Dataset("bandit-eval", "0b1c2d3e", "local", '{"uri": "/eval"}')
    used = {  # run name -> its datasets and their contexts
        "both": [(train, "training"), (evaluation, "eval")],
        "train only": [(train, "training")],
        "eval, no context": [(evaluation, None)],
        "none": [],
    }
    found = []
    for client, experiment_id in both:
        ids = {}
        for name, datasets in used.items():
            run_id = client.create_run(experiment_id, run_name=name).info.run_id
            client.log_param(run_id, "lr", "1e-4" if name != "both" else "1e-3")
            if datasets:
                inputs = [
                    DatasetInput(d, [InputTag("mlflow.data.context", c)] if c else []) for d, c in datasets
                ]
                client.log_inputs(run_id, inputs)
            ids[run_id] = name
        found.append(
            [
                sorted(
                    ids[run.info.run_id] for run in client.search_runs([experiment_id], filter_string=query)
                )
                for query in DATASET_SEARCHES
            ]
        )
    ours, theirs = found
    assert ours == theirs
    assert ours[0] == ["both", "train only"] and ours[2] == ["both"]


def test_metric_timestamps_come_back_as_mlflow_gives_them_back(both):
    """The client's timestamp of each point, from get_metric_history and get_run (the newest step's), as
    MLflow keeps them; log_metric, log_batch and log_metrics send them differently."""
    from mlflow.entities import Metric

    logged_at = 1_765_000_000_000
    answers = []
    for client, experiment_id in both:
        run_id = client.create_run(experiment_id, run_name="timed").info.run_id
        client.log_metric(run_id, "reward", 0.1, timestamp=logged_at, step=0)
        client.log_batch(
            run_id,
            metrics=[
                Metric("reward", 0.2, logged_at + 2_500, 1),
                Metric("loss", 1.5, logged_at + 2_500, 1),
                Metric("reward", 0.4, logged_at + 9_000, 3),  # steps need not follow the times
                Metric("loss", 1.0, logged_at + 1, 2),
            ],
        )
        history = {
            key: [(m.step, m.value, m.timestamp) for m in client.get_metric_history(run_id, key)]
            for key in ("reward", "loss")
        }
        newest = sorted(
            (m.key, m.step, m.value, m.timestamp) for m in client.get_run(run_id).data._metric_objs
        )
        answers.append((history, newest))
    ours, theirs = answers
    assert ours == theirs
    assert ours[0]["reward"][2] == (3, 0.4, logged_at + 9_000)


def test_runs_started_at_the_same_time_are_paged_in_mlflows_order(both):
    """Ties on start time are broken by run id, as MLflow's SQL store breaks them, so pages of max_results
    hold the same runs whichever server a notebook asks."""
    for client, experiment_id in both:
        ids = [client.create_run(experiment_id, start_time=1_750_000_000_000).info.run_id for _ in range(5)]
        paged, token = [], None
        while True:
            page = client.search_runs([experiment_id], max_results=2, page_token=token)
            paged += [run.info.run_id for run in page]
            token = page.token
            if not token:
                break
        assert paged == sorted(ids), client.tracking_uri


def test_experiment_names_and_tags_are_kept_as_mlflow_keeps_them(both):
    """A name with spaces around it is found again by that name (set_experiment looks it up: a second run of
    a script once crashed in the client); an experiment's tag can be deleted, once."""
    import mlflow

    answers = []
    for client, _ in both:
        experiment_id = client.create_experiment(" demo ", tags={"team": "rl", "stage": "try"})
        found = client.get_experiment_by_name(" demo ")
        client.delete_experiment_tag(experiment_id, "stage")
        with pytest.raises(mlflow.MlflowException) as again:
            client.delete_experiment_tag(experiment_id, "stage")
        kept = client.get_experiment(experiment_id)
        answers.append((found.experiment_id == experiment_id, kept.name, kept.tags, again.value.error_code))
    assert answers[0] == answers[1] == (True, " demo ", {"team": "rl"}, "RESOURCE_DOES_NOT_EXIST")


def test_an_experiment_with_an_artifact_location_of_its_own_has_its_runs_files_sent_there(
    both, tmp_path, alice
):
    import mlflow
    from django.test import Client

    answers = []
    for client, _ in both:
        experiment_id = client.create_experiment("bucketed", artifact_location="s3://lab-bucket/rl")
        run = client.create_run(experiment_id)
        uri = run.info.artifact_uri.replace(run.info.run_id, "<run>")
        answers.append((client.get_experiment(experiment_id).artifact_location, uri))
    assert answers[0] == answers[1] == ("s3://lab-bucket/rl", "s3://lab-bucket/rl/<run>/artifacts")

    # A shared folder: the client writes the files there itself, and the run page says where
    ours, shared = both[0][0], tmp_path / "shared"
    run = ours.create_run(ours.create_experiment("shared", artifact_location=str(shared)))
    ours.log_text(run.info.run_id, "hello", "notes/a.txt")
    assert (shared / run.info.run_id / "artifacts" / "notes" / "a.txt").read_text() == "hello"
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/mlflow/runs/{run.info.run_id}/", follow=True).content.decode()
    assert f"the client writes the run's files to <code>{shared}/{run.info.run_id}/artifacts</code>" in page
    with pytest.raises(mlflow.MlflowException, match="cannot be a runs:/ URI"):
        ours.create_experiment("bad", artifact_location="runs:/0123/model")


def test_a_metric_logged_without_steps_keeps_every_point_as_mlflow_does(both, alice):
    """`for ...: mlflow.log_metric("loss", v)` sends each at step 0: MLflow keeps them all, read back at step
    0 by time; EchoLab numbers them in the order they came (its charts' steps) and answers step 0 too."""
    from mlflow.entities import Metric

    from webapp.metrics.models import MetricPoint

    t = 1_765_000_000_000
    answers, run_ids = [], []
    for client, experiment_id in both:
        run_id = client.create_run(experiment_id).info.run_id
        for i, loss in enumerate([0.9, 0.7, 0.6]):
            client.log_metric(run_id, "loss", loss, timestamp=t + i)  # no step
        client.log_batch(run_id, metrics=[Metric("acc", a, t + 10 + i, 0) for i, a in enumerate([0.1, 0.3])])
        client.log_batch(run_id, metrics=[Metric("acc", 0.4, t + 20, 0), Metric("lr", 1e-3, t + 20, 0)])
        for step in range(3):  # logged with steps, then again from step 0 (a script restarted)
            client.log_metric(run_id, "reward", step / 10, timestamp=t + 30 + step, step=step)
        client.log_metric(run_id, "reward", 0.5, timestamp=t + 40, step=0)
        history = {
            key: [(m.step, m.value, m.timestamp) for m in client.get_metric_history(run_id, key)]
            for key in ("loss", "acc", "lr", "reward")
        }
        newest = sorted((m.key, m.step, m.value) for m in client.get_run(run_id).data._metric_objs)
        answers.append((history, newest))
        run_ids.append(run_id)
    ours, theirs = answers
    assert ours[0]["loss"] == [(0, 0.9, t), (0, 0.7, t + 1), (0, 0.6, t + 2)]
    assert ours[0]["reward"] == [(1, 0.1, t + 31), (2, 0.2, t + 32), (0, 0.5, t + 40)]  # step 0 overwritten
    assert ours[0]["acc"] == theirs[0]["acc"] and ours[0]["lr"] == theirs[0]["lr"]
    assert ours[1] == theirs[1]
    # on EchoLab's charts, the points of a key logged without steps are numbered as they came
    stored = MetricPoint.objects.filter(run__mlflow__run_uuid=run_ids[0])
    assert list(stored.filter(key="loss").order_by("step").values_list("step", "value")) == [
        (0, 0.9),
        (1, 0.7),
        (2, 0.6),
    ]
    assert list(stored.filter(key="acc").order_by("step").values_list("step", flat=True)) == [0, 1, 2]
    assert list(stored.filter(key="lr").values_list("step", flat=True)) == [0]
    from django.test import Client

    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/mlflow/runs/{run_ids[0]}/", follow=True).content.decode()
    assert "acc, loss are logged without steps: charted in the order their points arrived" in page


def test_a_first_point_at_step_0_sent_twice_leaves_the_key_stepped_as_mlflow_does(both):
    """The client retries a call whose answer it did not get (a read timeout, a proxy's 502) with the same
    point: MLflow's store keeps it once. EchoLab took the second copy of a key's first point, at step 0, for a
    key logged without steps: its later points at steps 1, 2 were all answered at step 0 (and step 1 overwrote
    the copy numbered 1)."""
    t = 1_765_000_000_000
    histories = []
    for client, experiment_id in both:
        run_id = client.create_run(experiment_id).info.run_id
        client.log_metric(run_id, "loss", 0.9, timestamp=t, step=0)
        client.log_metric(run_id, "loss", 0.9, timestamp=t, step=0)  # the same call again
        for step, loss in ((1, 0.7), (2, 0.6)):
            client.log_metric(run_id, "loss", loss, timestamp=t + step, step=step)
        histories.append([(m.step, m.value, m.timestamp) for m in client.get_metric_history(run_id, "loss")])
    ours, theirs = histories
    assert theirs == [(0, 0.9, t), (1, 0.7, t + 1), (2, 0.6, t + 2)]
    assert ours == theirs


def test_a_point_at_step_0_twice_in_one_batch_leaves_the_key_stepped_as_mlflow_does(both):
    """The client's asynchronous logging (TRL's) gathers calls into one batch: the same point twice there is
    kept once by MLflow's store, as when it comes in two calls."""
    from mlflow.entities import Metric

    t = 1_765_000_000_000
    histories = []
    for client, experiment_id in both:
        run_id = client.create_run(experiment_id).info.run_id
        client.log_batch(run_id, metrics=[Metric("lr", 0.5, t, 0), Metric("lr", 0.5, t, 0)])
        client.log_metric(run_id, "lr", 0.25, timestamp=t + 1, step=1)
        histories.append([(m.step, m.value) for m in client.get_metric_history(run_id, "lr")])
    ours, theirs = histories
    assert theirs == [(0, 0.5), (1, 0.25)]
    assert ours == theirs


def test_a_first_point_of_nan_at_step_0_sent_twice_leaves_the_key_stepped_as_mlflow_does(both):
    """As above for a diverged loss: NaN equals no NaN in Python, so the copy was taken for a second point."""
    import math

    t = 1_765_000_000_000
    histories = []
    for client, experiment_id in both:
        run_id = client.create_run(experiment_id).info.run_id
        client.log_metric(run_id, "loss", math.nan, timestamp=t, step=0)
        client.log_metric(run_id, "loss", math.nan, timestamp=t, step=0)  # the same call again
        client.log_metric(run_id, "loss", 0.7, timestamp=t + 1, step=1)
        history = client.get_metric_history(run_id, "loss")
        histories.append([(m.step, "NaN" if math.isnan(m.value) else m.value) for m in history])
    ours, theirs = histories
    assert theirs == [(0, "NaN"), (1, 0.7)]
    assert ours == theirs


def test_a_run_the_script_does_not_name_is_named_as_mlflow_names_it(both):
    import re

    names = [client.create_run(experiment_id).info.run_name for client, experiment_id in both]
    assert all(re.fullmatch(r"[a-z]+-[a-z]+-\d{1,3}", name) for name in names), names


def test_infinities_sort_and_filter_as_mlflows_store_keeps_them(both):
    """MLflow's SQL store keeps an infinity as the largest finite float: it ties with it, sorted and filtered."""
    answers = []
    for client, experiment_id in both:
        start = int(time.time() * 1000) - 60_000
        for index, (name, value) in enumerate(
            [("inf", math.inf), ("max", 1.7976931348623157e308), ("one", 1.0)]
        ):
            run_id = client.create_run(
                experiment_id, run_name=name, start_time=start + 1000 * index
            ).info.run_id
            client.log_metric(run_id, "x", value, step=0)
        answers.append(
            [
                [r.info.run_name for r in client.search_runs([experiment_id], query, order_by=order)]
                for query, order in [
                    ("", ["metrics.x DESC"]),
                    ("", ["metrics.x ASC"]),
                    ("metrics.x = 1.7976931348623157e308", []),
                ]
            ]
        )
    assert answers[0] == answers[1]
    assert answers[0][0] == ["max", "inf", "one"]  # tied: the newest first


def test_a_param_given_twice_in_one_batch_is_refused_as_mlflow_refuses_it(both):
    """MLflow's store refuses a log_batch that names a param twice, even with one value: EchoLab took it."""
    import mlflow
    from mlflow.entities import Param

    answers = []
    for client, experiment_id in both:
        run_id = client.create_run(experiment_id).info.run_id
        with pytest.raises(mlflow.MlflowException) as refused:
            client.log_batch(run_id, params=[Param("lr", "1e-3"), Param("lr", "1e-3")])
        answers.append((refused.value.error_code, client.get_run(run_id).data.params))
    assert answers[0] == answers[1] == ("INVALID_PARAMETER_VALUE", {})


def test_a_run_name_and_another_mlflow_run_name_tag_are_refused_as_mlflow_refuses_them(both):
    """create_run(run_name="a", tags={"mlflow.runName": "b"}): MLflow's store refuses it; EchoLab took the
    run_name and answered the tag as it."""
    import mlflow

    answers = []
    for client, experiment_id in both:
        with pytest.raises(mlflow.MlflowException) as refused:
            client.create_run(experiment_id, run_name="lr-a", tags={"mlflow.runName": "tagged"})
        same = client.create_run(experiment_id, run_name="lr-b", tags={"mlflow.runName": "lr-b"})
        with pytest.raises(mlflow.MlflowException) as missing:  # the experiment is looked up first
            client.create_run("987654321", run_name="lr-a", tags={"mlflow.runName": "tagged"})
        answers.append(
            (
                refused.value.error_code,
                missing.value.error_code,
                same.info.run_name,
                len(client.search_runs([experiment_id])),
            )
        )
    assert answers[0] == answers[1] == ("INVALID_PARAMETER_VALUE", "RESOURCE_DOES_NOT_EXIST", "lr-b", 1)


def test_a_metric_logged_without_steps_out_of_time_order_reads_back_as_from_mlflow(both):
    """Points at step 0 whose timestamps do not follow their order of arrival (two processes, a retry): MLflow's
    store answers the newest by timestamp (then the largest) for get_run and searches, and the history by
    timestamp, then value. EchoLab answered the last to arrive, and tied timestamps in arrival order."""
    t = 1_765_000_000_000
    answers = []
    for client, experiment_id in both:
        run_id = client.create_run(experiment_id).info.run_id
        for key, value, at in [
            ("loss", 0.5, t + 10),
            ("loss", 0.7, t + 5),
            ("loss", 0.2, t + 5),
            ("acc", 0.2, t + 5),
            ("acc", -3.0, t + 5),
        ]:
            client.log_metric(run_id, key, value, timestamp=at)  # no step
        newest = sorted(
            (m.key, m.value, m.step, m.timestamp) for m in client.get_run(run_id).data._metric_objs
        )
        history = [(m.value, m.timestamp) for m in client.get_metric_history(run_id, "loss")]
        found = len(client.search_runs([experiment_id], "metrics.loss = 0.5 AND metrics.acc = 0.2"))
        answers.append((newest, history, found))
    ours, theirs = answers
    assert theirs == (
        [("acc", 0.2, 0, t + 5), ("loss", 0.5, 0, t + 10)],
        [(0.2, t + 5), (0.7, t + 5), (0.5, t + 10)],
        1,
    )
    assert ours == theirs


def test_a_bad_write_to_a_run_that_is_not_there_is_refused_for_its_field_as_mlflow_refuses_it(both):
    """MLflow's store checks a write's fields before it looks its run (or experiment) up: a bad key sent with
    an id that names none is INVALID_PARAMETER_VALUE there, as for one that is. EchoLab answered
    RESOURCE_DOES_NOT_EXIST."""
    import mlflow
    from mlflow.entities import Metric, Param

    missing = "0" * 32
    answers = []
    for client, _ in both:
        codes = []
        for write in [
            lambda: client.log_metric(missing, "/abs", 1.0, step=1),
            lambda: client.log_param(missing, "bad!key", "1"),
            lambda: client.set_tag(missing, "../up", "x"),
            lambda: client.log_batch(missing, params=[Param("lr", "1"), Param("lr", "2")]),
            lambda: client.log_batch(missing, metrics=[Metric("a//b", 1.0, 1_765_000_000_000, 0)]),
            lambda: client.set_experiment_tag("987654321", "../up", "x"),
            lambda: client.log_metric(missing, "fine", 1.0, step=1),  # a good write: the run is not there
        ]:
            with pytest.raises(mlflow.MlflowException) as refused:
                write()
            codes.append(refused.value.error_code)
        answers.append(codes)
    assert answers[0] == answers[1] == ["INVALID_PARAMETER_VALUE"] * 6 + ["RESOURCE_DOES_NOT_EXIST"]
