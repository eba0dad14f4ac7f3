"""The event loop of the long-running async commands (`turn_worker`, `run_agent`).

uvloop where it is installed (it comes with `uvicorn[standard]`) and GLOVE_UVLOOP is on: a
turn worker's loop hands every database call to a thread and back, and a mesh peer's sends
are one Redis command each; uvloop's futures, thread hand-offs and socket writes cost less
than asyncio's own (measured: bench/mesh.py over Redis, bench/turns.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from django.conf import settings


def run(main: Coroutine[Any, Any, Any]) -> Any:
    if settings.GLOVE_UVLOOP:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return asyncio.run(main, loop_factory=uvloop.new_event_loop)
    return asyncio.run(main)
