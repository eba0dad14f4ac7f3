"""Which paths are the A2A endpoints': read by gloveapp/asgi.py for every request, before
(and without) importing the server and its SDK."""

from __future__ import annotations

CARD_PATH = "/.well-known/agent-card.json"


def a2a_path(path: str) -> bool:
    """Whether `path` is one of the A2A endpoints (gloveapp/asgi.py routes it here)."""
    return path == CARD_PATH or path.startswith("/a2a/")
