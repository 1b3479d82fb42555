"""`./echolab run`: migrate, make sure a login exists, then run the web server, a worker per queue
and celery beat in the foreground until Ctrl-C, which stops them all. On a first start the web server
answers at once while the tiny local model builds in a child process (its progress in the console and on
every page, webapp/core/first_start.py); the demo experiment is created, and so starts, when it is ready.
When everything is up, the URL and the login are printed again, below the processes' start-up noise."""

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection

from webapp.alerts import emails
from webapp.core import first_start
from worker import queues

# Seconds each process gets to stop after SIGTERM; the gpu worker long enough for a training step to end
# and checkpoint (worker/training.py shutdown_request): a step of the demo took a minute on 2 cores, and
# killing it mid-step lost the steps since the last checkpoint. A second Ctrl-C stops everything at once.
STOP_GRACE_SECONDS = {"worker-gpu": 600}
DEFAULT_STOP_GRACE_SECONDS = 20
# After this long the console says what the gpu worker is waiting for.
SAY_WAITING_AFTER = 3
# The line each process prints once it serves: the start-up is over when all have, and the model is built.
READY_LINES = {
    "web": re.compile(r"Listening at: "),
    "worker-gpu": re.compile(r"gpu@\S+ ready\."),
    "worker": re.compile(r"default@\S+ ready\."),
}
BUILD_PROGRESS = re.compile(r"warm-start (\d+)/(\d+)")
BUILD_STEPS = 150  # trainer.tiny_model.build's default
BUILD_NOTICE_SECONDS = 30  # how often the console hears that the build goes on
BUILD_SCRIPT = "import sys; from trainer import tiny_model; tiny_model.ensure(sys.argv[1])"


def public_host(host: str) -> str:
    """The host a browser on this machine uses for a bind address."""
    return "localhost" if host in ("", "0.0.0.0", "::") else host


