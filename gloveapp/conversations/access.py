"""Who may see, and who may speak in, a session: the one home of these rules.

Every edge asks here (the REST API, the pages, the chat websocket):
- the owner may see a session and speak in it;
- staff may see (read along), but not speak for a user;
- the raw JSON of its tool calls is for staff; its owner reads them as the page shows them;
- anyone else learns nothing more than "no such session" (the same 404 / close code as for
  an id that does not exist), so ids do not leak.

And which session an id in a URL names: for its owner, the session they hold under that
`key` (ids are per owner, see `Session`); for staff reading along, failing that, the session
whose global `id` it is. Every owner-facing edge resolves its id here and passes the
session's `id` on; `address_of` is the id to show back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from django.conf import settings
from django.db import transaction
from django.http import Http404

from gloveapp.conversations.models import RetiredSessionKey, Session
from gloveapp.conversations.services import DuplicateSession, SessionGone, session_create
from gloveapp.core import input_rules
from gloveapp.lib.db.prepared import prepared_cursor

Verdict = Literal["allowed", "forbidden", "missing"]


def _unusable_id(session_id: str) -> bool:
    return not input_rules.could_name_a_row(session_id, max_length=input_rules.MAX_ID)


def may_see(user: Any, session: Session) -> bool:
    return may_speak(user, session) or bool(user.is_staff)


def may_see_tool_data(user: Any) -> bool:
    """May `user` read the raw data of a session's tool calls (their arguments and results
    as JSON)? Staff only: the customer reads what the page shows of a call (its label, its
    summary in their words, its state, a tool's own rendering of its result), never the JSON
    behind it, which may hold what only staff see (an approval's staff-only arguments). The
    chat page's tool cards and the streamed tool frames (`tool_frames`) both ask here."""
    return bool(getattr(user, "is_staff", False))


def may_speak(user: Any, session: Session) -> bool:
    return session.owner_id is not None and session.owner_id == user.pk


def address_of(user: Any, session: Session) -> str:
    """The id `user` names `session` by: its owner's key for the owner, else its global id."""
    return session.key if may_speak(user, session) else session.id


def _find(user: Any, session_id: str) -> Session | None:
    """The session `session_id` names for `user` (see the module's docstring), or None."""
    if _unusable_id(session_id):
        return None
    owner_id = getattr(user, "pk", None)
    if owner_id is not None:
        session = Session.objects.filter(owner_id=owner_id, key=session_id).first()
        if session is not None:
            return session
    if getattr(user, "is_staff", False):
        return Session.objects.filter(pk=session_id).first()
    return None


def viewable_session(user: Any, session_id: str) -> Session:
    """The session if `user` may see it; otherwise the same 404 as for no session."""
    session = _find(user, session_id)
    if session is None or not may_see(user, session):
        raise Http404("Session not found.")
    return session


def owned_session(user: Any, session_id: str) -> Session:
    """The session its owner `user` holds under `session_id` (their key); otherwise the
    same 404 as for no session."""
    owner_id = getattr(user, "pk", None)
    if owner_id is None or _unusable_id(session_id):
        raise Http404("Session not found.")
    try:
        return Session.objects.get(owner_id=owner_id, key=session_id)
    except Session.DoesNotExist:
        raise Http404("Session not found.") from None


def owned_session_id(user: Any, session_id: str) -> str:
    """`owned_session`'s global id, when the caller needs nothing else (one cheap query,
    a probe of the unique (owner, key) index).

    Raw SQL on purpose: it runs before every write of the remote store, and building the
    ORM's query cost more than the database answering it (profiled).
    """
    owner_id = getattr(user, "pk", None)
    if owner_id is not None and not _unusable_id(session_id):
        with prepared_cursor() as cursor:
            cursor.execute(_OWNED_SQL, [owner_id, session_id])
            row = cursor.fetchone()
            if row is not None:
                return row[0]
    raise Http404("Session not found.")


def unused_key(user: Any, session_id: str) -> bool:
    """Whether `session_id` is a key `user` may still create a session under by using it,
    for a caller that already found no session of theirs by it: GLOVE_LAZY_SESSIONS on, an
    account, a usable id, not retired."""
    if not settings.GLOVE_LAZY_SESSIONS:
        return False
    if getattr(user, "pk", None) is None or _unusable_id(session_id):
        return False
    return not RetiredSessionKey.objects.filter(owner_id=user.pk, key=session_id).exists()


def owned_or_unborn_session_id(user: Any, session_id: str) -> str | None:
    """For a read of the remote store: the global id of the owner's session `session_id`,
    or None when the owner never created one by that key (a GET then answers the empty
    history, nothing is created; a client such as glove-react's `useGlove` makes its session
    id up and reads at once). 404 for a caller without an account, an unusable id, or a key
    whose session its owner deleted (retired keys stay gone)."""
    try:
        return owned_session_id(user, session_id)
    except Http404:
        if not unused_key(user, session_id):
            raise
        return None


def owned_or_unborn_session(user: Any, session_id: str) -> Session:
    """For a read that needs the session's row: `owned_session`, or, for a key its owner
    has not used yet (see `owned_or_unborn_session_id`), an unsaved empty `Session` (zero
    counts). One query in the common case."""
    try:
        return owned_session(user, session_id)
    except Http404:
        if not unused_key(user, session_id):
            raise
        return Session()


def write_as_owner[T](
    user: Any, session_id: str, write: Callable[[str], T], *, remembered: bool = False
) -> T:
    """Every write of the remote store: `write(global id)` on the session `user` holds
    under `session_id` (their key); for a key they have not used yet, on the session this
    first write creates, in one transaction with the write, so a refused write (its
    ValueError) creates nothing. 404 as for a read.

    `remembered`: the id may come from this process's memory (`remembered_owned_session_id`,
    no query). Only for a `write` that checks the row is still this owner's session of this
    key and raises `SessionGone` otherwise (the append's `owned_by`): the id is then
    forgotten and looked up afresh."""
    if remembered:
        try:
            found: str | None = remembered_owned_session_id(user, session_id)
        except Http404:
            found = None
        if found is not None:
            try:
                return write(found)
            except SessionGone:
                forget_owned_session_id(user, session_id)
    found = owned_or_unborn_session_id(user, session_id)
    if found is not None:
        return write(found)
    with transaction.atomic():
        return write(owned_session_id_creating(user, session_id))


def owned_session_id_creating(user: Any, session_id: str) -> str:
    """For a write of the remote store: `owned_session_id`, creating the owner's session
    `session_id` on its first write, as Glove's own stores do. 404 as for a read."""
    if owned_or_unborn_session_id(user, session_id) is None:
        try:
            return session_create(owner=user, session_id=session_id).id
        except DuplicateSession:
            pass  # created meanwhile by a concurrent first write: found below
        except ValueError:
            raise Http404("Session not found.") from None
    return owned_session_id(user, session_id)


_OWNED_SQL = f'SELECT id FROM {Session._meta.db_table} WHERE owner_id = %s AND "key" = %s'

# (owner, key) -> global id, as this process last found them. A session's two names never
# change while it exists, and a deleted session's key is retired (its owner cannot create it
# again), so the pair can be remembered. The one exception, a key deleted before keys were
# retired and created again, names a new session: a write through the remembered id finds
# no row, and its caller forgets the pair and asks again (`forget_owned_session_id`).
_REMEMBERED: dict[tuple[Any, str], str] = {}
REMEMBERED_MAX = 10_000


def remembered_owned_session_id(user: Any, session_id: str) -> str:
    """`owned_session_id`, from this process's memory after the first time: for a write
    that fails on a session row gone meanwhile (the remote store's hot POST), never for a
    read, which would not notice a deleted session."""
    pair = (getattr(user, "pk", None), session_id)
    found = _REMEMBERED.get(pair)
    if found is None:
        found = owned_session_id(user, session_id)
        if len(_REMEMBERED) >= REMEMBERED_MAX:
            _REMEMBERED.clear()  # rare, and cheaper than an LRU's bookkeeping per request
        _REMEMBERED[pair] = found
    return found


def forget_owned_session_id(user: Any, session_id: str) -> None:
    _REMEMBERED.pop((getattr(user, "pk", None), session_id), None)


def forget_every_owned_session_id() -> None:
    _REMEMBERED.clear()


def usable_session_id(session_id: str) -> bool:
    """Could this id name a session row at all (a NUL or an overlong id cannot)?"""
    return not _unusable_id(session_id)


def session_watch_verdict(*, user: Any, session_id: str) -> tuple[Verdict, str | None]:
    """May `user` watch the live stream of the session `session_id` names for them? Same
    rule as `viewable_session`; with "allowed", the session's global id (its stream's)."""
    session = _find(user, session_id)
    if session is None:
        return "missing", None
    if not may_see(user, session):
        return "forbidden", None
    return "allowed", session.id
