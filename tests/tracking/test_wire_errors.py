"""What the mlflow client cannot send but another client can: malformed bodies and fields get MLflow's
error shape naming the field, and nothing is written."""

import gzip
import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from webapp.accounts.models import ApiToken
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint
from webapp.tracking.models import ExternalExperiment, ExternalRun


@pytest.fixture
def api(client, alice):
    token = ApiToken.issue(alice, "raw")[1]

    def call(path, body=None, method="post", **headers):
        headers.setdefault("HTTP_AUTHORIZATION", f"Bearer {token}")
        if method == "get":
            return client.get(path, body or {}, **headers)
        data = body if isinstance(body, (str, bytes)) else json.dumps(body or {})
        return client.post(path, data, content_type="application/json", **headers)

    return call


@pytest.fixture
def run(alice):
    return ExternalRun.start(ExternalExperiment.create(alice, "raw"), "raw", {}, "alice", timezone.now())


def metric(**fields):
    return {"key": "reward", "value": 1.0, "timestamp": 1_700_000_000_000, "step": 1, **fields}


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            metric(value="high"),
            """metrics[1].value: must be a number or "NaN", "Infinity", "-Infinity", got 'high'""",
        ),
        (metric(key=None), "metrics[1].key: is required"),
        (
            metric(key="train/success", value=7.5),
            "metrics[1].value: must be between 0 and 1 (train/success is a fraction), got 7.5; a percentage? "
            "send it divided by 100",
        ),
        (  # renamed to train/success here: bounded under its own name too
            metric(key="success_rate", value=-0.5),
            "metrics[1].value: must be between 0 and 1 (success_rate is a fraction), got -0.5",
        ),
        (metric(key="k" * 251), "metrics[1].key: is 251 characters; the limit is 250"),
        (metric(step="three"), "metrics[1].step: must be an integer, got 'three'"),
        (metric(step=2.5), "metrics[1].step: must be an integer, got '2.5'"),
        (metric(timestamp=-5), "metrics[1].timestamp: must be at least 0, got -5"),
        (
            metric(step="9" * 5000),  # never parsed whole (Python refuses 4,300 digits with its own words)
            "metrics[1].step: must be between -9223372036854775808 and 9223372036854775807, "
            "got 99999999999999999999… (5000 digits)",
        ),
        (
            metric(timestamp="1" * 20),
            "metrics[1].timestamp: must be between 0 and 9223372036854775807, got 11111111111111111111",
        ),
        ("reward", "metrics[1]: must be an object"),
    ],
)
def test_a_bad_metric_in_a_batch_is_named_and_nothing_is_written(api, run, bad, message):
    answer = api("/api/2.0/mlflow/runs/log-batch", {"run_id": run.run_uuid, "metrics": [metric(), bad]})
    assert answer.status_code == 400
    assert answer.json() == {"error_code": "INVALID_PARAMETER_VALUE", "message": message}
    assert not MetricPoint.objects.filter(run_id=run.pk).exists()


def test_integers_written_as_floats_are_taken_as_protobufs_json_takes_them(api, run):
    answer = api(
        "/api/2.0/mlflow/runs/log-batch",
        {"run_id": run.run_uuid, "metrics": [metric(step=2.0, timestamp=1.7e12)]},
    )
    assert answer.status_code == 200, answer.content
    assert list(MetricPoint.objects.filter(run_id=run.pk).values_list("step", "logged_at")) == [
        (2, 1_700_000_000_000)
    ]


def test_more_than_a_thousand_metrics_is_refused(api, run):
    answer = api(
        "/api/2.0/mlflow/runs/log-batch",
        {"run_id": run.run_uuid, "metrics": [metric(step=step) for step in range(1001)]},
    )
    assert answer.json()["message"] == "metrics: 1001 entries in one request; the limit is 1000"


def test_protocol_errors_have_mlflows_shape(api, run):
    no_token = api("/api/2.0/mlflow/runs/get", {"run_id": run.run_uuid}, method="get", HTTP_AUTHORIZATION="")
    assert (no_token.status_code, no_token.json()["error_code"]) == (401, "UNAUTHENTICATED")
    not_json = api("/api/2.0/mlflow/runs/log-batch", "{oops")
    assert (not_json.status_code, not_json.json()["error_code"]) == (400, "BAD_REQUEST")
    wrong_method = api("/api/2.0/mlflow/runs/log-batch", method="get")
    assert (wrong_method.status_code, wrong_method.json()["error_code"]) == (405, "ENDPOINT_NOT_FOUND")
    assert wrong_method["Allow"] == "POST, OPTIONS"
    unknown = api("/api/2.0/mlflow/model-versions/create", {})
    assert (unknown.status_code, unknown.json()["error_code"]) == (404, "ENDPOINT_NOT_FOUND")
    assert unknown.json()["message"].startswith("POST /api/2.0/mlflow/model-versions/create is not supported")
    bad_status = api("/api/2.0/mlflow/runs/update", {"run_id": run.run_uuid, "status": "DONE"})
    assert bad_status.json() == {
        "error_code": "INVALID_PARAMETER_VALUE",
        "message": "status: must be one of RUNNING, SCHEDULED, FINISHED, FAILED, KILLED, got 'DONE'",
    }


