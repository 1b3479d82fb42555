"""The MLflow tracking REST API (the part training scripts use), over ExternalExperiment and ExternalRun.
Authentication is an EchoLab API token, which the client sends as `Authorization: Bearer` when
MLFLOW_TRACKING_TOKEN is set. docs/MLFLOW.md lists what is supported and how each call is stored."""

import functools

from django.contrib.auth.decorators import login_required
from django.db.models import F
from django.http import Http404
from django.http.response import HttpResponseBase
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from webapp.accounts.api_auth import (
    WWW_AUTHENTICATE,
    ApiError,
    allowed_methods,
    bearer_token,
    json_body,
    options_answer,
    without_body,
)
from webapp.accounts.models import ApiToken
from webapp.core import chunked_bodies
from webapp.core.json_response import JsonResponse
from webapp.metrics.models import MetricPoint
from webapp.tracking import protocol, search
from webapp.tracking.artifacts import Artifact, safe_parts
from webapp.tracking.models import (
    DEFAULT_EXPERIMENT_ID,
    DEFAULT_EXPERIMENT_NAME,
    RUN_NAME_TAG,
    ExternalExperiment,
    ExternalRun,
    from_millis,
)
from webapp.tracking.protocol import Fields, MlflowError, invalid

MAX_BODY_BYTES = 4 * 1024 * 1024
# A search's experiments, each looked up: 60,000 ids in one body held a thread for 38 s.
MAX_SEARCHED_EXPERIMENTS = 1000


def mlflow_view(*methods: str, reads_fields: bool = True):
    """Token authentication, the request's fields, and every refusal in MLflow's error shape. OPTIONS and
    HEAD (where GET is taken) as on every other API URL (webapp.accounts.api_auth.api_view). A view that
    reads the request itself (`reads_fields=False`, an artifact's upload) gets no fields; a view answers a
    dict (sent as JSON) or a response of its own."""
    allowed = allowed_methods(methods)

    def decorate(view):
        @csrf_exempt
        @functools.wraps(view)
        def wrapped(request, **kwargs):
            if request.method == "OPTIONS":
                return options_answer(allowed)
            head = request.method == "HEAD" and "GET" in methods
            try:
                if request.method not in methods and not head:
                    raise MlflowError(
                        "ENDPOINT_NOT_FOUND",
                        f"{request.path} takes {' or '.join(methods)}, not {request.method[:20]}",
                        status=405,  # as MLflow's server answers (and every other API URL here)
                    )
                if head:
                    request.method = "GET"  # the view sees the GET it answers
                request.user = _user(request)
                if reads_fields:
                    kwargs["fields"] = _fields(request)
                response = view(request, **kwargs)
                if not isinstance(response, HttpResponseBase):
                    response = JsonResponse(response)
            except MlflowError as error:
                response = JsonResponse(error.as_json(), status=error.status)
                if error.status == 401:
                    response["WWW-Authenticate"] = WWW_AUTHENTICATE
                if error.status == 405:
                    response["Allow"] = ", ".join(allowed)
            return without_body(response) if head else response

        return wrapped

    return decorate


def _user(request):
    token = bearer_token(request)
    if token is None:
        raise MlflowError(
            "UNAUTHENTICATED",
            "authentication required: set MLFLOW_TRACKING_TOKEN to an "
            "EchoLab API token (sent as 'Authorization: Bearer <token>')",
        )
    user = ApiToken.authenticate(token)
    if user is None:
        raise MlflowError("UNAUTHENTICATED", "invalid API token: it was revoked or never issued")
    return user


def _fields(request) -> Fields:
    if request.method == "GET":
        return Fields({key: values if len(values) > 1 else values[0] for key, values in request.GET.lists()})
    try:
        body = json_body(request, max_bytes=MAX_BODY_BYTES)
    except ApiError as error:  # a field inside (text that is not Unicode) is a bad value, not a bad request
        bad_request = not error.errors or {"body", "Content-Encoding"} & set(error.errors)
        raise MlflowError(
            "BAD_REQUEST" if bad_request else "INVALID_PARAMETER_VALUE", error.message
        ) from None
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise MlflowError("BAD_REQUEST", "request body must be a JSON object")
    return Fields(body)


