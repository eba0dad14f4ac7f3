"""Who may answer an inbox item: the one home of this rule.

An item's answer is not its session owner's to write (the agent asked for it on their
behalf): staff answer it (the admin, `POST /api/inbox/resolve`, the remote store's update),
or a signed webhook, which `inbox.webhooks` authenticates on its own.
"""

from __future__ import annotations

from typing import Any


def may_resolve(user: Any) -> bool:
    """May this signed-in person (not a webhook) resolve or answer inbox items?"""
    return bool(user is not None and user.is_authenticated and user.is_staff)
