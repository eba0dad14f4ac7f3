"""Stream names: every audience of the event log is one string.

- `session:<session id>`  a conversation (its chat page, its owner's sockets)
- `workspace:<workspace id>`  a workspace inbox
- `mesh:<agent id>`  one agent of the mesh
- `approvals`  approval requests, for staff
- `handoffs:<group>`  chats handed to a group's people (the staff console; "" for no group)
- `user:<user pk>`  a user's own sockets: their login ended (never sent to a page)

The live app only stores and relays streams; which user may watch one is the feature's
business (a `StreamConsumer` subclass's `authorise`).
"""

from __future__ import annotations


def session_stream(session_id: str) -> str:
    return f"session:{session_id}"


def workspace_stream(workspace_id: str) -> str:
    return f"workspace:{workspace_id}"


def mesh_stream(agent_id: str) -> str:
    return f"mesh:{agent_id}"


def approvals_stream() -> str:
    """Every approval request's changes, for staff (the `/approvals/` page)."""
    return "approvals"


def handoffs_stream(group: str) -> str:
    """The changes of who answers the chats of one group, for its staff (`/handoffs/`)."""
    return f"handoffs:{group}"


def user_stream(user_pk: object) -> str:
    """A user's login ended (`live.signout`): every socket of theirs closes, whatever stream
    it watches; relayed from the event log, so no Redis outage can lose it."""
    return f"user:{user_pk}"