@csrf_exempt
def unsupported(request, path: str):
    """Everything else under the MLflow prefixes: MLflow's answer for an unknown endpoint."""
    from webapp.tracking.urls import ENDPOINTS  # which imports this module

    message = (
        f"{request.method} {request.path} is not supported by EchoLab's MLflow endpoint; it supports "
        f"{', '.join(ENDPOINTS)}, and artifacts (mlflow-artifacts/artifacts: upload, download, list, delete)"
    )
    if path.endswith("mlflow/experiments/delete"):  # MLflow's is undone by a restore; EchoLab's is not
        message = (
            "EchoLab deletes an experiment, with its runs and their data, only on the experiment's page (it "
            "cannot be undone, unlike MLflow's delete); runs/delete archives a run. " + message
        )
    elif path.endswith("mlflow/logged-models"):  # logged-models/create: what every log_model starts with
        message = (
            "EchoLab keeps no logged models (mlflow.<flavor>.log_model; transformers' MLflowCallback logs each "
            "checkpoint so when HF_MLFLOW_LOG_ARTIFACTS is set, and this refusal ends the training at its first "
            "save): unset HF_MLFLOW_LOG_ARTIFACTS and log the files with mlflow.log_artifacts instead. "
            + message
        )
    return JsonResponse({"error_code": "ENDPOINT_NOT_FOUND", "message": message}, status=404)


# Artifacts (MLflow's artifact proxy: the client's HttpArtifactRepository).


@mlflow_view("GET", "PUT", "DELETE", reads_fields=False)
def artifacts(request, path: str | None = None):
    """GET without a path lists the folder named by `?path=`; with one, downloads that file. PUT stores the
    request's body as the file; DELETE removes the file or folder."""
    if path is None:
        if request.method != "GET":
            raise MlflowError("ENDPOINT_NOT_FOUND", f"{request.method} needs the artifact's path in the URL")
        listed = Artifact.at(request.user, _fields(request).string("path")).listing()
        return {"files": listed} if listed else {}  # MLflow's answer leaves an empty list out
    if request.method == "GET":
        return Artifact.at(request.user, path).response()
    artifact = Artifact.at(request.user, path, for_writing=True)
    if request.method == "DELETE":
        artifact.delete()
    else:
        artifact.save(*_upload(request))
    return {}


def _upload(request) -> tuple:
    """The upload's body and its length from Content-Length; or, for a chunked body, the server's stream and
    None, where the server took the chunking off (gunicorn: `wsgi.input_terminated`). A chunked body is
    read only here, after the token is checked (webapp.core.chunked_bodies leaves it)."""
    raw = request.META.get("CONTENT_LENGTH", "")
    if raw.isascii() and raw.isdigit():  # "²" is a digit to isdigit()
        return request, int(raw)
    if chunked_bodies.is_chunked(request.META) and request.META.get("wsgi.input_terminated"):
        return request.META["wsgi.input"], None
    raise MlflowError(
        "BAD_REQUEST",
        "an artifact upload needs its size: a Content-Length header, or a chunked body sent to EchoLab's own "
        f"server (gunicorn, as ./echolab run serves); got Content-Length {raw[:40]!r}",
    )


# Experiments.


def _experiment_name(fields: Fields, field: str) -> str:
    """Kept as written, spaces around it included, as MLflow keeps it: set_experiment looks it up by name."""
    name = fields.string(field, max_length=protocol.MAX_EXPERIMENT_NAME_LENGTH)
    if not name.strip():
        raise invalid(field, "must not be blank")
    return name


@mlflow_view("POST")
def create_experiment(request, fields):
    name = _experiment_name(fields, "name")
    tags = dict(
        protocol.key_value(tag, protocol.MAX_EXPERIMENT_TAG_VALUE_LENGTH)
        for tag in fields.items("tags", protocol.MAX_PARAMS_TAGS_PER_BATCH)
    )
    location = protocol.artifact_location(fields)
    return {"experiment_id": ExternalExperiment.create(request.user, name, tags, location).mlflow_id}


@mlflow_view("GET")
def get_experiment(request, fields):
    experiment = ExternalExperiment.get_for(request.user, fields.string("experiment_id"))
    return {"experiment": experiment.to_mlflow()}


@mlflow_view("GET")
def get_experiment_by_name(request, fields):
    name = fields.string("experiment_name")
    found = (
        ExternalExperiment.objects.for_user(request.user)
        .select_related("experiment")
        .filter(name=name)
        .first()
    )
    if found is None:
        raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"no experiment named {name!r}")
    return {"experiment": found.to_mlflow()}