def test_options_and_head_answer_as_on_every_api_url(api, client, run):
    options = client.options("/api/2.0/mlflow/runs/log-batch")  # no token: a preflight
    assert (options.status_code, options["Allow"]) == (204, "POST, OPTIONS")
    assert client.options("/api/2.0/mlflow/runs/get")["Allow"] == "GET, HEAD, OPTIONS"
    get = api("/api/2.0/mlflow/runs/get", {"run_id": run.run_uuid}, method="get")
    head = client.head(
        "/api/2.0/mlflow/runs/get",
        {"run_id": run.run_uuid},
        HTTP_AUTHORIZATION=get.request["HTTP_AUTHORIZATION"],
    )
    assert head.status_code == 200 and head.content == b""
    assert head["Content-Length"] == str(len(get.content))


def test_the_ajax_api_spelling_answers_too(api, run):
    answer = api("/ajax-api/2.0/mlflow/runs/get", {"run_id": run.run_uuid}, method="get")
    assert answer.status_code == 200 and answer.json()["run"]["info"]["run_name"] == "raw"


@pytest.mark.parametrize(
    "size, message",
    [(5 * 1024 * 1024, "the limit is 4194304"), (17 * 1024 * 1024, "larger than the server's limit")],
)
def test_an_oversized_body_is_refused_in_mlflows_shape(api, run, size, message):
    body = json.dumps({"run_id": run.run_uuid, "pad": "x" * size})
    answer = api("/api/2.0/mlflow/runs/log-batch", body)
    assert answer.status_code == 400 and answer.json()["error_code"] == "BAD_REQUEST"
    assert message in answer.json()["message"]


def test_stop_is_refused_for_a_run_trained_elsewhere(api, client, alice, run):
    # Only the MLflow client that trains it can end it; "stop requested" would be a promise nobody keeps.
    answer = api(f"/api/runs/{run.run_id}/stop")
    assert answer.status_code == 409 and "trained elsewhere" in answer.json()["error"]
    client.force_login(alice)
    page = client.post(f"/runs/{run.run_id}/stop", follow=True).content.decode()
    assert "EchoLab cannot stop it" in page
    stored = Run.objects.get(pk=run.run_id)
    assert stored.status == Run.Status.RUNNING and not stored.stop_requested

    # Once its script has ended it there is nothing to stop: the run as it is, not "cannot stop it".
    Run.objects.filter(pk=run.run_id).update(status=Run.Status.COMPLETED)
    answer = api(f"/api/runs/{run.run_id}/stop")
    assert answer.status_code == 200 and answer.json()["status"] == "completed"
    assert not Run.objects.get(pk=run.run_id).stop_requested


def test_a_gzip_body_is_read_and_another_encoding_is_a_bad_request(api, run):
    body = gzip.compress(json.dumps({"run_id": run.run_uuid, "metrics": [metric()]}).encode())
    answer = api("/api/2.0/mlflow/runs/log-batch", body, HTTP_CONTENT_ENCODING="gzip")
    assert answer.status_code == 200
    assert list(MetricPoint.objects.filter(run_id=run.pk).values_list("step", "value")) == [(1, 1.0)]
    answer = api("/api/2.0/mlflow/runs/log-batch", body, HTTP_CONTENT_ENCODING="br")
    assert answer.json() == {
        "error_code": "BAD_REQUEST",
        "message": "Content-Encoding: 'br' is not supported; send the body as it is or gzip-compressed",
    }


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"step": -1}, "step: must be between 0 and 2147483647, got -1"),
        ({"key": "k" * 260}, "key: is 260 characters; the limit is 250"),
    ],
)
def test_log_metric_names_its_own_fields_not_a_batchs(api, run, fields, message):
    answer = api("/api/2.0/mlflow/runs/log-metric", {"run_id": run.run_uuid, **metric(**fields)})
    assert answer.json() == {"error_code": "INVALID_PARAMETER_VALUE", "message": message}


