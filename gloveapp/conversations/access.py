"""Who may see, and who may speak in, a session: the one home of these rules.

Every edge asks here (the REST API, the pages, the chat websocket):
- the owner may see a session and speak in it;
- staff may see (read along), but not speak for a user;
- anyone else learns nothing more than "no such session" (the same 404 / close code as for
  an id that does not exist), so ids do not leak.
"""

from __future__ import annotations

from typing import Any, Literal

from django.db import connection
from django.http import Http404

from gloveapp.conversations.models import Session
from gloveapp.core import input_rules

Verdict = Literal["allowed", "forbidden", "missing"]


def _unusable_id(session_id: str) -> bool:
    return not input_rules.could_name_a_row(session_id, max_length=input_rules.MAX_ID)


def may_see(user: Any, session: Session) -> bool:
    return may_speak(user, session) or bool(user.is_staff)


def may_speak(user: Any, session: Session) -> bool:
    return session.owner_id is not None and session.owner_id == user.pk


def viewable_session(user: Any, session_id: str) -> Session:
    """The session if `user` may see it; otherwise the same 404 as for no session."""
    if _unusable_id(session_id):
        raise Http404("Session not found.")
    try:
        session = Session.objects.get(pk=session_id)
    except Session.DoesNotExist:
        raise Http404("Session not found.") from None
    if not may_see(user, session):
        raise Http404("Session not found.")
    return session


def owned_session(user: Any, session_id: str) -> Session:
    """The session if `user` may speak in it (its owner); otherwise the same 404."""
    if _unusable_id(session_id):
        raise Http404("Session not found.")
    try:
        return Session.objects.get(pk=session_id, owner=user)
    except Session.DoesNotExist:
        raise Http404("Session not found.") from None


def owned_session_exists(user: Any, session_id: str) -> None:
    """`owned_session` when the caller needs only the check (one cheap query).

    Raw SQL on purpose: it runs before every write of the remote store, and building the
    ORM's EXISTS query cost more than the database answering it (profiled, issue 13).
    """
    owner_id = getattr(user, "pk", None)
    if owner_id is not None and not _unusable_id(session_id):
        with connection.cursor() as cursor:
            cursor.execute(_OWNED_SQL, [session_id, owner_id])
            if cursor.fetchone() is not None:
                return
    raise Http404("Session not found.")


_OWNED_SQL = f"SELECT 1 FROM {Session._meta.db_table} WHERE id = %s AND owner_id = %s"


def usable_session_id(session_id: str) -> bool:
    """Could this id name a session row at all (a NUL or an overlong id cannot)?"""
    return not _unusable_id(session_id)


def session_watch_verdict(*, user: Any, session_id: str) -> Verdict:
    """May `user` watch the session's live stream? Same rule as `viewable_session`."""
    if _unusable_id(session_id):
        return "missing"
    session = Session.objects.filter(id=session_id).only("owner_id").first()
    if session is None:
        return "missing"
    return "allowed" if may_see(user, session) else "forbidden"
