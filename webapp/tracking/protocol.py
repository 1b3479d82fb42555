"""The MLflow REST API's wire format, as the `mlflow` client (mlflow/store/tracking/rest_store.py) speaks
it: errors as {"error_code", "message"} with MLflow's HTTP status for the code, request fields read and
checked one by one (every problem names its field), and experiments and runs written as MLflow's JSON.

Limits are MLflow's own (mlflow/utils/validation.py), so a script that works against an MLflow server
is not refused here for sizes MLflow allows (EchoLab stores metric keys of MLflow's 250 characters,
ingest.MAX_KEY_LENGTH); an experiment's name is EchoLab's.
"""

import math
import posixpath
import re
import unicodedata
import urllib.parse

from diagnostics.quoting import quoted
from webapp.core.jsonsafe import INT64_MAX, json_type

# MLflow's limits.
MAX_ENTITY_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
MAX_EXPERIMENT_TAG_VALUE_LENGTH = 20000
MAX_EXPERIMENT_NAME_LENGTH = 200  # EchoLab's Experiment.name; MLflow allows 500
MAX_ARTIFACT_LOCATION_LENGTH = 2048  # MLflow's default MLFLOW_ARTIFACT_LOCATION_MAX_LENGTH
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_RESULTS = 50_000

# error_code -> HTTP status, as MLflow's server answers (mlflow/exceptions.py).
STATUS_OF = {
    "INVALID_PARAMETER_VALUE": 400,
    "BAD_REQUEST": 400,
    "RESOURCE_ALREADY_EXISTS": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "RESOURCE_DOES_NOT_EXIST": 404,
    "ENDPOINT_NOT_FOUND": 404,
}

# MLflow run status <-> EchoLab run status. SCHEDULED is running to us: an external run is never queued
# (a queued run is one the sweeper sends to the GPU workers).
RUN_STATUSES = {
    "RUNNING": "running",
    "SCHEDULED": "running",
    "FINISHED": "completed",
    "FAILED": "failed",
    "KILLED": "stopped",
}
MLFLOW_STATUS_OF = {
    "running": "RUNNING",
    "queued": "SCHEDULED",
    "completed": "FINISHED",
    "failed": "FAILED",
    "stopped": "KILLED",
}


class MlflowError(Exception):
    def __init__(self, error_code: str, message: str, status: int | None = None):
        super().__init__(message)
        self.error_code, self.message = error_code, message
        self.status = status or STATUS_OF[error_code]

    def as_json(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}


def invalid(field: str, problem: str) -> MlflowError:
    return MlflowError("INVALID_PARAMETER_VALUE", f"{field}: {problem}")


