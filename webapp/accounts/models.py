"""API tokens: shown once, stored as a SHA-256 hash (tokens are long random strings, so a fast hash
is enough; a slow password hash would add latency to every API call)."""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "elab_"
LAST_USED_PRECISION = timedelta(minutes=1)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


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
        """The user owning this token, or None."""
        token = cls.objects.select_related("user").filter(token_hash=hash_token(plain)).first()
        if token is None or not token.user.is_active:
            return None
        now = timezone.now()
        # A minute's precision is enough to tell tokens in use apart, and spares a write per request.
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_PRECISION:
            cls.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user