def test_search_filters_are_read_clause_by_clause(api, run):
    from webapp.tracking.protocol import MlflowError
    from webapp.tracking.search import ID, NAME, NUMBER, TEXT, parse_filter

    names = {"run_name": NAME, "run_id": ID, "tags.": TEXT, "metrics.": NUMBER}
    assert parse_filter("run_name = 'salt and pepper' AND tags.note != \"it's\"", names) == [
        ("run_name", "=", "salt and pepper"),
        ("tags.note", "!=", "it's"),
    ]
    assert parse_filter(
        "metrics.`eval/reward`>=-1.5e-3 and run_id in ('a1', \"b2\") AND tags.x is not null", names
    ) == [
        ("metrics.eval/reward", ">=", -0.0015),
        ("run_id", "IN", ("a1", "b2")),
        ("tags.x", "IS NOT NULL", None),
    ]
    for nameless in ("params = 'x'", "tags != 'y'", "tags. = 'x'"):  # an entity without a name is no field
        with pytest.raises(MlflowError, match="is not supported"):
            parse_filter(nameless, names)
    for wrong, says in (
        ("metrics.reward > '0.5'", "metrics.reward is compared with a number, as metrics.reward > 0.5"),
        ("tags.x > 'a'", "tags.x is compared with =, !=, LIKE, ILIKE, IS NULL, IS NOT NULL, not >"),
        ("run_name = 5", "run_name is compared with a quoted value"),
        ("run_id IN 'a1'", "run_id IN takes a list of quoted values"),
        ("run_id IN ('a' 'b')", "is not a list of quoted values"),
        ("run_name IN ('a')", "run_name is compared with =, !=, LIKE, ILIKE, not IN"),
        ("tags.x IS NULL 'y'", "tags.x IS NULL takes no value"),
    ):
        with pytest.raises(MlflowError, match=re.escape(says)):
            parse_filter(wrong, names)
    # OR is not supported: refused, not read as one clause whose value is "conc' OR run_name = 'r1"
    answer = api(
        "/api/2.0/mlflow/runs/search",
        {"experiment_ids": [str(run.run.experiment_id)], "filter": "run_name = 'conc' OR run_name = 'r1'"},
    )
    assert answer.status_code == 400
    assert answer.json()["message"].startswith("filter: \"OR run_name = 'r1'\" is not supported")


def test_an_order_by_entry_it_cannot_sort_by_is_named(api, run):
    answer = api(
        "/api/2.0/mlflow/runs/search",
        {
            "experiment_ids": [str(run.run.experiment_id)],
            "order_by": ["metrics.reward DESC", "lifecycle_stage"],
        },
    )
    assert answer.status_code == 400
    assert answer.json()["message"].startswith(
        "order_by[1]: 'lifecycle_stage' is not supported; EchoLab's MLflow"
    )
    # The datasets a run used filter it (any of them), but sort nothing, as in MLflow
    answer = api(
        "/api/2.0/mlflow/runs/search",
        {"experiment_ids": [str(run.run.experiment_id)], "order_by": ["datasets.name"]},
    )
    assert answer.json()["message"].startswith("order_by[0]: 'datasets.name' is not supported")
    answer = api(
        "/api/2.0/mlflow/runs/search",
        {"experiment_ids": [str(run.run.experiment_id)], "filter": "datasets.source = 's3://x'"},
    )
    assert answer.status_code == 400
    assert answer.json()["message"].startswith("filter: \"datasets.source = 's3://x'\" is not supported")


@pytest.mark.parametrize("token", ["9223372036854775808", "9" * 5000, "1_0", "-1"])
def test_a_page_token_this_server_never_gave_is_refused(api, run, token):
    answer = api("/api/2.0/mlflow/experiments/search", {"page_token": token})
    assert answer.status_code == 400
    assert answer.json()["message"].startswith("page_token: ")
    assert "is not a token this server gave" in answer.json()["message"]


def test_mlflow_metric_keys_follow_the_one_name_rule(api, run):
    answer = api("/api/2.0/mlflow/runs/log-batch", {"run_id": run.run_uuid, "metrics": [metric(key="   ")]})
    assert answer.json() == {
        "error_code": "INVALID_PARAMETER_VALUE",
        "message": "metrics[0].key: must not be empty",
    }
    assert not MetricPoint.objects.filter(run_id=run.pk).exists()


