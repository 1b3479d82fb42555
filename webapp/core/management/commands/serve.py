"""`./echolab run`: migrate, make sure a login exists, then run the web server, a worker per queue
and celery beat in the foreground until Ctrl-C, which stops them all."""

import os
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

# Seconds each process gets to stop after SIGTERM; the gpu worker long enough for a training step to end
# and checkpoint (worker/training.py shutdown_request).
STOP_GRACE_SECONDS = {"worker-gpu": 60}
DEFAULT_STOP_GRACE_SECONDS = 20


class Command(BaseCommand):
    help = "Run EchoLab: web server, a gpu worker, a default worker and beat."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("ECHOLAB_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("ECHOLAB_PORT", "8000")))
        parser.add_argument("--no-demo", action="store_true", help="Do not create the demo experiment.")

    def handle(self, host, port, no_demo=False, **options):
        call_command("migrate", interactive=False, verbosity=0)
        self.ensure_login()
        if not no_demo:
            call_command("seed_demo")
        self.ensure_tiny_model()
        processes = self.start_processes(host, port)
        self.stdout.write(f"EchoLab is running at http://{host}:{port}/ (Ctrl-C stops everything)")
        self.supervise(processes)

    def ensure_tiny_model(self):
        """Build the embedded tiny model now, once, in view, rather than inside the first run."""
        from trainer import tiny_model

        path = tiny_model.default_dir()
        if not os.path.exists(os.path.join(path, "config.json")):
            self.stdout.write(f"Building the tiny local model in {path} (first start only, 1-2 minutes)...")
            tiny_model.ensure(path)

    def ensure_login(self):
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "admin@localhost", password)
        self.stdout.write(self.style.SUCCESS(f"Created login: user 'admin', password '{password}'"))
        self.stdout.write("(shown once; change it in the admin, or `python manage.py changepassword admin`)")

    def start_processes(self, host, port):
        python = sys.executable
        celery = [python, "-m", "celery", "-A", "worker.celery"]
        commands = {
            "web": [python, "-m", "gunicorn", "webapp.wsgi", "--bind", f"{host}:{port}",
                    "--workers", "2", "--threads", "4", "--access-logfile", "-"],
            "worker-gpu": celery + ["worker", "-Q", "gpu", "--concurrency", "1", "--prefetch-multiplier", "1",
                                    "--max-tasks-per-child", "1", "-n", "gpu@%h", "--loglevel", "INFO"],
            "worker": celery + ["worker", "-Q", "default", "--concurrency", "2", "-n", "default@%h",
                                "--loglevel", "INFO"],
            "beat": celery + ["beat", "--loglevel", "INFO", "-s", settings.CELERY_BEAT_SCHEDULE_FILENAME],
        }
        processes = {}
        for name, command in commands.items():
            # Each child in its own process group, so Ctrl-C reaches only us and we stop them in order.
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       start_new_session=True, text=True, bufsize=1)
            threading.Thread(target=self.relay_output, args=(name, process), daemon=True).start()
            processes[name] = process
            self.stdout.write(f"started {name} (pid {process.pid})")
        return processes

    def relay_output(self, name, process):
        for line in process.stdout:
            sys.stdout.write(f"{name:>10} | {line}")
            sys.stdout.flush()

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
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        started = time.monotonic()
        for name, process in processes.items():
            grace = STOP_GRACE_SECONDS.get(name, DEFAULT_STOP_GRACE_SECONDS)
            try:
                process.wait(timeout=max(0.1, started + grace - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"echolab: {name} did not stop in {grace}s; killing it")
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.stdout.write("Stopped.")
