"""The session websocket: `/ws/sessions/<session_id>/?last_event_id=<cursor>`.

On connect it checks who is asking, joins the stream's groups, replays the stored events
after the client's cursor, then forwards live ones. Every frame is JSON
`{"id": int | null, "type": str, "payload": dict}`; `id` is null for transient events and
for `resync`, which tells the client to reload its state instead of catching up.

Close codes in the 44xx range are final (a client should not reconnect):
4401 not logged in, 4403 not the owner (nor staff), 4404 no such session. A socket is
authorised only when it connects, so when its session is deleted it gets the
`session.deleted` frame and is then closed with 4404: nothing recorded later on that
stream reaches it.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from gloveapp.conversations.events import session_stream
from gloveapp.conversations.live.groups import local_stream_group, stream_group
from gloveapp.conversations.live.relay import ensure_relay_started
from gloveapp.conversations.live.replay import replay_after, session_watch_verdict

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
_VERDICT_CLOSE_CODES = {"forbidden": CLOSE_FORBIDDEN, "missing": CLOSE_NOT_FOUND}
# Stored events after which a socket's stream is gone for good (it is closed with 4404).
_FINAL_EVENTS = frozenset({"session.deleted"})


class StreamConsumer(AsyncJsonWebsocketConsumer):
    """Relays one event stream to one socket. Subclasses say which stream, and who may watch."""

    async def authorise(self, user) -> tuple[str | None, int | None]:
        """Return (stream, None) to accept, or (None, close code) to refuse."""
        raise NotImplementedError

    _ended = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._refuse(CLOSE_UNAUTHENTICATED)
            return
        stream, refusal = await self.authorise(user)
        if stream is None:
            await self._refuse(refusal)
            return

        # The relay must know where it starts, and the groups must be joined, before the
        # replay is read: then every event is in the replay or arrives live (or both,
        # deduplicated below), never neither. Accepting only now means a client without a
        # cursor gets everything that commits after its socket opened. Live events wait in
        # this consumer's channel until `connect` returns, so replayed frames go out first.
        await ensure_relay_started()
        self.groups = [stream_group(stream), local_stream_group(stream)]
        for group in self.groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        replay = await database_sync_to_async(replay_after)(stream, self._last_event_id())
        self._replayed = {frame["id"] for frame in replay.frames}
        for frame in replay.frames:
            await self.send_json(frame)
            if frame["type"] in _FINAL_EVENTS:
                await self._end()
                return
        if replay.resync is not None:
            await self.send_json(replay.resync)

    async def _end(self) -> None:
        """The stream is gone: stop relaying and close for good."""
        self._ended = True
        for group in self.groups:
            await self.channel_layer.group_discard(group, self.channel_name)
        await self.close(code=CLOSE_NOT_FOUND)

    async def _refuse(self, code: int) -> None:
        # Accept before closing: a browser reads the close code only of an accepted socket,
        # while a refused handshake looks like a network error that it would keep retrying.
        await self.accept()
        await self.close(code=code)

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        """Clients only listen; what they send is ignored (not even parsed)."""

    async def live_event(self, message: dict) -> None:
        """A stored event from this process's relay."""
        if self._ended:
            return
        if message["id"] in self._replayed:
            self._replayed.discard(message["id"])  # the relay sends each id only once
            return
        await self.send_json(
            {"id": message["id"], "type": message["event"], "payload": message["payload"]}
        )
        if message["event"] in _FINAL_EVENTS:
            await self._end()

    async def live_transient(self, message: dict) -> None:
        if self._ended:
            return
        await self.send_json({"id": None, "type": message["event"], "payload": message["payload"]})

    def _last_event_id(self) -> int | None:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        raw = (query.get("last_event_id") or [""])[0]
        try:
            return max(0, int(raw))
        except ValueError:
            return None


class SessionConsumer(StreamConsumer):
    async def authorise(self, user) -> tuple[str | None, int | None]:
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        verdict = await database_sync_to_async(session_watch_verdict)(
            user=user, session_id=session_id
        )
        if verdict != "allowed":
            return None, _VERDICT_CLOSE_CODES[verdict]
        return session_stream(session_id), None
