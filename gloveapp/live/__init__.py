"""The live app: the event log of every stream, relayed to websockets.

Streams are strings (`streams.py`): `session:<id>`, `workspace:<id>`, `mesh:<agent id>`. A
change and the event announcing it commit together (`eventlog.record_event(stream=...)`,
called inside the caller's transaction). Each server process runs one relay (`relay.py`)
that tails the log and hands new rows straight to this process's own sockets watching that
stream (not through the channel layer; every process's relay does the same for its own
sockets). Ephemeral events that are never stored (streamed text, tool progress, display
slots) go through the channel layer's stream group (`transient.py`), so they reach the
stream's sockets in every process that shares it. `consumers.StreamConsumer` is the generic
websocket: replay from `last_event_id`, `resync` when that is impossible, then live events;
a subclass names its stream and says who may watch it (`authorise`).

Frames sent to the browser are JSON objects `{"id": int | null, "type": str, "payload": dict}`;
`id` is the event's number in its stream (`LiveEvent.seq`, the client's resume cursor; the
table's key stays internal) and null for transient events.

Nothing here imports a feature app (conversations, inbox, mesh) or an edge; the import
contract in pyproject.toml checks it. This package's `__init__` imports nothing so that
`eventlog.py` can import `live.outbox` without pulling in the channel layer.
"""