@mlflow_view("POST")
def search_experiments(request, fields):
    view_type = _view_type(fields, "view_type")
    orders = search.parse_order_by(fields.strings("order_by"), EXPERIMENT_SORTS)
    clauses = search.parse_filter(fields.string("filter", required=False), EXPERIMENT_FILTERS)
    found = ExternalExperiment.objects.for_user(request.user).select_related("experiment")
    if view_type == "DELETED_ONLY":  # nothing here is ever deleted
        found = found.none()
    window = protocol.page_window(fields, 1000)
    experiments, token = protocol.page(
        search.found(found.order_by("-experiment_id"), clauses, orders), window
    )
    return {
        "experiments": [experiment.to_mlflow() for experiment in experiments],
        **({"next_page_token": token} if token else {}),
    }


@mlflow_view("POST")
def update_experiment(request, fields):
    """MLflow's rename (the only change experiments/update makes)."""
    name = _experiment_name(fields, "new_name")
    ExternalExperiment.get_for(request.user, fields.string("experiment_id")).rename(name)
    return {}


@mlflow_view("POST")
def set_experiment_tag(request, fields):
    # the tag checked first, as MLflow's store checks it: a bad key is a 400 whatever the experiment id
    key, value = protocol.key_value(fields, protocol.MAX_EXPERIMENT_TAG_VALUE_LENGTH)
    experiment = ExternalExperiment.get_for(request.user, fields.string("experiment_id"))
    experiment.change_tags(key, value)
    return {}


@mlflow_view("POST")
def delete_experiment_tag(request, fields):
    experiment = ExternalExperiment.get_for(request.user, fields.string("experiment_id"))
    experiment.change_tags(fields.string("key", max_length=protocol.MAX_ENTITY_KEY_LENGTH), None)
    return {}


# Runs.


@mlflow_view("POST")
def create_run(request, fields):
    # Every field checked before the experiment is looked up: the Default one is made on first use, and a
    # refused request makes nothing.
    tags = dict(protocol.run_tag(tag) for tag in fields.items("tags", 1000))
    start = from_millis(fields.integer("start_time", low=0), "start_time")
    name = fields.string("run_name", required=False, max_length=300)
    user_id = fields.string("user_id", required=False)
    experiment_id = fields.string("experiment_id", required=False, default="0")
    tagged = tags.get(RUN_NAME_TAG)
    if name and tagged and name != tagged:  # MLflow's store refuses it rather than pick one, once it has
        ExternalExperiment.refuse_missing(request.user, experiment_id)  # found the experiment
        raise invalid("run_name", f"{name!r} differs from the tag {RUN_NAME_TAG} {tagged!r}; give one name")
    experiment = ExternalExperiment.get_for(request.user, experiment_id)
    run = ExternalRun.start(experiment, name, tags, user_id, start or timezone.now())
    return {"run": run.to_mlflow()}


@mlflow_view("GET")
def get_run(request, fields):
    return {"run": ExternalRun.get_for(request.user, protocol.run_id_of(fields)).to_mlflow()}


@mlflow_view("POST")
def update_run(request, fields):
    run = ExternalRun.get_active_for(request.user, protocol.run_id_of(fields))
    status = fields.string("status", required=False)
    if status and status not in protocol.RUN_STATUSES:
        raise invalid("status", f"must be one of {', '.join(protocol.RUN_STATUSES)}, got {status!r}")
    run.update(
        status,
        from_millis(fields.integer("end_time", low=0), "end_time"),
        fields.string("run_name", required=False, max_length=300),
    )
    run.run.refresh_from_db()
    return {"run_info": run.to_mlflow()["info"]}


def _run_to_write(request, fields: Fields, check) -> ExternalRun:
    """The user's active run a write names. Where it names none, `check()` checks the write's fields first,
    as MLflow's store checks them before it looks the run up: a bad key is a 400 whatever the run id (a
    refusal for a run that is there is checked in the write, and counted on the run: refusals_noted)."""
    run_id = protocol.run_id_of(fields)
    found = ExternalRun.find_for(request.user, run_id)
    if found is None:
        check()
        found = ExternalRun.get_for(request.user, run_id)  # refused: no such run
    return ExternalRun.active(found, run_id)


@mlflow_view("POST")
def log_metric(request, fields):
    run = _run_to_write(request, fields, lambda: ExternalRun.check_metrics([_metric(fields)], ""))
    with run.refusals_noted():
        run.log([_metric(fields)], {}, {}, where="")
    return {}


@mlflow_view("POST")
def log_parameter(request, fields):
    run = _run_to_write(request, fields, lambda: _param(fields))
    with run.refusals_noted():
        key, value = _param(fields)
        run.log([], {key: value}, {})
    return {}


@mlflow_view("POST")
def set_tag(request, fields):
    run = _run_to_write(request, fields, lambda: protocol.run_tag(fields))
    with run.refusals_noted():
        key, value = protocol.run_tag(fields)
        run.log([], {}, {key: value})
    return {}


