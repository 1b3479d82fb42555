"""EchoLab's gunicorn settings, as `./echolab run` and docker-compose serve:
`gunicorn -c python:webapp.core.gunicorn_conf webapp.wsgi`.

A request gunicorn refuses before Django sees it (a request line or headers over its limits, a malformed
request) is answered as JSON like every other API error, not with gunicorn's HTML page: an API client
reads the same `{"error": ...}` whatever refused it.
"""

import json

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

# gunicorn's most (0 would be unlimited): a GET names up to 100 metric keys in its URL.
limit_request_line = 8190
worker_class = "webapp.core.gunicorn_conf.JsonErrorsWorker"


def write_json_error(sock, status: int, reason: str, message: str) -> None:
    body = json.dumps({"error": f"{reason}: {message}" if message else reason}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


class JsonErrorsWorker(ThreadWorker):
    """The threaded worker (`--threads`), writing its own errors as JSON."""

    def init_process(self):
        # Worker.handle_error writes through util.write_error; this process's only writer of such answers.
        util.write_error = write_json_error
        super().init_process()
