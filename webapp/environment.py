"""Settings read from the environment (12-factor), with one-line errors for bad values.

Every variable is documented in README.md ("Configuration"). A malformed value raises
`EnvironmentConfigError`, whose message names the variable and the problem; manage.py and the
launcher print that one line and exit instead of showing a traceback.
"""

import os
import re
import secrets
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

REPO_ROOT = Path(__file__).resolve().parent.parent


class EnvironmentConfigError(Exception):
    """A malformed environment variable; the message names it."""


def var_dir() -> Path:
    """Where EchoLab keeps its state (SQLite database, broker folders, models, checkpoints, mail)."""
    return Path(os.environ.get("ECHOLAB_VAR") or REPO_ROOT / "var").resolve()


def flag(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise EnvironmentConfigError(f"{name}: expected true/false (1/0, yes/no, on/off), got {raw!r}")


def integer(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EnvironmentConfigError(f"{name}: expected an integer, got {raw!r}") from None
    if value < minimum:
        raise EnvironmentConfigError(f"{name}: must be >= {minimum}, got {value}")
    return value


def limit_variable(field: str) -> str:
    """ "rollout.group_size" -> "LIMIT_GROUP_SIZE"."""
    return "LIMIT_" + field.rsplit(".", 1)[-1].upper()


def limits(defaults: dict[str, int]) -> dict[str, int]:
    """{config field: upper bound}, each from LIMIT_<NAME> when set (an integer >= 1)."""
    return {field: integer(limit_variable(field), default, minimum=1) for field, default in defaults.items()}


def path(name: str, default: Path) -> Path:
    return Path(os.environ.get(name) or default).resolve()


def csv_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def secret_key() -> str:
    """SECRET_KEY, or one generated on first start and kept under var/ so sessions survive restarts."""
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    key_file = var_dir() / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    key_file.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    # O_EXCL: when the web server and a worker start together, the first writer wins and the
    # other reads the winner's key.
    try:
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return key_file.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


# user:password@ in a URL: the password up to the last "@", where a malformed URL would cut it elsewhere
_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/?#@]*:)(.*)@")


# Without a scheme (a malformed URL): from the first ":" to the last "@"
_PASSWORD_ANYWHERE = re.compile(r"^([^:@]*:)(.*)@")


def _masked(raw: str) -> str:
    """A URL as an error message shows it: without its password (the message goes to the logs)."""
    masked = _PASSWORD.sub(r"\1***@", raw, count=1)
    return masked if masked != raw else _PASSWORD_ANYWHERE.sub(r"\1***@", raw, count=1)


def _split_url(name: str, raw: str, schemes: tuple[str, ...]):
    parts = urlsplit(raw)
    if "://" not in raw or not parts.scheme:
        raise EnvironmentConfigError(f"{name}: expected a URL like {schemes[0]}://..., got {_masked(raw)!r}")
    if parts.scheme not in schemes:
        raise EnvironmentConfigError(
            f"{name}: unsupported scheme {parts.scheme!r} (use one of: {', '.join(schemes)})"
        )
    try:
        parts.port  # noqa: B018 - urlsplit validates the port lazily
    except ValueError:
        hint = (
            " (characters # / ? @ : in a password are written percent-encoded: %23 %2F %3F %40 %3A)"
            if _PASSWORD.match(raw)
            else ""
        )
        raise EnvironmentConfigError(
            f"{name}: the port in {_masked(raw)!r} is not a number in 0-65535{hint}"
        ) from None
    return parts


def database(default_sqlite: Path) -> dict:
    """DATABASE_URL -> Django DATABASES['default']."""
    raw = os.environ.get("DATABASE_URL", "").strip()
    if not raw:
        return _sqlite(default_sqlite)
    parts = _split_url("DATABASE_URL", raw, ("postgres", "postgresql", "sqlite"))
    if parts.scheme == "sqlite":
        db_path = unquote(parts.path)
        if not db_path or db_path == "/":
            raise EnvironmentConfigError(
                "DATABASE_URL: sqlite URL needs a file path, e.g. sqlite:///var/db.sqlite3"
            )
        # sqlite:///relative/path and sqlite:////absolute/path, as dj-database-url reads them.
        return _sqlite(Path(db_path[1:]))
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise EnvironmentConfigError(
            f"DATABASE_URL: no database name in {_masked(raw)!r} (postgres://user@host:5432/NAME)"
        )
    if not parts.hostname:
        raise EnvironmentConfigError(f"DATABASE_URL: no host in {_masked(raw)!r}")
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname,
        "PORT": str(parts.port or 5432),
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": options,
    }


def _sqlite(db_path: Path) -> dict:
    db_path = Path(db_path)
    if not db_path.is_absolute():
        db_path = REPO_ROOT / db_path
    db_path.parent.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(db_path),
        # WAL and a busy timeout: the web server and the workers write at the same time.
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        },
    }


def broker(default_folder: Path) -> tuple[str, dict]:
    """CELERY_BROKER_URL -> (broker_url, broker_transport_options).

    Unset: kombu's filesystem transport under var/, so nothing needs a server.
    """
    raw = os.environ.get("CELERY_BROKER_URL", "").strip()
    if not raw:
        folders = {name: default_folder / name for name in ("queue", "processed", "control")}
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        return "filesystem://", {
            "data_folder_in": str(folders["queue"]),
            "data_folder_out": str(folders["queue"]),
            "processed_folder": str(folders["processed"]),
            "control_folder": str(folders["control"]),
            "store_processed": False,
        }
    parts = _split_url("CELERY_BROKER_URL", raw, ("redis", "rediss", "amqp", "amqps", "filesystem"))
    if parts.scheme in ("redis", "rediss"):
        if not parts.hostname:
            raise EnvironmentConfigError(f"CELERY_BROKER_URL: no host in {_masked(raw)!r}")
        db = parts.path.lstrip("/")
        if db and not (db.isascii() and db.isdigit()):
            raise EnvironmentConfigError(f"CELERY_BROKER_URL: redis database must be a number, got {db!r}")
    return raw, {}


def email() -> dict:
    """EMAIL_URL -> Django email settings. Unset: messages are written as files under var/mail/."""
    raw = os.environ.get("EMAIL_URL", "").strip()
    if not raw:
        return {
            "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
            "EMAIL_FILE_PATH": str(var_dir() / "mail"),
        }
    parts = _split_url("EMAIL_URL", raw, ("smtp", "smtp+tls", "smtps", "console", "file"))
    if parts.scheme == "console":
        return {"EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}
    if parts.scheme == "file":
        folder = unquote(parts.path)
        if not folder:
            raise EnvironmentConfigError("EMAIL_URL: file URL needs a folder, e.g. file:///var/mail")
        return {
            "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
            "EMAIL_FILE_PATH": folder,
        }
    if not parts.hostname:
        raise EnvironmentConfigError(
            f"EMAIL_URL: no host in {_masked(raw)!r} (smtp://user:password@host:587)"
        )
    default_port = {"smtp": 25, "smtp+tls": 587, "smtps": 465}[parts.scheme]
    return {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": parts.hostname,
        "EMAIL_PORT": parts.port or default_port,
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_TLS": parts.scheme == "smtp+tls",
        "EMAIL_USE_SSL": parts.scheme == "smtps",
        "EMAIL_TIMEOUT": 20,
    }