class Fields:
    """The request's fields (the JSON body of a POST, the query string of a GET), each taken with its
    type checked; a missing or wrong field raises INVALID_PARAMETER_VALUE naming it."""

    def __init__(self, data: dict, where: str = ""):
        self.data, self.where = data, where

    def _name(self, name: str) -> str:
        return f"{self.where}{name}"

    def string(
        self, name: str, required: bool = True, max_length: int | None = None, default: str = ""
    ) -> str:
        value = self.data.get(name)
        if value is None or value == "":
            if required:
                raise invalid(self._name(name), "is required")
            return default
        if not isinstance(value, str):
            raise invalid(self._name(name), f"must be a string, got {type(value).__name__}")
        if max_length is not None and len(value) > max_length:
            raise invalid(self._name(name), f"is {len(value)} characters; the limit is {max_length}")
        if "\x00" in value:
            raise invalid(self._name(name), "must not contain NUL characters")
        return value

    def integer(
        self, name: str, default: int | None = None, low: int | None = None, high: int | None = None
    ) -> int | None:
        """protobuf's JSON writes int64 as a string or a number; both are taken, and a float without a
        fraction (1.7e12), as protobuf's JSON parser takes it."""
        value = self.data.get(name)
        if value is None or value == "":
            return default
        if type(value) is float and value.is_integer():
            value = int(value)
        written = None
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
            written = value.strip()
            # Over 19 digits (leading zeros aside) is beyond int64: 10**19 stands in rather than parsing
            # thousands of digits.
            digits = written.lstrip("-").lstrip("0")
            value = int(written) if len(digits) <= 19 else (-1 if written[0] == "-" else 1) * 10**19
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(self._name(name), f"must be an integer, got {str(value)[:40]!r}")
        if high is None and value > INT64_MAX:  # the bound it broke is the one said
            high = INT64_MAX
        if low is None and value < -INT64_MAX - 1:
            low = -INT64_MAX - 1
        if (low is not None and value < low) or (high is not None and value > high):
            raise invalid(
                self._name(name), f"must be {_bounds(low, high)}, got {_shown(written or str(value))}"
            )
        return value

    def number(self, name: str) -> float:
        """A double: a JSON number, or "NaN" / "Infinity" / "-Infinity" as protobuf's JSON writes them."""
        value = self.data.get(name)
        if value is None:
            raise invalid(self._name(name), "is required")
        if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
            return float(value.replace("Infinity", "inf"))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise invalid(
                self._name(name),
                f'must be a number or "NaN", "Infinity", "-Infinity", got {str(value)[:40]!r}',
            )
        try:
            return float(value)
        except OverflowError:
            raise invalid(self._name(name), "is beyond the range of a double") from None

    def items(self, name: str, limit: int) -> list["Fields"]:
        """A list of objects (metrics, params, tags), each as Fields naming its index."""
        value = self.data.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise invalid(self._name(name), "must be a list")
        if len(value) > limit:
            raise invalid(self._name(name), f"{len(value)} entries in one request; the limit is {limit}")
        for index, entry in enumerate(value):
            if not isinstance(entry, dict):
                raise invalid(f"{self._name(name)}[{index}]", "must be an object")
        return [Fields(entry, f"{self._name(name)}[{index}].") for index, entry in enumerate(value)]

    def object(self, name: str) -> "Fields":
        """A required object inside this one, as Fields naming its path."""
        value = self.data.get(name)
        if not isinstance(value, dict):
            raise invalid(
                self._name(name),
                "is required" if value is None else f"must be an object, got {json_type(value)}",
            )
        return Fields(value, f"{self._name(name)}.")

    def strings(self, name: str) -> list[str]:
        value = self.data.get(name)
        if value is None:
            return []
        # A bare string is refused, as MLflow's server refuses it (its clients always send a list).
        if not isinstance(value, list):
            raise invalid(self._name(name), f"must be a list of strings, got {json_type(value)}")
        for index, item in enumerate(value):
            # an integer is read as its digits, as MLflow's server reads an experiment id sent as one
            if not isinstance(item, str) and (type(item) is not int or abs(item) > INT64_MAX):
                raise invalid(f"{self._name(name)}[{index}]", f"must be a string, got {json_type(item)}")
        return [str(item) for item in value]


_DOUBLES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def well_formed_metrics(value) -> list[tuple[str, float, int, int]] | None:
    """(key, value, step, timestamp) of every metric of a log-batch when all are well formed, else None (then
    Fields says which and why). The common case of 1,000 metrics a call, so plain type checks here."""
    if type(value) is not list or len(value) > MAX_METRICS_PER_BATCH:
        return None
    metrics = []
    for metric in value:
        if type(metric) is not dict:
            return None
        key, number, step, timestamp = (
            metric.get("key"),
            metric.get("value"),
            metric.get("step", 0),
            metric.get("timestamp"),
        )
        if type(key) is not str or not 0 < len(key) <= MAX_ENTITY_KEY_LENGTH or "\x00" in key:
            return None
        if type(number) is str:
            number = _DOUBLES.get(number)
        if type(number) is not float and (type(number) is not int or abs(number) > 2**53):
            return None
        if type(step) is not int or type(timestamp) is not int or not 0 <= timestamp <= INT64_MAX:
            return None
        metrics.append((key, float(number), step, timestamp))
    return metrics


