"""API tokens: shown once, stored as a SHA-256 hash (tokens are long random strings, so a fast hash
is enough; a slow password hash would add latency to every API call)."""

import hashlib
import logging
import secrets
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import OperationalError, models, transaction
from django.db.models.functions import Lower
from django.utils import timezone

logger = logging.getLogger(__name__)
TOKEN_PREFIX = "elab_"
LAST_USED_PRECISION = timedelta(minutes=1)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _aware(value: datetime | None) -> datetime | None:
    """A datetime column read by a raw query, which skips the field's converters: SQLite gives it naive,
    in UTC as Django stores it there."""
    if value is not None and timezone.is_naive(value):
        return timezone.make_aware(value, UTC)
    return value


class ApiTokenQuerySet(models.QuerySet):
    def for_user(self, user):
        return self.filter(user=user)


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        constraints = [
            # The form refuses a name the user has; this holds when two submissions of it cross.
            models.UniqueConstraint("user", Lower("name"), name="one_token_name_per_user"),
        ]

    def __str__(self):
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def issue(cls, user, name: str) -> tuple["ApiToken", str]:
        """Create a token; the plain text is returned once and never stored."""
        plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, token_hash=hash_token(plain), hint=plain[:10])
        return token, plain

    @classmethod
    def authenticate(cls, plain: str):
        """The user owning this token, or None. Every API call with a token asks this: one raw query, which
        spares the ORM's compiling of a join (half of a millisecond of a 1,000-point ingest request)."""
        users = get_user_model().objects.raw(cls._user_of_token(), [hash_token(plain)])
        user = next(iter(users), None)
        if user is None or not user.is_active:
            return None
        now, last_used = timezone.now(), _aware(user.token_last_used_at)
        # A minute's precision is enough to tell tokens in use apart, and spares a write per request.
        if last_used is None or now - last_used > LAST_USED_PRECISION:
            try:
                with transaction.atomic():  # a savepoint when a caller's transaction is open
                    cls.objects.filter(pk=user.token_id).update(last_used_at=now)
            except OperationalError:  # bookkeeping: a busy database (SQLite's lock) must not fail the call
                logger.warning("token %s: last use not recorded, the database is busy", user.token_id)
        return user

    @classmethod
    def _user_of_token(cls) -> str:
        users = get_user_model()._meta
        return (
            f"SELECT u.*, t.id AS token_id, t.last_used_at AS token_last_used_at FROM {users.db_table} u "
            f"JOIN {cls._meta.db_table} t ON t.user_id = u.{users.pk.column} WHERE t.token_hash = %s"
        )


class PasswordResetRequest(models.Model):
    """A reset asked for, by address and client, for a while: anyone may ask for anyone's reset, so the
    emails are limited (PasswordResetRequest.refusal) or one person could fill another's mailbox from this
    server's address."""

    # One email per address within this time (the one sent is still good); so many asks per client an hour.
    ADDRESS_INTERVAL = timedelta(minutes=5)
    CLIENT_PER_HOUR = 10
    KEPT = timedelta(days=1)

    address = models.CharField(max_length=254)
    client = models.CharField(max_length=45)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    @classmethod
    def ask(cls, address: str, client: str) -> str:
        """Record an ask and say what to do with it: "send", "again" (this address had an email within
        ADDRESS_INTERVAL: send nothing, say as ever that an email is on its way) or "refuse" (the client
        asked CLIENT_PER_HOUR times within the hour)."""
        now = timezone.now()
        address = address.strip().lower()
        with transaction.atomic():
            cls.objects.filter(created_at__lt=now - cls.KEPT).delete()
            if cls.objects.filter(client=client, created_at__gte=now - timedelta(hours=1)).count() >= (
                cls.CLIENT_PER_HOUR
            ):
                return "refuse"
            recent = cls.objects.filter(address=address, created_at__gte=now - cls.ADDRESS_INTERVAL).exists()
            cls.objects.create(address=address, client=client)
        return "again" if recent else "send"