def test_time_errors_name_their_field_and_a_run_cannot_end_before_it_started(api, run):
    answer = api(
        "/api/2.0/mlflow/runs/update", {"run_id": run.run_uuid, "status": "FINISHED", "end_time": 10**30}
    )
    assert answer.json()["message"].startswith("end_time: ")
    year_2000 = 946_684_800_000
    answer = api(
        "/api/2.0/mlflow/runs/update", {"run_id": run.run_uuid, "status": "FINISHED", "end_time": year_2000}
    )
    assert answer.status_code == 400
    assert answer.json()["message"].startswith(f"end_time: {year_2000} is before the run started (")
    answer = api("/api/2.0/mlflow/runs/update", {"run_id": run.run_uuid, "status": "FINISHED", "end_time": 1})
    assert answer.json()["message"] == (
        "end_time: 1 is 1970-01-01 00:00:00 UTC, before 2000: a time in milliseconds since 1970 "
        "(seconds times 1,000) is expected"
    )
    run.run.refresh_from_db()
    assert run.run.status == Run.Status.RUNNING and run.run.finished_at is None
    answer = api("/api/2.0/mlflow/runs/get", {"run_id": ""}, method="get")
    assert answer.json() == {"error_code": "INVALID_PARAMETER_VALUE", "message": "run_id: is required"}


def test_a_start_time_in_seconds_is_refused_not_made_a_run_of_57_years(api, alice):
    experiment = ExternalExperiment.create(alice, "times")
    body = {"experiment_id": experiment.mlflow_id, "start_time": 1_700_000_000}  # seconds, not milliseconds
    answer = api("/api/2.0/mlflow/runs/create", body)
    assert answer.status_code == 400 and answer.json()["message"].startswith(
        "start_time: 1700000000 is 1970-01-20 16:13:20 UTC, before 2000"
    )
    assert not Run.objects.filter(experiment=experiment.experiment).exists()
    answer = api("/api/2.0/mlflow/runs/create", {**body, "start_time": 1_700_000_000_000})
    assert answer.status_code == 200 and answer.json()["run"]["info"]["start_time"] == 1_700_000_000_000


def test_a_start_time_years_ahead_is_refused_and_a_little_ahead_ends_no_earlier(api, alice):
    """A start in 2100 gave a finished run a duration of minus 73 years; a client's clock a minute ahead
    may start a run, which then ends when it ends or when it started, whichever is later."""
    year_2100 = 4_102_444_800_000
    answer = api("/api/2.0/mlflow/runs/create", {"start_time": year_2100})
    assert answer.status_code == 400
    assert answer.json()["message"].startswith(
        "start_time: 4102444800000 is 2100-01-01 00:00:00 UTC, more than a day after this server's clock ("
    )
    ahead = int((timezone.now().timestamp() + 60) * 1000)
    answer = api("/api/2.0/mlflow/runs/create", {"start_time": ahead})
    run_id = answer.json()["run"]["info"]["run_id"]
    api("/api/2.0/mlflow/runs/update", {"run_id": run_id, "status": "FINISHED"})
    run = Run.objects.get(mlflow__run_uuid=run_id)
    assert run.finished_at >= run.started_at


def test_a_refused_run_makes_no_default_experiment(api, alice):
    for body in ({"tags": [{"key": "a"}]}, {"start_time": 5}, {"run_name": "x" * 301}):
        assert api("/api/2.0/mlflow/runs/create", body).status_code == 400, body
    assert not ExternalExperiment.objects.filter(owner=alice).exists()


def test_points_for_an_ended_mlflow_run_on_our_api_say_where_they_go(api, run):
    Run.objects.filter(pk=run.run_id).update(status=Run.Status.FAILED)  # lost: its client went quiet
    body = json.dumps([{"step": 1, "key": "train/success", "value": 0.5}])
    answer = api(f"/api/runs/{run.run_id}/metrics", body)
    assert answer.status_code == 409 and "runs/log-batch" in answer.json()["error"]
    assert "start a new run" not in answer.json()["error"]


