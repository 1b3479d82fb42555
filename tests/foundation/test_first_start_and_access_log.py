"""The first start's progress banner on every page, and the web server's access log without polls."""

import io
import logging
from datetime import timedelta

from gunicorn.config import Config

from webapp.core import first_start
from webapp.core.access_log import QuietPollsLogger


def test_every_page_shows_the_model_build_until_it_is_done(alice_client, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    first_start.write(state="building", step=51, steps=150)
    html = alice_client.get("/").content.decode()
    assert "building the tiny local model the demo trains (step 51 of\n    150)" in html
    first_start.write(state="failed", error="exit code 1: out of memory")
    assert (
        "Building the tiny local model failed: exit code 1: out of memory"
        in alice_client.get("/").content.decode()
    )
    first_start.clear()
    assert 'id="first-start"' not in alice_client.get("/").content.decode()


class Response:
    def __init__(self, status):
        self.status, self.headers, self.sent = status, [], 0


def logged(requests) -> list[str]:
    logger = QuietPollsLogger(Config())
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.access_log.addHandler(handler)
    logger._access_log_enabled = True  # as with --access-logfile -
    for method, path, status in requests:
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "RAW_URI": path,
            "SERVER_PROTOCOL": "HTTP/1.1",
            "QUERY_STRING": "",
        }
        logger.access(Response(status), {}, environ, timedelta(seconds=0.01))
    logger.access_log.removeHandler(handler)
    return [line.split('"')[1] for line in stream.getvalue().splitlines()]


def test_polls_that_succeed_stay_out_of_the_access_log():
    assert logged(
        [
            ("GET", "/api/runs/7/metrics", "200 OK"),
            ("GET", "/api/runs/7/events", "200 OK"),
            ("GET", "/api/compare", "200 OK"),
            ("GET", "/runs/7/", "200 OK"),
            ("GET", "/api/runs/7/metrics", "404 Not Found"),
            ("POST", "/api/runs/7/metrics", "200 OK"),
        ]
    ) == ["GET /runs/7/ HTTP/1.1", "GET /api/runs/7/metrics HTTP/1.1", "POST /api/runs/7/metrics HTTP/1.1"]