@mlflow_view("POST")
def delete_tag(request, fields):
    run = ExternalRun.get_active_for(request.user, protocol.run_id_of(fields))
    key = fields.string("key", max_length=protocol.MAX_ENTITY_KEY_LENGTH)
    if key.startswith(protocol.ECHOLAB_TAG_PREFIX):
        raise invalid("key", f"{key!r} is one of EchoLab's own read-only tags; it cannot be deleted")
    run.delete_tag(key)
    return {}


@mlflow_view("POST")
def delete_run(request, fields):
    """MLflow's delete is a soft one, undone by restore: EchoLab archives the run (hidden from its lists and
    from searches of active runs; its page, data and events stay)."""
    ExternalRun.get_for(request.user, protocol.run_id_of(fields)).run.archive()
    return {}


@mlflow_view("POST")
def restore_run(request, fields):
    ExternalRun.get_for(request.user, protocol.run_id_of(fields)).run.restore()
    return {}


@mlflow_view("POST")
def log_batch(request, fields):
    fields.string("run_id")  # log-batch takes no run_uuid
    run = _run_to_write(request, fields, lambda: ExternalRun.check_metrics(_batch(fields)[0]))
    with run.refusals_noted():
        run.log(*_batch(fields))
    return {}


def _batch(fields: Fields) -> tuple[list, dict[str, str], dict[str, str]]:
    """A log-batch's (metrics, params, tags), each entry checked."""
    metrics = protocol.well_formed_metrics(fields.data.get("metrics", []))
    if metrics is None:
        metrics = [_metric(metric) for metric in fields.items("metrics", protocol.MAX_METRICS_PER_BATCH)]
    params, tags = {}, {}
    for entry in fields.items("params", protocol.MAX_PARAMS_TAGS_PER_BATCH):
        key, value = _param(entry)
        if key in params:  # even with one value, as MLflow's store refuses it
            raise invalid(f"{entry.where}key", f"param {key!r} is given twice in one batch")
        params[key] = value
    for entry in fields.items("tags", protocol.MAX_PARAMS_TAGS_PER_BATCH):
        key, value = protocol.run_tag(entry)
        tags[key] = value
    return metrics, params, tags


def _param(fields: Fields) -> tuple[str, str]:
    return protocol.key_value(fields, protocol.MAX_PARAM_VALUE_LENGTH, cut=True)


@mlflow_view("POST")
def log_inputs(request, fields):
    run = ExternalRun.get_active_for(request.user, protocol.run_id_of(fields))
    with run.refusals_noted():
        datasets = [
            protocol.dataset_input(entry)
            for entry in fields.items("datasets", protocol.MAX_DATASETS_PER_BATCH)
        ]
        if fields.data.get("models"):
            raise invalid(
                "models", "MLflow 3's logged models are not kept by EchoLab (docs/MLFLOW.md, Artifacts)"
            )
        run.add_inputs(datasets)
    return {}


def _metric(fields: Fields) -> tuple[str, float, int, int]:
    key = fields.string("key", max_length=protocol.MAX_ENTITY_KEY_LENGTH)
    value = fields.number("value")
    timestamp = fields.integer("timestamp", low=0)
    return key, value, fields.integer("step", default=0, low=-(2**63), high=2**63 - 1), timestamp


@mlflow_view("POST")
def search_runs(request, fields):
    # Every field checked before an experiment is looked up: "0" makes the user's Default one.
    view_type = _view_type(fields, "run_view_type")
    orders = search.parse_order_by(fields.strings("order_by"), RUN_SEARCHES)
    clauses = search.parse_filter(fields.string("filter", required=False), RUN_FILTERS)
    window = protocol.page_window(fields, 1000)
    experiment_ids = list(dict.fromkeys(fields.strings("experiment_ids")))  # each looked up once
    if len(experiment_ids) > MAX_SEARCHED_EXPERIMENTS:
        raise invalid(
            "experiment_ids",
            f"names {len(experiment_ids):,} experiments; at most {MAX_SEARCHED_EXPERIMENTS:,} a search",
        )
    # An id that names no experiment of the user's finds no runs, as MLflow's server answers (not an error).
    experiments = [
        ExternalExperiment.find_for(request.user, experiment_id) for experiment_id in experiment_ids
    ]
    found = (
        ExternalRun.objects.for_user(request.user)
        .select_related("run__experiment__mlflow")
        .filter(run__experiment__in=[experiment.experiment_id for experiment in experiments if experiment])
        .order_by("-run__started_at", "run_uuid")  # as MLflow's SQL store breaks ties
    )
    if view_type != "ALL":  # MLflow's deleted runs are EchoLab's archived ones
        found = found.filter(run__archived_at__isnull=view_type == "ACTIVE_ONLY")
    page, token = protocol.page(search.found(found, clauses, orders), window)
    return {"runs": [run.to_mlflow() for run in page], **({"next_page_token": token} if token else {})}


