"""The web server's access log without the pages' polling: a run page asks for new points every 2 s,
which buried everything else in `./echolab run`'s console (3,900 lines in 18 minutes). Polls that
succeed are left out; a failed poll, and every other request, is still logged."""

import re

from gunicorn.glogging import Logger

# GETs the run and compare pages repeat while a run is live (webapp/metrics/urls.py, webapp/compare/urls.py).
POLL_PATHS = re.compile(r"^/api/runs/\d+/(metrics|events)$|^/api/compare$")


def is_poll(method: str, path: str, status: int) -> bool:
    return method == "GET" and status < 400 and POLL_PATHS.match(path) is not None


class QuietPollsLogger(Logger):
    """gunicorn --logger-class webapp.core.access_log.QuietPollsLogger"""

    def access(self, resp, req, environ, request_time):
        status = resp.status
        code = int(str(status).split(None, 1)[0]) if status else 0
        if is_poll(environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", ""), code):
            return
        super().access(resp, req, environ, request_time)
