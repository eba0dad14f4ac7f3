"""The generic stream websocket consumer (any stream: a session, a workspace inbox, a mesh agent).

A subclass (e.g. the chat page's `SessionConsumer` in `gloveapp.pages.consumers`) names the
stream and decides who may watch it. On connect it checks who is asking, joins the stream's group (transient events) and
registers with this process's relay (stored events), replays the stored events after the
client's cursor, then forwards live ones. Every frame is JSON
`{"id": int | null, "type": str, "payload": dict}`; `id` is the event's number in its stream
(1, 2, 3... per stream, the `last_event_id` to resume from), null for transient events and
for `resync`, which tells the client to reload its state instead of catching up.

Close codes in the 44xx range are final (a client should not reconnect):
4401 not logged in (also sent when the user logs out or changes their password), 4403
not allowed to watch, 4404 no such stream. A socket is
authorised only when it connects, so when its stream ends (a `final_events` frame) it is
then closed with 4404: nothing recorded later on that stream reaches it.

4503 means "not now": the server could not set the socket up (its database did not answer);
the close reason reads `retry_after=<seconds>` and the client reconnects after that long.
4429 means the user holds as many open streams as GLOVE_MAX_OPEN_STREAMS_PER_USER allows
(`live.open_streams`); it too reads `retry_after=<seconds>`.
Redis being away is not such a case: the handshake succeeds, stored events keep coming from
the event log (gloveapp/live/layers.py says what degrades).
"""

from __future__ import annotations

import contextlib
import logging
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from gloveapp.lib.db.outages import is_database_outage
from gloveapp.live import hub, open_streams
from gloveapp.live.auth import LOGIN_UNAVAILABLE
from gloveapp.live.groups import stream_group
from gloveapp.live.relay import StoredFrame, ensure_relay_started
from gloveapp.live.replay import replay_after
from gloveapp.live.signout import SIGNED_OUT, user_group
from gloveapp.live.streams import user_stream
from gloveapp.observe import metrics

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_UNAVAILABLE = 4503
CLOSE_TOO_MANY = 4429
RETRY_AFTER_SECONDS = 5

logger = logging.getLogger(__name__)