# What runs/search filters and sorts by, and how each is compared (webapp/tracking/search.py).
RUN_SEARCHES = {
    "run_name": search.NAME,
    "status": search.NAME,
    "run_id": search.ID,
    "user_id": search.NAME,
    "start_time": search.NUMBER,
    "end_time": search.NUMBER,
    "artifact_uri": search.NAME,
    "params.": search.TEXT,
    "tags.": search.TEXT,
    "metrics.": search.NUMBER,
}
RUN_FILTERS = {
    **RUN_SEARCHES,
    **dict.fromkeys(
        ("datasets.name", "datasets.digest", "datasets.context"), search.DATASET
    ),  # not sorted by
}
EXPERIMENT_FILTERS = {
    "name": search.NAME,
    "creation_time": search.NUMBER,
    "last_update_time": search.NUMBER,
    "tags.": search.TEXT,
}
EXPERIMENT_SORTS = {**EXPERIMENT_FILTERS, "experiment_id": search.NUMBER}


def _view_type(fields: Fields, name: str) -> str:
    view_type = fields.string(name, required=False, default="ACTIVE_ONLY")
    if view_type not in ("ACTIVE_ONLY", "ALL", "DELETED_ONLY"):
        raise invalid(name, f"must be ACTIVE_ONLY, DELETED_ONLY or ALL, got {view_type[:40]!r}")
    return view_type


@mlflow_view("POST")
def search_logged_models(request, fields):
    """MLflow 3's logged models (mlflow.<flavor>.log_model) are not kept here: none is ever found. The client
    asks before listing or downloading a run's artifacts (a folder may be a model's)."""
    fields.strings("experiment_ids")
    return {"models": []}


@mlflow_view("GET")
def get_metric_history(request, fields):
    run = ExternalRun.find_for(request.user, protocol.run_id_of(fields))
    key = fields.string("metric_key")
    window = protocol.page_window(fields, 25_000)  # checked for a run that is not there too
    if run is None:  # no history, as MLflow's server answers for a run it does not have
        return {"metrics": []}
    stored = run.stored_key(key)
    stepless = stored in run.stepless  # logged without steps: each at step 0 for the client, as in MLflow
    # As MLflow's store orders them, by timestamp, step and value (a point of a run made before timestamps
    # were kept has none: last); a key logged without steps is all at step 0 there, whatever its numbers here.
    order = ("value",) if stepless else ("step", "value")
    points = (
        MetricPoint.objects.filter(run_id=run.pk, key=stored)
        .order_by(F("logged_at").asc(nulls_last=True), *order)
        .values_list("step", "value", "logged_at")
    )
    page, token = protocol.page(points, window)
    heard = protocol.millis(run.run.heartbeat_at)
    return {
        "metrics": [
            protocol.metric(key, value, 0 if stepless else step, at, heard) for step, value, at in page
        ],
        **({"next_page_token": token} if token else {}),
    }


@login_required
@require_safe
def experiment_page(request, experiment_id: int):
    """The page of the user's MLflow experiment with that id (0: their Default one, if made yet)."""
    experiments = ExternalExperiment.objects.for_user(request.user)
    if str(experiment_id) == DEFAULT_EXPERIMENT_ID:
        found = experiments.filter(name=DEFAULT_EXPERIMENT_NAME).first()
    else:
        found = experiments.filter(experiment_id=experiment_id).first()
    if found is None:
        raise Http404("no experiment of yours has that MLflow experiment id")
    return redirect(found.experiment)


@login_required
@require_safe
def run_artifact(request, run_uuid: str, path: str):
    """A file the user's MLflow run logged, as the run page links it (the API's answer, by session)."""
    try:
        run = ExternalRun.get_for(request.user, run_uuid)
        return Artifact.in_run(run, safe_parts(path)).response()
    except MlflowError as error:
        raise Http404(error.message) from None


@login_required
@require_safe
def run_page(request, run_uuid: str):
    """The run page of the user's MLflow run with that id; another user's is a 404 like a missing one."""
    found = ExternalRun.objects.for_user(request.user).filter(run_uuid=run_uuid).select_related("run").first()
    if found is None:
        raise Http404("no run of yours has that MLflow run id")
    return redirect(found.run)
