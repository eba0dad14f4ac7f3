"""The chat page's websocket: `/ws/sessions/<session_id>/?last_event_id=<cursor>`.

`<session_id>` is the id the page names the session by (its owner's key; staff: its id),
resolved by `gloveapp.conversations.access`.

The generic `StreamConsumer` (gloveapp.live) does the relaying; this edge says which stream
(`session:<id>`) and who may watch it (`gloveapp.conversations.access`). Close codes: 4401
not logged in, 4404 no such session *or* not the owner (nor staff): an outsider must not
learn from the code that an id is taken. When the session is deleted the socket gets the
`session.deleted` frame and is then closed with 4404. The tool frames a running turn streams
reach each watcher as they may read them (`conversations.tool_frames`).
"""

from __future__ import annotations

from channels.db import database_sync_to_async

from gloveapp.conversations.access import may_see_tool_data, session_watch_verdict
from gloveapp.conversations.tool_frames import shown_tool_frame
from gloveapp.live.consumers import CLOSE_NOT_FOUND, StreamConsumer
from gloveapp.live.streams import session_stream

_VERDICT_CLOSE_CODES = {"forbidden": CLOSE_NOT_FOUND, "missing": CLOSE_NOT_FOUND}


class SessionConsumer(StreamConsumer):
    final_events = frozenset({"session.deleted"})

    _staff = False

    def shape_transient(self, event_type: str, payload: dict) -> dict:
        return shown_tool_frame(event_type, payload, staff=self._staff)

    async def authorise(self, user) -> tuple[str | None, int | None]:
        self._staff = may_see_tool_data(user)
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        verdict, stream_id = await database_sync_to_async(session_watch_verdict)(
            user=user, session_id=session_id
        )
        if verdict != "allowed" or stream_id is None:
            return None, _VERDICT_CLOSE_CODES.get(verdict, CLOSE_NOT_FOUND)
        return session_stream(stream_id), None