class StreamConsumer(AsyncJsonWebsocketConsumer):
    """Relays one event stream to one socket. Subclasses say which stream, and who may watch.

    `authorise` is the access hook; `final_events` names the stored events after which the
    stream is gone for good (the socket gets that frame, then is closed with 4404).
    """

    final_events: frozenset[str] = frozenset()

    async def authorise(self, user) -> tuple[str | None, int | None]:
        """Return (stream, None) to accept, or (None, close code) to refuse."""
        raise NotImplementedError

    _ended = False
    _cursor: int | None = None
    _relay = None
    _stream: str | None = None
    _counted: str | None = None

    async def connect(self) -> None:
        if self.scope.get(LOGIN_UNAVAILABLE):  # the login could not be read: not now
            await self._not_now("the login could not be read")
            return
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._refuse(CLOSE_UNAUTHENTICATED)
            return
        try:
            stream, refusal = await self.authorise(user)
        except Exception as error:
            if not is_database_outage(error):
                raise
            await self._not_now(f"{type(error).__name__}: {error}")
            return
        if stream is None:
            await self._refuse(refusal)
            return
        try:
            open_streams.take(user.pk)
        except open_streams.TooManyStreams as why:
            logger.info("live: refused a socket (%s)", why)
            await self._refuse(
                CLOSE_TOO_MANY, reason=f"retry_after={open_streams.RETRY_AFTER_SECONDS}"
            )
            return
        self._counted_user = user.pk

        # The relay must know where it starts, and this consumer must be registered with
        # it, before the replay is read: then every event is in the replay or arrives live
        # (or both, deduplicated below), never neither. Accepting only now means a client
        # without a cursor gets everything that commits after its socket opened. Stored
        # events the relay hands over meanwhile are held until the replay has gone out.
        try:
            self._relay = await ensure_relay_started()
        except Exception as error:  # the database is away: not now, rather than a 500
            await self._not_now(f"{type(error).__name__}: {error}")
            return
        self._stream = stream
        self._held: list[StoredFrame] | None = []
        # The user's group too: their logout or password change closes this socket.
        self._groups = [stream_group(stream), user_group(user.pk)]
        self._hub = hub.hub()
        if self._hub is not None:
            await self._hub.join(self._groups, self)
        self._relay.watch(stream, self)
        self._user_stream = user_stream(user.pk)
        self._relay.watch(self._user_stream, self)
        try:
            await self._accept_and_replay(stream)
        except Exception as error:
            # The replay's read failed (not now, rather than a 500), or the client left
            # while it was sent (then closing fails too, quietly).
            self._unwatch()
            logger.info("live: could not set a socket up (%s: %s)", type(error).__name__, error)
            with contextlib.suppress(Exception):
                await self._end(CLOSE_UNAVAILABLE, reason=f"retry_after={RETRY_AFTER_SECONDS}")
        except BaseException:
            self._unwatch()  # a consumer that failed here gets no disconnect
            raise

    async def __call__(self, scope, receive, send) -> None:
        # However the consumer ends (a disconnect, an error, its server shutting down), the
        # relay must stop handing it events.
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._unwatch()
            if self._counted_user is not None:
                open_streams.give_back(self._counted_user)
                self._counted_user = None
            if self._counted is not None:
                metrics.websocket_closed(self._counted)
                self._counted = None

    async def _accept_and_replay(self, stream: str) -> None:
        await self.accept()
        # Counted while open (glove_websockets_open), by kind: `session`, `approvals`...
        self._counted = stream.partition(":")[0]
        metrics.websocket_opened(self._counted)
        self._cursor = self._last_event_id()
        replay = await database_sync_to_async(replay_after)(stream, self._cursor)
        self._replayed = {frame["id"] for frame in replay.frames}
        for frame in replay.frames:
            await self.send_json(frame)
            if frame["type"] in self.final_events:
                await self._end()
                return
        if replay.resync is not None:
            await self.send_json(replay.resync)
        # Events held during the replay, in the relay's (id) order; more may be held while
        # these sends await, so drain until empty before going live.
        while self._held:
            await self._send_stored(self._held.pop(0))
            if self._ended:
                return
        self._held = None

    async def deliver_stored(self, frame: StoredFrame) -> None:
        """A stored event from this process's relay (called on the relay's task)."""
        if self._ended:
            return
        if frame.type == SIGNED_OUT:  # from the user's stream: never sent to the page
            await self._end(CLOSE_UNAUTHENTICATED)
            return
        if self._held is not None:
            self._held.append(frame)
            return
        await self._send_stored(frame)

    async def _send_stored(self, frame: StoredFrame) -> None:
        # The relay may hand over a replayed event even after the held ones are out: it
        # reads rows in batches and delivers them one by one, so a row read before this
        # socket's replay can reach it after.
        if frame.id in self._replayed:
            self._replayed.discard(frame.id)  # the relay delivers each id only once
            return
        if self._cursor is not None and frame.id <= self._cursor:
            # The client had it before it reconnected: this process's relay had not yet
            # reached the client's cursor when the socket opened.
            return
        await self.send(text_data=frame.text)  # encoded once by the relay for every socket
        if frame.type in self.final_events:
            await self._end()

    _user_stream: str | None = None
    _counted_user = None
    _hub: hub.Hub | None = None
    # Not Channels' `groups`, which it would join and leave per socket on the layer itself.
    _groups: list[str] = []

    async def layer_message(self, message: dict) -> None:
        """A transient frame or a sign-out, from the process's hub."""
        await self.dispatch(message)

    def _unwatch(self) -> None:
        if self._hub is not None:
            self._hub.leave(self._groups, self)
            self._hub = None
        if self._relay is not None:
            self._relay.unwatch(self._stream, self)
            if self._user_stream is not None:
                self._relay.unwatch(self._user_stream, self)

    async def _end(self, code: int = CLOSE_NOT_FOUND, reason: str | None = None) -> None:
        """The stream is gone (or the user's login ended): stop relaying and close for good."""
        self._ended = True
        self._unwatch()
        # Closed first: leaving the groups may wait on a Redis that is away, and a socket
        # whose login ended must close whatever happens after.
        if not self._accepted:
            await self.accept()
        await self.close(code=code, reason=reason)

    async def user_signed_out(self, message: dict) -> None:
        """The user logged out or changed their password (gloveapp.live.signout)."""
        if not self._ended:
            await self._end(CLOSE_UNAUTHENTICATED)

    async def _not_now(self, why: str) -> None:
        """Closed with 4503: the database did not answer while the socket was set up, and
        the client comes back after `retry_after` (a failed handshake would look like a
        network error to a browser, and a 4401 would tell it to give up)."""
        logger.warning("live: refused a socket for now (%s)", why)
        await self._refuse(CLOSE_UNAVAILABLE, reason=f"retry_after={RETRY_AFTER_SECONDS}")

    async def _refuse(self, code: int, reason: str | None = None) -> None:
        # Accept before closing: a browser reads the close code only of an accepted socket,
        # while a refused handshake looks like a network error that it would keep retrying.
        await self.accept()
        await self.close(code=code, reason=reason)

    _accepted = False

    async def accept(self, subprotocol=None, headers=None) -> None:
        await super().accept(subprotocol, headers)
        self._accepted = True

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        """Clients only listen; what they send is ignored (not even parsed)."""

    async def websocket_disconnect(self, message: dict) -> None:
        # Off the relay first: leaving the groups may wait on a Redis that is away, and
        # meanwhile the relay must not send to a socket that is closing.
        self._ended = True
        self._unwatch()
        await super().websocket_disconnect(message)

    async def disconnect(self, code) -> None:
        self._unwatch()

    async def dispatch(self, message: dict) -> None:
        # Channels runs `close_old_connections` in the shared sync thread before every
        # handler: one thread hop per socket per event, which profiling showed to be a
        # large share of fan-out. The transient handler never touches the database.
        if message["type"] == "live.transient":
            await self.live_transient(message)
            return
        if self.scope.get(LOGIN_UNAVAILABLE):
            # That thread may still be waiting on the database's pool for this socket's
            # login: a socket that is only told "not now" needs no database, and does not
            # queue behind it.
            handler = getattr(self, get_handler_name(message), None)
            if handler is not None:
                await handler(message)
            return
        await super().dispatch(message)

    async def live_transient(self, message: dict) -> None:
        if self._ended:
            return
        payload = self.shape_transient(message["event"], message["payload"])
        await self.send_json({"id": None, "type": message["event"], "payload": payload})

    def shape_transient(self, event_type: str, payload: dict) -> dict:
        """What this socket's watcher may read of a transient frame (a subclass cuts what
        only some watchers see); no database here, it runs for every frame."""
        return payload

    def _last_event_id(self) -> int | None:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        raw = (query.get("last_event_id") or [""])[0]
        try:
            return max(0, int(raw))
        except ValueError:
            return None
