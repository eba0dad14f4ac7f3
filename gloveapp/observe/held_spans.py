"""A turn attempt's spans are exported with its `invoke_agent` span, never before it.

An attempt whose worker dies (SIGKILL, a lost machine) never ends its `invoke_agent`: the
spans of its model and tool calls that the batch processor had already exported arrived
with a parent that never would, and a trace viewer showed them hanging from nothing. Here
the spans under an open `invoke_agent` span (its whole subtree, in this process) are held
until it ends, then handed on together; if the process dies first, none of them is sent:
the attempt is absent from the trace, and the retry's `glove.retry` span names the dead
worker. An attempt that parks ends its span, so a long wait on a person holds nothing.

Bounded: past `MAX_HELD` spans under one attempt the rest go on as they end (a turn that
large is rare; its early spans may then be orphaned if its worker dies). Django-free.
"""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor

MAX_HELD = 2000
ROOT_OPERATION = "invoke_agent"


class HoldAttemptSpans(SpanProcessor):
    """A span processor in front of `inner` (the batch exporter's): see the module. A
    subagent's `invoke_agent` under an attempt is held with the attempt's."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._held: dict[int, list[Any]] = {}  # open invoke_agent span id -> ended spans under it
        self._root_of: dict[int, int] = {}  # open span id -> the open invoke_agent above it

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        own = span.get_span_context().span_id
        parent = span.parent.span_id if span.parent is not None else None
        with self._lock:
            if parent is not None:
                root = parent if parent in self._held else self._root_of.get(parent)
                if root is not None:
                    self._root_of[own] = root
            if (span.attributes or {}).get("gen_ai.operation.name") == ROOT_OPERATION:
                self._held[own] = []
        self.inner.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Any) -> None:
        self.inner._on_ending(span)

    def on_end(self, span: Any) -> None:
        own = span.context.span_id
        with self._lock:
            done = [*self._held.pop(own, ()), span]
            root = self._root_of.pop(own, None)
            above = self._held.get(root) if root is not None else None
            if above is not None and len(above) + len(done) <= MAX_HELD:
                above.extend(done)
                return
        for ended in done:
            self.inner.on_end(ended)

    def shutdown(self) -> None:
        # What is still held belongs to attempts that never ended: not sent (orphans).
        with self._lock:
            self._held.clear()
            self._root_of.clear()
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