# MLflow's rule for the names of metrics, params and tags (mlflow/utils/validation.py, not on Windows): a
# name a script logs here is one an MLflow server takes too, so a script tried on EchoLab runs on there.
_MLFLOW_NAME = re.compile(r"[/\w.\- :]*")


def mlflow_name_problem(name: str) -> str | None:
    """Why MLflow's server refuses `name` as a metric, param or tag name, in its words; None if it takes it."""
    if not _MLFLOW_NAME.fullmatch(name):
        return (
            f"{quoted(name)}: names may only contain alphanumerics, underscores (_), dashes (-), periods (.), "
            "spaces ( ), colons (:) and slashes (/), as in MLflow"
        )
    normal = posixpath.normpath(name)
    if normal != name or normal == "." or normal.startswith(("..", "/")):
        return (
            f"{quoted(name)}: names may be treated as files and must not resolve to other names; this one "
            f"would resolve to {quoted(normal)}, as MLflow refuses it"
        )
    return None


def key_value(entry: Fields, max_value: int, cut: bool = False) -> tuple[str, str]:
    """A param or tag: {"key", "value"}. MLflow allows an empty value but requires one: a value left out
    (or null) is no empty string, and a param stored as one could never be given its real value. A value
    over `max_value` characters is refused, or with `cut` cut to it, as MLflow's store does for a run's
    params and tags (MLFLOW_TRUNCATE_LONG_VALUES, on by default): a script that logs a long prompt as a
    param runs on there."""
    key = entry.string("key", max_length=MAX_ENTITY_KEY_LENGTH)
    problem = mlflow_name_problem(key)
    if problem:
        raise invalid(entry._name("key"), problem)
    if entry.data.get("value") is None:
        raise invalid(entry._name("value"), 'is required (an empty value is written "")')
    if cut:
        return key, entry.string("value", required=False)[:max_value]
    return key, entry.string("value", required=False, max_length=max_value)


# EchoLab's own tags on a run (models.ECHOLAB_RUN_ID_TAG, ECHOLAB_RUN_URL_TAG): computed when a run is read,
# so a script's tag under this prefix would be stored and then hidden by them.
ECHOLAB_TAG_PREFIX = "echolab."


def run_tag(entry: Fields) -> tuple[str, str]:
    """A run's tag (key_value), refused under EchoLab's own prefix with the reason."""
    key, value = key_value(entry, MAX_TAG_VALUE_LENGTH, cut=True)
    if key.startswith(ECHOLAB_TAG_PREFIX):
        raise invalid(
            entry._name("key"),
            f"{quoted(key)} is under {ECHOLAB_TAG_PREFIX!r}, EchoLab's own read-only tags "
            "(echolab.run_id, echolab.run_url); use another key",
        )
    return key, value


# A dataset a run used (mlflow.log_input), field by field with MLflow's limits (its database's columns).
DATASET_FIELDS = {"name": 500, "digest": 36, "source_type": 36, "source": 65535}
DATASET_OPTIONAL_FIELDS = {"schema": 1048575, "profile": 16777215}
MAX_DATASETS_PER_BATCH = 1000
MAX_DATASETS_PER_RUN, MAX_DATASET_BYTES_PER_RUN = 1000, 16 * 1024 * 1024
MAX_INPUT_TAG_KEY_LENGTH, MAX_INPUT_TAG_VALUE_LENGTH = 255, 500


