"""`/ws/approvals/`: approval requests' live events, for staff only."""

from __future__ import annotations

from gloveapp.approvals.access import is_approver
from gloveapp.live.consumers import CLOSE_NOT_FOUND, StreamConsumer
from gloveapp.live.streams import approvals_stream


class ApprovalsConsumer(StreamConsumer):
    async def authorise(self, user) -> tuple[str | None, int | None]:
        if not is_approver(user):
            return None, CLOSE_NOT_FOUND
        return approvals_stream(), None
