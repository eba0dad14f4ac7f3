"""Live updates: the event log (LiveEvent rows) relayed to websockets.

A change and the event announcing it commit together (see `events.record_event`). Each
server process runs one relay (`relay.py`) that tails the log and hands new rows to the
channel layer; `SessionConsumer` replays what a reconnecting client missed, then forwards
live events. Ephemeral events that are never stored (streamed text, tool progress, display
slots) go straight to the channel layer through `transient.py`.

Frames sent to the browser are JSON objects `{"id": int | null, "type": str, "payload": dict}`;
`id` is the LiveEvent id (the client's resume cursor) and null for transient events.

This package's `__init__` imports nothing so that `events.py` can import `live.outbox`
without pulling in the channel layer.
"""