@pytest.mark.parametrize("experiment_id", ["abc", "1.0", "²", "٤", "1_0", "0x1"])
def test_an_experiment_id_that_is_not_an_integer_is_refused_as_mlflow_refuses_it(api, run, experiment_id):
    # "²" and "٤" (an Arabic-Indic 4) pass str.isdigit; the database refused the first and read the second as 4.
    message = f"Invalid experiment ID {experiment_id!r}. Experiment ID must be a valid integer."
    for answer in (
        api("/api/2.0/mlflow/experiments/get", {"experiment_id": experiment_id}, method="get"),
        api("/api/2.0/mlflow/runs/create", {"experiment_id": experiment_id}),
        api("/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment_id]}),
    ):
        assert answer.status_code == 400, answer.content
        assert answer.json() == {"error_code": "INVALID_PARAMETER_VALUE", "message": message}
    assert not ExternalExperiment.objects.exclude(pk=run.run.experiment.mlflow.pk).exists()


def test_an_experiment_id_is_read_as_an_integer(api, run):
    written = str(run.run.experiment_id)
    for experiment_id in (f" {written}", f"+{written}", f"000{written}", "0" * 5000 + written):
        answer = api("/api/2.0/mlflow/experiments/get", {"experiment_id": experiment_id}, method="get")
        assert answer.json()["experiment"]["experiment_id"] == written
    default = api("/api/2.0/mlflow/experiments/get", {"experiment_id": "-0"}, method="get")
    assert default.json()["experiment"]["name"] == "Default"


@pytest.mark.parametrize("experiment_id", ["-1", "9223372036854775808", "99999999999999999999999"])
def test_an_experiment_id_that_is_not_a_database_id_does_not_exist(api, run, experiment_id):
    for answer in (
        api("/api/2.0/mlflow/experiments/get", {"experiment_id": experiment_id}, method="get"),
        api("/api/2.0/mlflow/runs/create", {"experiment_id": experiment_id}),
    ):
        assert answer.status_code == 404, answer.content
        assert answer.json() == {
            "error_code": "RESOURCE_DOES_NOT_EXIST",
            "message": f"no experiment with id {experiment_id!r}",
        }
    # a search finds no runs in it, as MLflow's server answers
    answer = api("/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment_id]})
    assert answer.status_code == 200 and answer.json() == {"runs": []}


def test_a_search_reads_experiment_ids_as_mlflows_server_does(api, run, bob):
    # An id of no experiment of the user's (none at all, or another user's) finds nothing; the others
    # still find their runs. A bare string is refused (MLflow: "Value was of type 'str'").
    other = ExternalExperiment.create(bob, "bob's")
    ExternalRun.start(other, "bob's run", {}, "bob", timezone.now())
    ids = [str(run.run.experiment_id), "999999", str(other.experiment_id)]
    answer = api("/api/2.0/mlflow/runs/search", {"experiment_ids": ids})
    assert answer.status_code == 200
    assert [found["info"]["run_id"] for found in answer.json()["runs"]] == [run.run_uuid]
    assert api("/api/2.0/mlflow/runs/search", {"experiment_ids": ids[1:]}).json() == {"runs": []}
    answer = api("/api/2.0/mlflow/runs/search", {"experiment_ids": str(run.run.experiment_id)})
    assert answer.status_code == 400
    assert answer.json() == {
        "error_code": "INVALID_PARAMETER_VALUE",
        "message": "experiment_ids: must be a list of strings, got a string",
    }


def test_leading_zeros_do_not_make_an_integer_too_long(api, run):
    answer = api("/api/2.0/mlflow/runs/log-metric", {"run_id": run.run_uuid, **metric(step="0" * 25 + "5")})
    assert answer.status_code == 200, answer.content
    assert list(MetricPoint.objects.filter(run_id=run.pk).values_list("step", flat=True)) == [5]


@pytest.mark.parametrize(
    "path, body, where",
    [
        ("runs/log-parameter", {"key": "lr"}, "value"),
        ("runs/log-parameter", {"key": "lr", "value": None}, "value"),
        ("runs/set-tag", {"key": "stage"}, "value"),
        ("runs/log-batch", {"params": [{"key": "lr", "value": "1"}, {"key": "beta"}]}, "params[1].value"),
        ("runs/log-batch", {"tags": [{"key": "stage", "value": None}]}, "tags[0].value"),
    ],
)
def test_a_param_or_tag_without_its_value_is_refused_not_stored_empty(api, run, path, body, where):
    # Stored as "", a param could never be given its real value (params cannot change)
    answer = api(f"/api/2.0/mlflow/{path}", {"run_id": run.run_uuid, **body})
    assert answer.json() == {
        "error_code": "INVALID_PARAMETER_VALUE",
        "message": f'{where}: is required (an empty value is written "")',
    }
    assert Run.objects.get(pk=run.run_id).config == {}
    assert (
        api("/api/2.0/mlflow/runs/log-parameter", {"run_id": run.run_uuid, "key": "lr", "value": ""}).json()
        == {}
    )


def test_a_like_pattern_of_many_wildcards_is_matched_in_linear_time(api, run):
    """'%%%%%%%%%%%%x' as one regular expression backtracked without end: a fuzzer's search held a web
    worker until gunicorn killed it. (This test would hang, not fail, on that code: pytest-timeout ends it.)"""
    import random
    import re

    from webapp.tracking.search import like

    random.seed(7)
    for _ in range(20_000):  # the same answers as the regular expression, on cases small enough for it
        pattern = "".join(random.choice("ab%_") for _ in range(random.randint(0, 7)))
        text = "".join(random.choice("abAB") for _ in range(random.randint(0, 8)))
        regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
        assert like(pattern, text, ignore_case=True) == bool(re.fullmatch(regex, text, re.I | re.S)), (
            pattern,
            text,
        )
    assert not like("%" * 40 + "x", "https://echolab.example/runs/12/" * 250)
    answer = api(
        "/api/2.0/mlflow/runs/search",
        {
            "experiment_ids": [str(run.run.experiment_id)],
            "filter": "tags.`echolab.run_url` LIKE '" + "%" * 40 + "x'",
        },
    )
    assert answer.status_code == 200 and answer.json() == {"runs": []}


def test_a_refused_search_makes_no_default_experiment_and_ids_are_looked_up_once(api, alice):
    answer = api("/api/2.0/mlflow/runs/search", {"experiment_ids": ["0"], "filter": "bogus"})
    assert answer.status_code == 400
    assert not ExternalExperiment.objects.filter(owner=alice, name="Default").exists()
    experiment = ExternalExperiment.create(alice, "ids")
    many = {"experiment_ids": [int(experiment.mlflow_id)] * 5000}  # an integer is read as its digits
    assert api("/api/2.0/mlflow/runs/search", many).json() == {"runs": []}
    too_many = {"experiment_ids": [str(n) for n in range(1001)]}
    assert api("/api/2.0/mlflow/runs/search", too_many).json() == {
        "error_code": "INVALID_PARAMETER_VALUE",
        "message": "experiment_ids: names 1,001 experiments; at most 1,000 a search",
    }
    assert api("/api/2.0/mlflow/runs/search", {"experiment_ids": ["1", 2.5]}).json()["message"] == (
        "experiment_ids[1]: must be a string, got a number"
    )


def test_a_deleted_run_takes_no_writes_until_restored(api, run):
    api("/api/2.0/mlflow/runs/delete", {"run_id": run.run_uuid})
    for path, body in (
        ("runs/log-metric", metric()),
        ("runs/log-batch", {"params": [{"key": "x", "value": "1"}]}),
        ("runs/set-tag", {"key": "k", "value": "v"}),
        ("runs/update", {"status": "FINISHED"}),
    ):
        answer = api(f"/api/2.0/mlflow/{path}", {"run_id": run.run_uuid, **body})
        assert answer.json() == {
            "error_code": "INVALID_PARAMETER_VALUE",
            "message": f"The run {run.run_uuid} must be in the 'active' state. Current state is deleted.",
        }, path
    assert not MetricPoint.objects.filter(run_id=run.pk).exists()
    api("/api/2.0/mlflow/runs/restore", {"run_id": run.run_uuid})
    assert api("/api/2.0/mlflow/runs/log-metric", {"run_id": run.run_uuid, **metric()}).status_code == 200


DATASET = {"name": "train", "digest": "abc", "source_type": "local", "source": '{"uri": "/d"}'}


@pytest.mark.parametrize(
    "datasets, extra, message",
    [
        ([{"tags": []}], {}, "datasets[0].dataset: is required"),
        ([{"dataset": "train"}], {}, "datasets[0].dataset: must be an object, got a string"),
        ([{"dataset": {**DATASET, "name": None}}], {}, "datasets[0].dataset.name: is required"),
        ([{"dataset": {**DATASET, "digest": "d" * 37}}], {}, "datasets[0].dataset.digest: "),
        (
            [{"dataset": DATASET, "tags": [{"key": "mlflow.data.context"}]}],
            {},
            "datasets[0].tags[0].value: is required",
        ),
        (
            [{"dataset": DATASET}],
            {"models": [{"model_id": "m-1"}]},
            "models: MLflow 3's logged models are not kept",
        ),
        ("train", {}, "datasets: must be a list"),
    ],
)
def test_a_bad_dataset_input_is_named_and_nothing_is_kept(api, run, datasets, extra, message):
    good = {"dataset": {**DATASET, "name": "kept?"}}
    body = {
        "run_id": run.run_uuid,
        "datasets": [good, *datasets] if isinstance(datasets, list) else datasets,
        **extra,
    }
    response = api("/api/2.0/mlflow/runs/log-inputs", body)
    expected = message.replace("datasets[0]", "datasets[1]") if isinstance(datasets, list) else message
    assert response.status_code == 400 and response.json()["message"].startswith(expected)
    run.refresh_from_db()
    assert run.inputs == [] and run.refused_writes == 1


def test_a_run_keeps_a_bounded_record_of_its_datasets(api, run, monkeypatch):
    from webapp.tracking import protocol

    monkeypatch.setattr(protocol, "MAX_DATASETS_PER_RUN", 2)
    datasets = [{"dataset": {**DATASET, "name": f"d{index}"}} for index in range(2)]
    assert (
        api("/api/2.0/mlflow/runs/log-inputs", {"run_id": run.run_uuid, "datasets": datasets}).status_code
        == 200
    )
    again = api("/api/2.0/mlflow/runs/log-inputs", {"run_id": run.run_uuid, "datasets": datasets[:1]})
    assert again.status_code == 200  # the same dataset again adds nothing
    third = api(
        "/api/2.0/mlflow/runs/log-inputs", {"run_id": run.run_uuid, "datasets": [{"dataset": DATASET}]}
    )
    assert third.status_code == 400
    assert third.json()["message"].startswith("datasets: the run would keep 3 datasets in ")
    run.refresh_from_db()
    assert [each["dataset"]["name"] for each in run.inputs] == ["d0", "d1"]


@pytest.mark.parametrize(
    "location, says",
    [
        ("s3://[bucket/x", "not a URI (Invalid IPv6 URL)"),  # was a 500
        ("http://[abc]/x", "not a URI"),
        ("   ", "blank, or holds control or format characters"),
        ("\u202es3://b", "blank, or holds control or format characters"),
        ("s3://b/x\x01", "blank, or holds control or format characters"),
        ("runs:/0123/model", "a location cannot be a runs:/ URI"),
        ("mlflow-artifacts:/elsewhere", "mlflow-artifacts: is where EchoLab keeps the files"),
        ("s3://b/x?versionId=1", "a location has no fragment, params or query"),
    ],
)
def test_an_artifact_location_mlflow_would_refuse_is_refused_naming_it(api, alice, location, says):
    answer = api("/api/2.0/mlflow/experiments/create", {"name": "bucketed", "artifact_location": location})
    assert answer.status_code == 400
    assert answer.json()["message"].startswith("artifact_location: ") and says in answer.json()["message"]
    assert not ExternalExperiment.objects.filter(owner=alice).exists()


def test_a_search_is_bounded_and_checked_before_it_makes_anything(api, alice):
    answer = api("/api/2.0/mlflow/runs/search", {"experiment_ids": ["0"], "max_results": 0})
    assert answer.status_code == 400 and answer.json()["message"].startswith("max_results: ")
    assert not ExternalExperiment.objects.filter(owner=alice).exists()  # no Default experiment made
    many = " AND ".join(f"tags.k{i} IS NULL" for i in range(101))
    answer = api("/api/2.0/mlflow/runs/search", {"experiment_ids": ["0"], "filter": many})
    assert answer.json()["message"] == "filter: has more than 100 clauses; at most 100 a search"
    answer = api("/api/2.0/mlflow/runs/search", {"experiment_ids": ["0"], "order_by": ["run_name"] * 101})
    assert answer.json()["message"] == "order_by: has 101 entries; at most 100 a search"


def test_a_null_sent_to_echolabs_api_searches_as_the_nan_runs_get_answers(api, run):
    from webapp.metrics import ingest

    ingest.write(run.pk, [(0, "x", None)])  # POST /api/runs/<id>/metrics's null
    experiment = [str(run.run.experiment.mlflow.mlflow_id)]
    got = api("/api/2.0/mlflow/runs/get", {"run_id": run.run_uuid}, method="get").json()
    assert got["run"]["data"]["metrics"][0]["value"] == "NaN"
    found = api("/api/2.0/mlflow/runs/search", {"experiment_ids": experiment, "filter": "metrics.x != 5"})
    assert [r["info"]["run_id"] for r in found.json()["runs"]] == [
        run.run_uuid
    ]  # NaN passes !=, as in MLflow


def test_the_history_of_a_run_that_is_not_there_is_empty_as_mlflow_answers(api, run, bob):
    others = ExternalRun.start(
        ExternalExperiment.create(bob, "bob's"), "bob's run", {}, "bob", timezone.now()
    )
    ExternalRun.objects.get(pk=others.pk).log([("loss", 1.0, 1, None)], {}, {})
    for run_id in ("0" * 32, others.run_uuid):  # none at all, and another user's
        answer = api(
            "/api/2.0/mlflow/metrics/get-history", {"run_id": run_id, "metric_key": "loss"}, method="get"
        )
        assert (answer.status_code, answer.json()) == (200, {"metrics": []})
    paged = {"run_id": "0" * 32, "metric_key": "loss", "max_results": -1}
    answer = api("/api/2.0/mlflow/metrics/get-history", paged, method="get")
    assert (answer.status_code, answer.json()["error_code"]) == (400, "INVALID_PARAMETER_VALUE")


def test_a_batch_past_the_runs_key_limit_is_refused_in_mlflows_words(api, run, monkeypatch):
    from webapp.metrics import ingest

    monkeypatch.setattr(ingest, "MAX_KEYS_PER_RUN", 2)
    keys = [metric(key=f"loss_{step}", step=step) for step in range(3)]
    answer = api(
        "/api/2.0/mlflow/runs/log-batch",
        {"run_id": run.run_uuid, "metrics": keys, "params": [{"key": "lr", "value": "0.1"}]},
    )
    assert answer.status_code == 400
    assert answer.json() == {
        "error_code": "INVALID_PARAMETER_VALUE",
        "message": "metrics: would add 3 new keys ('loss_0', ...) to the 0 this run has logged; a run logs at "
        "most 2 distinct keys: keep counters and ids out of key names, or log to another run",
    }
    assert not MetricPoint.objects.filter(run_id=run.pk).exists()
    assert "lr" not in Run.objects.get(pk=run.pk).config  # all or nothing


def test_log_metric_past_the_runs_key_limit_names_its_key_field(api, run, monkeypatch):
    """log-metric has no `metrics` field: its refusal named one (the batch's word), not the request's `key`."""
    from webapp.metrics import ingest

    monkeypatch.setattr(ingest, "MAX_KEYS_PER_RUN", 1)
    assert api("/api/2.0/mlflow/runs/log-metric", {"run_id": run.run_uuid, **metric()}).status_code == 200
    answer = api("/api/2.0/mlflow/runs/log-metric", {"run_id": run.run_uuid, **metric(key="loss")})
    assert answer.status_code == 400
    assert answer.json()["message"].startswith("key: would add 1 new key ('loss")


def test_points_for_a_lost_mlflow_run_on_our_api_make_it_run_again(api, run, settings):
    """A lost run said "its next logging call resumes it", but EchoLab's own metrics API refused it (409)."""
    from worker.sweeper import sweep_runs

    settings.MLFLOW_LOST_AFTER = 60
    Run.objects.filter(pk=run.run_id).update(
        status=Run.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(minutes=2)
    )
    assert sweep_runs()["lost"] == 1
    body = json.dumps([{"step": 1, "key": "train/success", "value": 0.5}])
    answer = api(f"/api/runs/{run.run_id}/metrics", body)
    assert answer.status_code == 200, answer.content
    assert answer.json()["written"] == 1 and answer.json()["run"]["status"] == "running"
    back = Run.objects.get(pk=run.run_id)
    assert back.status == Run.Status.RUNNING and back.error == "" and back.finished_at is None
    assert back.latest_metrics == {"train/success": 0.5}


def test_a_lost_runs_batch_refused_on_our_api_leaves_it_lost(api, run, settings, monkeypatch):
    """Resumed apart from the write, a batch refused even so (past the key limit) left the run running, to be
    found lost, and emailed, again."""
    from webapp.metrics import ingest
    from worker.sweeper import sweep_runs

    monkeypatch.setattr(ingest, "MAX_KEYS_PER_RUN", 1)
    settings.MLFLOW_LOST_AFTER = 60
    Run.objects.filter(pk=run.run_id).update(
        status=Run.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(minutes=2)
    )
    assert sweep_runs()["lost"] == 1
    body = json.dumps([{"step": 1, "key": "a", "value": 0.5}, {"step": 1, "key": "b", "value": 0.5}])
    answer = api(f"/api/runs/{run.run_id}/metrics", body)
    assert answer.status_code == 400 and "at most 1 distinct keys" in answer.json()["errors"]["points"]
    lost = Run.objects.get(pk=run.run_id)
    assert lost.status == Run.Status.FAILED and lost.error.startswith("lost: ")
    assert ExternalRun.objects.get(pk=run.run_id).lost_at is not None
