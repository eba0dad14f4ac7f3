"""The shared cache every process counts in (rate limits, rendered docs): Redis when
`REDIS_URL` is set, else the database (table `glove_cache`, made by `live/0001`).

Redis is optional at run time (docs/explanation/architecture.md, "When things fail"): while it
is away, reads miss and writes are dropped, with a warning, so a throttle lets requests
through and a cached render is made again; nothing answers 500.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache.backends.redis import RedisCache

logger = logging.getLogger(__name__)

CACHE_TABLE = "glove_cache"
WARN_EVERY = 30.0


class ResilientRedisCache(RedisCache):
    """Django's Redis cache, riding out Redis being away (see the module's docstring)."""

    _last_warning = 0.0

    def _guard(self, operation: str, call: Any, fallback: Any) -> Any:
        try:
            return call()
        except Exception as error:  # redis-py's ConnectionError, TimeoutError, ...
            now = time.monotonic()
            if now - ResilientRedisCache._last_warning > WARN_EVERY:
                ResilientRedisCache._last_warning = now
                logger.warning("cache: Redis %s failed (%s); going on without it", operation, error)
            return fallback

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        return self._guard(
            "get", lambda: super(ResilientRedisCache, self).get(key, default, version), default
        )

    def get_many(self, keys: Any, version: Any = None) -> Any:
        return self._guard(
            "get_many", lambda: super(ResilientRedisCache, self).get_many(keys, version), {}
        )

    def set(self, *args: Any, **kwargs: Any) -> Any:
        return self._guard(
            "set", lambda: super(ResilientRedisCache, self).set(*args, **kwargs), None
        )

    def set_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._guard(
            "set_many", lambda: super(ResilientRedisCache, self).set_many(*args, **kwargs), []
        )

    def add(self, *args: Any, **kwargs: Any) -> Any:
        return self._guard(
            "add", lambda: super(ResilientRedisCache, self).add(*args, **kwargs), False
        )

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        return self._guard(
            "delete", lambda: super(ResilientRedisCache, self).delete(*args, **kwargs), False
        )

    def touch(self, *args: Any, **kwargs: Any) -> Any:
        return self._guard(
            "touch", lambda: super(ResilientRedisCache, self).touch(*args, **kwargs), False
        )

    def has_key(self, *args: Any, **kwargs: Any) -> Any:
        return self._guard(
            "has_key", lambda: super(ResilientRedisCache, self).has_key(*args, **kwargs), False
        )
