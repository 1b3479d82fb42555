"""JsonResponse, encoded by orjson: the compare page's answer for 100 runs (9 MB of numbers) in 20 ms, where
Django's encoder took 250-290 ms (docs/BENCHMARKS.md, Compare).

What Django's encoder writes its own way is still written its way: datetimes (to the millisecond, "Z" for
UTC), dates and times, Decimals and lazy strings go through DjangoJSONEncoder.default. A document orjson
cannot encode (an integer beyond 64 bits, nesting deeper than 254) is encoded by Django's encoder instead.
NaN and infinities become null, where Django's encoder would write a literal that is not JSON.
"""

import json

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_DJANGO = DjangoJSONEncoder()


def is_api_path(path: str) -> bool:
    """Whether a path is the JSON API's (/api and under it): its errors are answered as JSON."""
    return path == "/api" or path.startswith("/api/")


def dumps(data) -> bytes:
    try:
        return orjson.dumps(data, default=_DJANGO.default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return json.dumps(data, cls=DjangoJSONEncoder).encode()


class JsonResponse(HttpResponse):
    """django.http.JsonResponse's use (a dict, a status), encoded by `dumps`."""

    def __init__(self, data: dict, **kwargs):
        kwargs.setdefault("content_type", "application/json")
        super().__init__(content=dumps(data), **kwargs)
