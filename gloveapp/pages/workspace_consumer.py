"""`/ws/workspaces/<workspace_id>/`: a workspace's live inbox events, for its owner only."""

from __future__ import annotations

from channels.db import database_sync_to_async

from gloveapp.live.consumers import CLOSE_NOT_FOUND, StreamConsumer
from gloveapp.live.streams import workspace_stream
from inbox.workspaces.selectors import owned_workspace


def _owns(user, workspace_id: str) -> bool:
    return owned_workspace(user, workspace_id) is not None


class WorkspaceConsumer(StreamConsumer):
    async def authorise(self, user) -> tuple[str | None, int | None]:
        workspace_id = self.scope["url_route"]["kwargs"]["workspace_id"]
        # Another user's workspace is refused exactly like one that does not exist.
        if not await database_sync_to_async(_owns)(user, workspace_id):
            return None, CLOSE_NOT_FOUND
        return workspace_stream(workspace_id), None
