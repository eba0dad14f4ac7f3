"""Token authentication that remembers a token briefly, so a hot route pays no query for it.

DRF's `TokenAuthentication` reads the token and its user on every request: on the remote
store's routes that was one of two or three queries (and, measured, 18% of a GET's time).
Here a token seen in the last `GLOVE_TOKEN_CACHE_SECONDS` (default 5) is answered from
this process's memory. The cost: a deleted token or a deactivated user is refused by this
process within that many seconds, not at once (a token deleted through this process is
forgotten at once). 0 turns the cache off.

The header itself is read by DRF (`TokenAuthentication.authenticate`, which builds every
request's header map to find it); the key it found in a header is remembered, so a client
that sends the same header again is answered without reading it twice.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

# Bounded: a flood of distinct (valid) tokens cannot grow the process without limit.
MAX_ENTRIES = 10_000

_entries: dict[str, tuple[float, Any, Any]] = {}  # key -> (expires, user, token)
_keys: dict[str, str] = {}  # an Authorization header DRF accepted -> the key it read there
_lock = threading.Lock()


class CachedTokenAuthentication(TokenAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        header = request._request.META.get("HTTP_AUTHORIZATION")
        key = _keys.get(header) if header else None
        if key is not None:
            return self.authenticate_credentials(key)
        found = super().authenticate(request)
        if found is not None and header:
            with _lock:
                if len(_keys) >= MAX_ENTRIES:
                    _keys.clear()
                _keys[header] = found[1].key
        return found

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        ttl = getattr(settings, "GLOVE_TOKEN_CACHE_SECONDS", 5)
        now = time.monotonic()
        entry = _entries.get(key)
        if entry is not None and entry[0] > now:
            return entry[1], entry[2]
        # Refusals (unknown key, inactive user) are never cached: they raise here.
        user, token = super().authenticate_credentials(key)
        if ttl > 0:
            with _lock:
                if len(_entries) >= MAX_ENTRIES:
                    _entries.clear()
                _entries[key] = (now + ttl, user, token)
        return user, token


def remembered_user(key: str) -> Any:
    """The user of a token this process checked less than the TTL ago, else None (no query:
    the caller lets DRF's authentication answer instead)."""
    entry = _entries.get(key)
    if entry is not None and entry[0] > time.monotonic():
        return entry[1]
    return None


def forget_token(key: str) -> None:
    with _lock:
        _entries.pop(key, None)


def forget_all_tokens() -> None:
    with _lock:
        _entries.clear()


@receiver(post_delete, sender=Token)
def _token_deleted(sender: type, instance: Token, **kwargs: Any) -> None:
    forget_token(instance.key)


@receiver(post_save, sender=Token)
def _token_saved(sender: type, instance: Token, **kwargs: Any) -> None:
    forget_token(instance.key)


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
@receiver(post_delete, sender=settings.AUTH_USER_MODEL)
def _user_changed(sender: type, instance: Any, **kwargs: Any) -> None:
    # A deactivated or deleted user loses its cached tokens in this process at once.
    with _lock:
        for key in [k for k, (_, user, _) in _entries.items() if user.pk == instance.pk]:
            del _entries[key]
