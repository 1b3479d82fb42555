"""Django settings. Everything that differs between machines comes from the environment (see README)."""

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import plotly

from webapp import environment as env

BASE_DIR = env.REPO_ROOT
VAR_DIR = env.var_dir()
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = env.secret_key()
DEBUG = env.flag("DEBUG", False)
ALLOWED_HOSTS = env.csv_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
SITE_URL = os.environ.get("SITE_URL", "http://localhost:8000").rstrip("/")
if urlsplit(SITE_URL).scheme not in ("http", "https"):
    raise env.EnvironmentConfigError(f"SITE_URL: expected http(s)://host[:port], got {SITE_URL!r}")
CSRF_TRUSTED_ORIGINS = env.csv_list("CSRF_TRUSTED_ORIGINS", SITE_URL)

# Behind TLS (SITE_URL is https) every cookie is secure and plain HTTP is redirected.
_HTTPS = SITE_URL.startswith("https://")
SECURE_SSL_REDIRECT = _HTTPS and env.flag("SECURE_SSL_REDIRECT", True)
SESSION_COOKIE_SECURE = _HTTPS
CSRF_COOKIE_SECURE = _HTTPS
SECURE_HSTS_SECONDS = env.integer("SECURE_HSTS_SECONDS", 31536000 if _HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _HTTPS
SECURE_HSTS_PRELOAD = _HTTPS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if _HTTPS else None
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
X_FRAME_OPTIONS = "DENY"
# Large metric batches are accepted up to this size; api views answer 413 with a message beyond it.
DATA_UPLOAD_MAX_MEMORY_SIZE = 16 * 1024 * 1024

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "webapp.core",
    "webapp.accounts",
    "webapp.experiments",
    "webapp.metrics",
    "webapp.alerts",
    "webapp.imports",
    "webapp.compare",
    "webapp.runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.database(VAR_DIR / "echolab.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static", ("vendor/plotly", Path(plotly.__file__).parent / "package_data")]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Without collectstatic (the embedded run), whitenoise serves straight from the finders.
WHITENOISE_USE_FINDERS = True

for _key, _value in env.email().items():
    globals()[_key] = _value
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "EchoLab <echolab@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# No second email for the same rule on the same run within this many seconds (a flapping rule).
ALERT_COOLDOWN_SECONDS = env.integer("ALERT_COOLDOWN_SECONDS", 3600)
# Metric files uploaded as imported runs (/import, /api/imports) are refused above this size.
IMPORT_MAX_BYTES = env.integer("IMPORT_MAX_BYTES", 50 * 1024 * 1024, minimum=1)

CHECKPOINT_ROOT = env.path("CHECKPOINT_ROOT", VAR_DIR / "checkpoints")
MODEL_ROOT = env.path("MODEL_ROOT", VAR_DIR / "models")

# Celery (worker/celery.py reads every CELERY_* setting).
CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = env.broker(VAR_DIR / "broker")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {"worker.tasks.train_run": {"queue": "gpu"}}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Early acks: a message is acknowledged when a worker starts it, and Postgres (Run.claim) decides who
# trains. A worker that dies mid-run is found by the sweeper through its stale heartbeat, so no broker
# visibility timeout has to outlast the longest run (docs/OPERATIONS.md).
CELERY_TASK_ACKS_LATE = False
# A busy worker takes no further message (Redis only): a second run waits for a free GPU, not this one.
CELERY_WORKER_DISABLE_PREFETCH = CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
CELERY_BEAT_SCHEDULE = {
    "sweep-runs": {"task": "worker.tasks.sweep_runs", "options": {"queue": "default"},
                   "schedule": timedelta(seconds=env.integer("RUN_SWEEP_EVERY", 30, minimum=1))},
}
# The sweeper (worker/sweeper.py): a running run without a heartbeat for this long lost its worker and
# is requeued, at most RUN_MAX_ATTEMPTS attempts in all; a queued run whose message may be lost is
# re-sent after RUN_RESEND_AFTER seconds.
RUN_HEARTBEAT_TIMEOUT = env.integer("RUN_HEARTBEAT_TIMEOUT", 300, minimum=1)
RUN_RESEND_AFTER = env.integer("RUN_RESEND_AFTER", 600, minimum=1)
RUN_MAX_ATTEMPTS = env.integer("RUN_MAX_ATTEMPTS", 3, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
