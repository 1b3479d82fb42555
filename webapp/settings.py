"""Django settings. Everything that differs between machines comes from the environment (see README)."""

import os
from datetime import timedelta
from urllib.parse import urlsplit

from csp.constants import NONE, SELF, UNSAFE_INLINE

from webapp import environment as env
from worker import queues

BASE_DIR = env.REPO_ROOT
VAR_DIR = env.var_dir()
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = env.secret_key()
DEBUG = env.flag("DEBUG", False)
DEFAULT_EXCEPTION_REPORTER_FILTER = "webapp.core.server_errors.SecretsFilter"
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
CSRF_FAILURE_VIEW = "webapp.core.server_errors.csrf_failure"
SECURE_HSTS_SECONDS = env.integer("SECURE_HSTS_SECONDS", 31536000 if _HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _HTTPS
SECURE_HSTS_PRELOAD = _HTTPS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if _HTTPS else None
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy on every response (django-csp): scripts only from our own origin (plotly.js and our
# JS are served from static/, page data travels in json_script blocks, which are not executed). Styles also
# allow 'unsafe-inline': plotly.js injects its own stylesheet rules into the page at run time, and templates
# size progress bars and colour swatches with style attributes. Styles cannot run code; the script policy is
# what stops injected markup from acting. docs/OPERATIONS.md has the reasoning.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:", "blob:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
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
    "axes",
    "webapp.tracking",
    "webapp.runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "webapp.core.slashes.RemoveSlashMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "webapp.core.utf8.Utf8InputMiddleware",  # after the user is known: its 400 page is the signed-in one
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "webapp.core.server_errors.DatabaseUnavailableMiddleware",
    # Last, as django-axes asks: it turns a lockout raised during authentication into the lockout page.
    "axes.middleware.AxesMiddleware",
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
                "webapp.core.first_start.context",
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
# Failed logins are throttled by django-axes, per account and per client address (REMOTE_ADDR) separately:
# after LOGIN_FAILURE_LIMIT failures either is locked for LOGIN_LOCKOUT_MINUTES, and every failure during a
# lockout starts the wait again. A successful login clears its account's and address's count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.integer("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env.integer("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = True
AXES_LOCKOUT_CALLABLE = "webapp.accounts.views.locked_out"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
FORMAT_MODULE_PATH = ["webapp.formats"]  # one date and time format on every page
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
# `./echolab run` and the Docker image collect the static files before serving (ECHOLAB_STATIC_COLLECTED=1):
# names then carry a hash of their content, so browsers keep them for good, and whitenoise serves the gzip
# copies collectstatic wrote (plotly.js: 4.8 MB, 1.4 MB gzipped). Without it (tests, runserver) whitenoise
# serves the source folders' files as they are, a new or edited file with no collectstatic to forget.
STATIC_COLLECTED = env.flag("ECHOLAB_STATIC_COLLECTED")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if STATIC_COLLECTED
        else "whitenoise.storage.CompressedStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not STATIC_COLLECTED

for _key, _value in env.email().items():
    globals()[_key] = _value
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "EchoLab <echolab@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# No second email for the same rule on the same run within this many seconds (a flapping rule).
ALERT_COOLDOWN_SECONDS = env.integer("ALERT_COOLDOWN_SECONDS", 3600)
# At most one alert email per run within this many seconds: warnings that come sooner after the run's last
# email wait, gathered into one, until the time is up; a collapse is sent at once, with any that wait,
# unless the run had a collapse emailed within this time (Notification._send_or_gather).
ALERT_GROUP_SECONDS = env.integer("ALERT_GROUP_SECONDS", 300, minimum=0)
# Alert emails that fail are retried NOTIFY_RETRY_FIRST seconds later, the wait doubling up to
# NOTIFY_RETRY_MAX_DELAY, for NOTIFY_RETRY_FOR seconds in all (an SMTP outage of hours), then marked failed.
# A sender gone for NOTIFY_SENDING_TIMEOUT seconds mid-send (killed) has its email sent again by the sweeper.
NOTIFY_RETRY_FIRST = env.integer("NOTIFY_RETRY_FIRST", 60, minimum=1)
NOTIFY_RETRY_MAX_DELAY = env.integer("NOTIFY_RETRY_MAX_DELAY", 3600, minimum=1)
NOTIFY_RETRY_FOR = env.integer("NOTIFY_RETRY_FOR", 12 * 3600, minimum=0)
NOTIFY_SENDING_TIMEOUT = env.integer("NOTIFY_SENDING_TIMEOUT", 300, minimum=1)
# Metric files uploaded as imported runs (/import, /api/imports) are refused above this size.
IMPORT_MAX_BYTES = env.integer("IMPORT_MAX_BYTES", 50 * 1024 * 1024, minimum=1)

# Upper bounds on the sizes a run's config may ask for, checked for every run an experiment plans
# (webapp/experiments/run_planning.py check_limits). Each is overridden by LIMIT_<NAME> in the environment (the
# last part of the field, upper case: LIMIT_GROUP_SIZE, LIMIT_ROLLOUT_TOKENS, ...; README "Configuration").
# rollout_tokens bounds what one step generates: env_groups x group_size x max_turns x max_new_tokens (and
# val_seeds x max_turns x max_new_tokens for validation), i.e. what a worker must hold.
RUN_LIMITS = env.limits(
    {
        "rollout.env_groups": 256,
        "rollout.group_size": 64,
        "rollout.max_turns": 50,
        "rollout.max_actions_per_turn": 50,
        "rollout.max_actions_per_episode": 500,
        "rollout.max_new_tokens": 8192,
        "rollout.val_seeds": 4096,
        "rollout_tokens": 2**24,
        "optim.mini_batch_size": 16384,
        "optim.micro_batch_size": 1024,
        "optim.updates_per_batch": 64,
        "schedule.samples_per_step": 256,
        "schedule.keep_checkpoints": 100,
        "model.lora_rank": 1024,
    }
)

CHECKPOINT_ROOT = env.path("CHECKPOINT_ROOT", VAR_DIR / "checkpoints")
# Files MLflow clients log with their runs (webapp.tracking.artifacts), one folder per run; an upload
# larger than ARTIFACT_MAX_BYTES is refused.
ARTIFACT_ROOT = env.path("ARTIFACT_ROOT", VAR_DIR / "artifacts")
ARTIFACT_MAX_BYTES = env.integer("ARTIFACT_MAX_BYTES", 4 * 1024**3, minimum=1)
MODEL_ROOT = env.path("MODEL_ROOT", VAR_DIR / "models")
# Sokoban level sets (`env.params.levels`) are read only from here: envs.sokoban.env.LevelFiles, set by
# webapp.experiments.apps for the web app and the workers alike.
LEVELS_ROOT = env.path("LEVELS_ROOT", VAR_DIR / "levels")

# Celery (worker/celery.py reads every CELERY_* setting).
CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = env.broker(VAR_DIR / "broker")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = queues.DEFAULT
CELERY_TASK_ROUTES = {queues.TRAIN_RUN: {"queue": queues.GPU}}
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
    "sweep-runs": {
        "task": queues.SWEEP_RUNS,
        "options": {"queue": queues.DEFAULT},
        "schedule": timedelta(seconds=env.integer("RUN_SWEEP_EVERY", 30, minimum=1)),
    },
}
# The sweeper (worker/sweeper.py): a running run without a heartbeat for this long lost its worker and
# is requeued, at most RUN_MAX_ATTEMPTS attempts lost in all (a clean shutdown loses none); a queued run
# whose message may be lost is re-sent after RUN_RESEND_AFTER seconds. A re-send is only a duplicate at
# worst (the claim decides), and it happens only while the gpu queue holds fewer messages than there are
# queued runs, so a minute: with 10 minutes, the queue after a Redis restart sat still that long beside
# idle workers.
RUN_HEARTBEAT_TIMEOUT = env.integer("RUN_HEARTBEAT_TIMEOUT", 300, minimum=1)
RUN_RESEND_AFTER = env.integer("RUN_RESEND_AFTER", 60, minimum=1)
RUN_MAX_ATTEMPTS = env.integer("RUN_MAX_ATTEMPTS", 3, minimum=1)
# torch's CPU threads in a training child; 0: torch's default. Read here so that a bad value stops the
# worker at start, not each run it claims.
TRAIN_THREADS = env.integer("ECHOLAB_THREADS", 0, minimum=0)
# A run logged through the MLflow endpoint (webapp/tracking) from which nothing arrived for this long is
# marked lost (failed) by the sweeper; logging to it again makes it running again.
MLFLOW_LOST_AFTER = env.integer("MLFLOW_LOST_AFTER", 900, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"without_traceback": {"()": "webapp.core.server_errors.WithoutTraceback"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
        "console_one_line": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["without_traceback"],
        },
    },
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # A request Django refuses as suspicious (a Host header not in ALLOWED_HOSTS, too many query
        # parameters: scanners send them): one line, not a traceback.
        "django.security": {"handlers": ["console_one_line"], "propagate": False},
    },
}
