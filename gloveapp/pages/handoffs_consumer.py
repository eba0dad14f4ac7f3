"""`/ws/handoffs/<group>/` (and `/ws/handoffs/` for chats of no group): the console's live
events of one group's chats, for that group's staff only (anyone else: the close code of a
stream that does not exist)."""

from __future__ import annotations

from channels.db import database_sync_to_async

from gloveapp.conversations.handoff import in_group
from gloveapp.live.consumers import CLOSE_NOT_FOUND, StreamConsumer
from gloveapp.live.streams import handoffs_stream


class HandoffsConsumer(StreamConsumer):
    async def authorise(self, user) -> tuple[str | None, int | None]:
        group = self.scope["url_route"]["kwargs"].get("group", "")
        if len(group) > 150 or not await database_sync_to_async(in_group)(user, group):
            return None, CLOSE_NOT_FOUND
        return handoffs_stream(group), None