def dataset_input(entry: Fields) -> dict:
    """One of runs/log-inputs' `datasets`: {"tags": [{"key", "value"}], "dataset": {name, digest, source_type,
    source, schema?, profile?}}, as runs/get answers it."""
    dataset = entry.object("dataset")
    fields = {name: dataset.string(name, max_length=limit) for name, limit in DATASET_FIELDS.items()}
    for name, limit in DATASET_OPTIONAL_FIELDS.items():
        if value := dataset.string(name, required=False, max_length=limit):
            fields[name] = value
    tags = []
    for tag in entry.items("tags", MAX_PARAMS_TAGS_PER_BATCH):
        if tag.data.get("value") is None:
            raise invalid(tag._name("value"), 'is required (an empty value is written "")')
        key = tag.string("key", max_length=MAX_INPUT_TAG_KEY_LENGTH)
        tags.append(
            {"key": key, "value": tag.string("value", required=False, max_length=MAX_INPUT_TAG_VALUE_LENGTH)}
        )
    return {"tags": tags, "dataset": fields}


def run_id_of(fields: Fields) -> str:
    """run_id, or the older run_uuid the client still sends beside it; "run_id: is required" without both."""
    found = fields.string("run_id", required=False) or fields.string("run_uuid", required=False)
    if not found:
        raise invalid(fields._name("run_id"), "is required")
    return found


def millis(moment) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def double(value: float | None):
    """A double as protobuf's JSON writes it: NaN and the infinities as strings."""
    if value is None or math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def pairs(mapping: dict) -> list[dict]:
    return [{"key": key, "value": value} for key, value in mapping.items()]


def _bounds(low: int | None, high: int | None) -> str:
    if high is None:
        return f"at least {low}"
    return f"between {low} and {high}" if low is not None else f"at most {high}"


def _shown(digits: str) -> str:
    return digits if len(digits) <= 24 else f"{digits[:20]}… ({len(digits)} digits)"


def metric(key: str, value: float | None, step: int, logged_at: int | None, heard: int | None) -> dict:
    """A metric point as MLflow answers one; a point without a timestamp (a run's from before they were
    kept) at `heard`, when the run was last heard from."""
    return {
        "key": key,
        "value": double(value),
        "timestamp": heard if logged_at is None else logged_at,
        "step": step,
    }


def page_window(fields: Fields, default_size: int) -> tuple[int, int]:
    """(offset, size) of the page asked for: max_results from page_token, an offset this server wrote."""
    size = fields.integer("max_results", default_size, low=1, high=MAX_RESULTS)
    token = fields.string("page_token", required=False)
    if token and not re.fullmatch(r"[0-9]{1,18}", token):  # below 2**63
        raise invalid("page_token", f"{token[:40]!r} is not a token this server gave")
    return int(token or 0), size


def page(items, window: tuple[int, int]) -> tuple[list, str | None]:
    """One page of `items` (page_window) and the next page's token."""
    start, size = window
    end = start + size
    total = len(items) if isinstance(items, list) else items.count()
    return list(items[start:end]), (str(end) if end < total else None)


def artifact_location(fields: Fields) -> str:
    """create_experiment's artifact_location, checked as MLflow's server checks it; "" when none is named."""
    location = fields.string("artifact_location", required=False, max_length=MAX_ARTIFACT_LOCATION_LENGTH)
    if not location:
        return ""
    if not location.strip() or any(unicodedata.category(char) in ("Cc", "Cf") for char in location):
        raise invalid(
            "artifact_location", f"{quoted(location)}: blank, or holds control or format characters"
        )
    try:
        parsed = urllib.parse.urlparse(location)
    except ValueError as error:  # a bracketed host that is no IPv6 address: "s3://[bucket/x"
        raise invalid("artifact_location", f"{quoted(location)}: not a URI ({error})") from None
    if parsed.fragment or parsed.params or parsed.query:
        raise invalid("artifact_location", f"{quoted(location)}: a location has no fragment, params or query")
    if parsed.scheme == "runs":
        raise invalid(
            "artifact_location", f"{quoted(location)}: a location cannot be a runs:/ URI, as in MLflow"
        )
    if parsed.scheme == "mlflow-artifacts":
        raise invalid(
            "artifact_location",
            f"{quoted(location)}: mlflow-artifacts: is where EchoLab keeps the files of an experiment that names "
            "no location; leave artifact_location out for that",
        )
    return location
