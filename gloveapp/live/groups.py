"""Channel-layer group names for event streams.

Group names allow only ASCII letters, digits, hyphens, underscores and periods, and fewer
than 100 characters, while stream names ("session:<id>") are free text: the name keeps a
sanitised prefix for people reading Redis, and a hash so distinct streams never share one.
"""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def stream_group(stream: str) -> str:
    """The group every consumer of `stream` joins, in any process: transient events."""
    readable = _UNSAFE.sub("_", stream)[:40]
    digest = hashlib.sha256(stream.encode("utf-8")).hexdigest()[:16]
    return f"live.{readable}.{digest}"