class Command(BaseCommand):
    help = "Run EchoLab: web server, a gpu worker, a default worker and beat."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("ECHOLAB_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("ECHOLAB_PORT", "8000")))
        parser.add_argument("--no-demo", action="store_true", help="Do not create the demo experiment.")

    def handle(self, host, port, no_demo=False, **options):
        call_command("migrate", interactive=False, verbosity=0)
        self.collect_static()
        self.password = self.ensure_login()
        self.url = f"http://{public_host(host)}:{port}/"
        # Links in alert emails name this server, on whatever port it was started (unless SITE_URL says).
        os.environ.setdefault("SITE_URL", self.url.rstrip("/"))
        self.waiting = set(READY_LINES) | {"model"}
        self.waiting_lock = threading.Lock()
        self.build = None
        processes = self.start_processes(host, port)
        self.stdout.write(f"EchoLab is starting at {self.url} (Ctrl-C stops everything)")
        threading.Thread(target=self.prepare_model, args=(not no_demo,), daemon=True).start()
        self.supervise(processes)

    def collect_static(self):
        """The static files with content hashes in their names and gzip copies, for the web server started
        below (webapp/settings.py, STATIC_COLLECTED); in a process of its own, where the setting is read."""
        os.environ["ECHOLAB_STATIC_COLLECTED"] = "1"  # for that process and the ones start_processes starts
        command = [sys.executable, "manage.py", "collectstatic", "--noinput", "--clear", "--verbosity", "0"]
        subprocess.run(command, cwd=settings.BASE_DIR, check=True)

    def prepare_model(self, demo: bool):
        """Build the tiny model if it is missing, then create the demo experiment (whose runs need it)."""
        from trainer import tiny_model

        path = tiny_model.default_dir()
        try:
            if not os.path.exists(os.path.join(path, "config.json")) and not self.build_model(path):
                return
            if demo:
                call_command("seed_demo", stdout=self.stdout)
        finally:
            connection.close()  # this thread's
        self.now_up("model")

    def build_model(self, path: str) -> bool:
        self.stdout.write(
            f"Building the tiny local model in {path} (first start only; the web server "
            "answers meanwhile and shows the progress)..."
        )
        first_start.write(state="building", step=0, steps=BUILD_STEPS)
        self.build = subprocess.Popen(
            [sys.executable, "-c", BUILD_SCRIPT, path],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            text=True,
            bufsize=1,
        )
        started, last = time.monotonic(), ["", ""]
        done = threading.Event()

        def notices():
            while not done.wait(BUILD_NOTICE_SECONDS):
                self.stdout.write(
                    f"     model | still building ({last[0] or 'starting'}, "
                    f"{round(time.monotonic() - started)} s so far)"
                )

        threading.Thread(target=notices, daemon=True).start()
        for line in self.build.stdout:
            sys.stdout.write(f"     model | {line}")
            last[1] = line.strip() or last[1]
            progress = BUILD_PROGRESS.search(line)
            if progress:
                last[0] = f"step {progress[1]} of {progress[2]}"
                first_start.write(state="building", step=int(progress[1]), steps=int(progress[2]))
        code = self.build.wait()
        done.set()
        if code != 0:
            error = f"exit code {code}: {last[1]}"
            first_start.write(state="failed", error=error)
            self.stderr.write(
                f"echolab: building the tiny model failed ({error}); the demo waits for the next start"
            )
            return False
        first_start.clear()
        self.stdout.write(f"Tiny model ready after {round(time.monotonic() - started)} s.")
        return True

    def now_up(self, part: str):
        with self.waiting_lock:
            if part not in self.waiting:
                return
            self.waiting.discard(part)
            if self.waiting:
                return
        login = (
            f"log in as 'admin' with password '{self.password}'"
            if self.password
            else "log in with your account"
        )
        self.stdout.write(self.style.SUCCESS(f"EchoLab is ready at {self.url}: {login}"))
        self.stdout.write(f"Alert emails go {emails.destination()}.")

    def ensure_login(self):
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return None
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "admin@localhost", password)
        self.stdout.write(self.style.SUCCESS(f"Created login: user 'admin', password '{password}'"))
        self.stdout.write(
            "(shown once more when everything is up; change it on the Account page (/account/), or "
            "`python manage.py changepassword admin`)"
        )
        return password

    def start_processes(self, host, port):
        python = sys.executable
        celery = [python, "-m", "celery", "-A", "worker.celery"]
        commands = {
            "web": [
                python,
                "-m",
                "gunicorn",
                "-c",
                "python:webapp.core.gunicorn_conf",
                "webapp.wsgi",
                "--bind",
                f"{host}:{port}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--access-logfile",
                "-",
                "--logger-class",
                "webapp.core.access_log.QuietPollsLogger",
            ],
            "worker-gpu": celery
            + [
                "worker",
                "-Q",
                queues.GPU,
                "--concurrency",
                "1",
                "--prefetch-multiplier",
                "1",
                "--max-tasks-per-child",
                "1",
                "-n",
                "gpu@%h",
                "--loglevel",
                "INFO",
            ],
            "worker": celery
            + [
                "worker",
                "-Q",
                queues.DEFAULT,
                "--concurrency",
                "2",
                "-n",
                "default@%h",
                "--loglevel",
                "INFO",
            ],
            "beat": celery + ["beat", "--loglevel", "INFO", "-s", settings.CELERY_BEAT_SCHEDULE_FILENAME],
        }
        processes = {}
        for name, command in commands.items():
            # Each child in its own process group, so Ctrl-C reaches only us and we stop them in order.
            process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                text=True,
                bufsize=1,
            )
            threading.Thread(target=self.relay_output, args=(name, process), daemon=True).start()
            processes[name] = process
            self.stdout.write(f"started {name} (pid {process.pid})")
        return processes

    def relay_output(self, name, process):
        ready = READY_LINES.get(name)
        for line in process.stdout:
            sys.stdout.write(f"{name:>10} | {line}")
            sys.stdout.flush()
            if ready and ready.search(line):
                self.now_up(name)
                ready = None

    def supervise(self, processes):
        stopping = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stopping.set())
        while not stopping.is_set():
            for name, process in processes.items():
                if process.poll() is not None:
                    self.stderr.write(f"echolab: {name} exited with code {process.returncode}; stopping")
                    stopping.set()
            stopping.wait(1)
        self.stop(processes)

    def stop(self, processes):
        self.stdout.write("Stopping...")
        hurry = threading.Event()  # a second Ctrl-C (or SIGTERM): no more waiting
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: hurry.set())
        if self.build is not None and self.build.poll() is None:
            os.killpg(
                self.build.pid, signal.SIGTERM
            )  # a half-built model is discarded: the next start builds
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        started = time.monotonic()
        for name, process in processes.items():
            grace = STOP_GRACE_SECONDS.get(name, DEFAULT_STOP_GRACE_SECONDS)
            said = False
            while process.poll() is None and not hurry.is_set() and time.monotonic() < started + grace:
                if not said and name in STOP_GRACE_SECONDS and time.monotonic() > started + SAY_WAITING_AFTER:
                    self.stdout.write(
                        f"Waiting for {name} to stop: a run it trains ends its step and checkpoints first (up to "
                        f"{grace // 60} minutes); Ctrl-C again stops at once, and such a run redoes the steps "
                        "since its last checkpoint"
                    )
                    said = True
                hurry.wait(0.2)
            if process.poll() is None:
                why = "stopping at once" if hurry.is_set() else f"did not stop in {grace}s"
                self.stderr.write(f"echolab: {name} {why}; killing it")
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.stdout.write("Stopped.")
