"""Every state change of the workspace inbox, each in one transaction with its live event.

Edges (MCP tools, the REST API, the page, the admin, management commands) call these and
nothing else to change workspaces, entries, read state or notifications.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from gloveapp.agents.config import get_agent_spec
from gloveapp.conf import PUBLIC_URL_DEFAULT
from gloveapp.core.input_rules import unstorable_text_problem
from gloveapp.live.eventlog import record_event
from gloveapp.live.streams import workspace_stream
from inbox.workspaces import paths
from inbox.workspaces.models import (
    Notification,
    Workspace,
    WorkspaceEntry,
    WorkspaceEntryRead,
    WorkspaceReply,
)

MAX_DOCS = 20
MAX_COMMENTS_CHARS = 20_000
MAX_LABEL_CHARS = 200
MAX_NOTIFICATION_CHARS = 2_000
MAX_REPLY_CHARS = 10_000
MAX_REPLIES_PER_READ = 50
TOKEN_PREFIX = "gws_"

# The seed's validation messages (spec §2.2), without the name of OpenAlice's store class;
# every error names the field it is about.
AT_LEAST_ONE = "at least one of docs or comments must be present"
NON_EMPTY_PATH = "each doc must have a non-empty `path` string"


class EntryInvalid(ValueError):
    """A push refused before anything was stored; the message starts with the field."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


# `make run` notes where it serves in this file beside manage.py, so that a command run from
# another shell (create_workspace) prints URLs of that server, not of the default port.
SERVED_URL_FILE = ".make-run-url"


def public_url() -> str:
    """The server's URL as agents reach it: `GLOVE_PUBLIC_URL` when set (in the environment
    or the settings), else where `make run` last served, else the default."""
    configured = settings.GLOVE_PUBLIC_URL
    if os.environ.get("GLOVE_PUBLIC_URL") or configured != PUBLIC_URL_DEFAULT:
        return configured
    try:
        served = (settings.BASE_DIR / SERVED_URL_FILE).read_text().strip()
    except (OSError, AttributeError, TypeError):
        return configured
    return served if served.startswith(("http://", "https://")) else configured


def mcp_url(base_url: str, workspace_id: str) -> str:
    """Where a workspace's agents reach its MCP server."""
    return f"{base_url.rstrip('/')}/mcp/{workspace_id}"


def now_ms() -> int:
    return int(time.time() * 1000)


# -- wire shapes --------------------------------------------------------------------------


def entry_wire(entry: WorkspaceEntry, *, read_at: Any = None, with_read: bool = False) -> dict:
    """The seed's entry object; keys without a value are absent, as in its JSONL."""
    wire: dict[str, Any] = {
        "id": str(entry.id),
        "ts": entry.ts,
        "workspaceId": entry.workspace_id,
    }
    if entry.workspace_label:
        wire["workspaceLabel"] = entry.workspace_label
    if entry.docs:
        wire["docs"] = [{"path": doc["path"]} for doc in entry.docs]
    if entry.comments is not None:
        wire["comments"] = entry.comments
    if with_read:
        wire["readAt"] = read_at.isoformat() if read_at else None
    return wire


# -- workspaces -----------------------------------------------------------------------------


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _checked_agent(agent_name: str) -> str:
    agent_name = (agent_name or "").strip()
    if agent_name:
        try:
            get_agent_spec(agent_name)
        except ImproperlyConfigured:
            raise ValueError(f"agent: no agent named {agent_name!r} in GLOVE_AGENTS") from None
    return agent_name


def workspace_create(
    *, label: str, root: str, owner: Any, agent_name: str = ""
) -> tuple[Workspace, str]:
    """Create a workspace; returns it and its bearer token, which is never stored in clear.
    `agent_name`: see `workspace_set_agent`."""
    agent_name = _checked_agent(agent_name)
    label = (label or "").strip()
    if not label or len(label) > MAX_LABEL_CHARS or unstorable_text_problem(label):
        raise ValueError(f"label: must be 1 to {MAX_LABEL_CHARS} characters")
    if not root or unstorable_text_problem(root):
        raise ValueError("root: must be a folder path")
    real_root = os.path.realpath(os.path.expanduser(root))
    if not os.path.isdir(real_root):
        raise ValueError(f"root: not a folder: {root}")
    token = _new_token()
    device, inode = paths.folder_identity(real_root)
    with transaction.atomic():
        workspace = Workspace.objects.create(
            id="ws-" + secrets.token_hex(10),
            label=label,
            root=real_root,
            root_device=device,
            root_inode=inode,
            owner=owner,
            token_hash=_hash_token(token),
            agent_name=agent_name,
        )
    return workspace, token


def workspace_rotate_token(*, workspace: Workspace) -> str:
    """A new token for the workspace; the old one stops working at once."""
    token = _new_token()
    with transaction.atomic():
        Workspace.objects.filter(pk=workspace.pk).update(token_hash=_hash_token(token))
    workspace.token_hash = _hash_token(token)
    return token


def workspace_token_matches(workspace: Workspace, token: str | None) -> bool:
    if not token:
        return False
    return hmac.compare_digest(workspace.token_hash, _hash_token(token))


def workspace_set_agent(*, workspace: Workspace, agent_name: str) -> None:
    """Name one of the server's own agents to receive replies as turns ("" for the
    workspace's MCP client, the default)."""
    agent_name = _checked_agent(agent_name)
    with transaction.atomic():
        Workspace.objects.filter(pk=workspace.pk).update(agent_name=agent_name, session=None)
    workspace.agent_name, workspace.session_id = agent_name, None


def workspace_reply_session(*, workspace: Workspace) -> Any:
    """The session of the server agent the workspace names, which receives replies as
    turns; created the first time someone replies."""
    from gloveapp.conversations.models import Session
    from gloveapp.conversations.services import session_create

    with transaction.atomic():
        locked = Workspace.objects.select_for_update().get(pk=workspace.pk)
        if locked.session_id and Session.objects.filter(pk=locked.session_id).exists():
            return Session.objects.get(pk=locked.session_id)
        session = session_create(
            owner=locked.owner,
            agent_name=locked.agent_name or settings.GLOVE_DEFAULT_AGENT,
            title=f"Workspace: {locked.label}"[:200],
        )
        Workspace.objects.filter(pk=locked.pk).update(session=session)
    workspace.session_id = session.pk
    return session


# -- entries --------------------------------------------------------------------------------


def clean_push(*, workspace: Workspace, docs: Any, comments: Any) -> tuple[list[dict], str | None]:
    """Validate a push's arguments against the workspace folder; raise EntryInvalid."""
    if docs is None:
        docs = []
    if not isinstance(docs, list):
        raise EntryInvalid("docs", "must be an array of {path} objects")
    if len(docs) > MAX_DOCS:
        raise EntryInvalid("docs", f"at most {MAX_DOCS} documents per entry")
    if comments is not None and not isinstance(comments, str):
        raise EntryInvalid("comments", "must be a Markdown string")
    if comments is not None:
        if len(comments) > MAX_COMMENTS_CHARS:
            raise EntryInvalid("comments", f"at most {MAX_COMMENTS_CHARS} characters")
        if problem := unstorable_text_problem(comments):
            raise EntryInvalid("comments", f"must not contain {problem}")
    if not docs and (comments is None or not comments.strip()):
        raise EntryInvalid("docs", AT_LEAST_ONE)
    cleaned: list[dict] = []
    for index, doc in enumerate(docs):
        field = f"docs[{index}].path"
        if not isinstance(doc, dict):
            raise EntryInvalid(f"docs[{index}]", "each doc must be an object")
        path = doc.get("path")
        if not isinstance(path, str) or not path:
            raise EntryInvalid(field, NON_EMPTY_PATH)
        try:
            paths.check_existing_file(workspace.root, path, identity=workspace.root_identity)
        except paths.PathRefused as exc:
            raise EntryInvalid(field, str(exc)) from None
        except paths.FileMissing:
            raise EntryInvalid(field, f"no such file in the workspace: {path}") from None
        cleaned.append({"path": path})
    return cleaned, comments


def entry_push(*, workspace: Workspace, docs: Any = None, comments: Any = None) -> WorkspaceEntry:
    """Store one entry from the workspace's agent and announce it to the owner's pages."""
    cleaned_docs, cleaned_comments = clean_push(workspace=workspace, docs=docs, comments=comments)
    with transaction.atomic():
        entry = WorkspaceEntry.objects.create(
            ts=now_ms(),
            workspace=workspace,
            workspace_label=workspace.label,
            owner_id=workspace.owner_id,
            docs=cleaned_docs,
            comments=cleaned_comments,
        )
        record_event(
            stream=workspace_stream(workspace.pk),
            type="workspace.entry.pushed",
            payload={"entry": entry_wire(entry, with_read=True)},
        )
    return entry


def entry_delete(*, entry: WorkspaceEntry) -> bool:
    """Hard delete (the entry is a pointer; the work lives in the folder). False if gone."""
    with transaction.atomic():
        deleted, _ = WorkspaceEntry.objects.filter(pk=entry.pk).delete()
        if not deleted:
            return False
        record_event(
            stream=workspace_stream(entry.workspace_id),
            type="workspace.entry.deleted",
            payload={"id": str(entry.pk)},
        )
    return True


def entry_mark_read(*, entry: WorkspaceEntry, user: Any, read: bool = True) -> Any:
    """Set or clear the user's read mark; returns the read time (None when unread)."""
    with transaction.atomic():
        if read:
            mark, _ = WorkspaceEntryRead.objects.get_or_create(entry=entry, user=user)
            read_at = mark.read_at
        else:
            WorkspaceEntryRead.objects.filter(entry=entry, user=user).delete()
            read_at = None
        record_event(
            stream=workspace_stream(entry.workspace_id),
            type="workspace.entry.read",
            payload={"id": str(entry.pk), "readAt": read_at.isoformat() if read_at else None},
        )
    return read_at


# -- replies --------------------------------------------------------------------------------


def reply_wire(reply: WorkspaceReply) -> dict:
    """A reply as the workspace's agent and the pages read it."""
    return {
        "id": str(reply.id),
        "entryId": str(reply.entry_id),
        "ts": reply.ts,
        "from": reply.author.get_username() if reply.author else None,
        "text": reply.text,
        "deliveredTo": reply.delivered_to or None,
    }


def entry_reply(*, entry: WorkspaceEntry, author: Any, text: Any) -> WorkspaceReply:
    """Store the user's reply on the entry's thread, for the workspace's agent."""
    if not isinstance(text, str) or not text.strip():
        raise EntryInvalid("text", "write a reply first")
    if len(text) > MAX_REPLY_CHARS:
        raise EntryInvalid("text", f"at most {MAX_REPLY_CHARS} characters")
    if problem := unstorable_text_problem(text):
        raise EntryInvalid("text", f"must not contain {problem}")
    with transaction.atomic():
        reply = WorkspaceReply.objects.create(
            entry=entry,
            workspace_id=entry.workspace_id,
            author=author,
            text=text.strip(),
            ts=now_ms(),
        )
        record_event(
            stream=workspace_stream(entry.workspace_id),
            type="workspace.entry.replied",
            payload={"entryId": str(entry.pk), "reply": reply_wire(reply)},
        )
    return reply


def _mark_delivered(reply: WorkspaceReply, to: str) -> bool:
    # Conditional: of two readers racing (two MCP calls), one gets each reply.
    delivered = WorkspaceReply.objects.filter(pk=reply.pk, delivered_at__isnull=True).update(
        delivered_at=timezone.now(), delivered_to=to
    )
    if delivered:
        reply.delivered_to = to
        record_event(
            stream=workspace_stream(reply.workspace_id),
            type="workspace.reply.delivered",
            payload={"entryId": str(reply.entry_id), "id": str(reply.pk), "to": to},
        )
    return bool(delivered)


def reply_mark_delivered(*, reply: WorkspaceReply, to: str) -> bool:
    with transaction.atomic():
        return _mark_delivered(reply, to)


def replies_deliver(*, workspace: Workspace, limit: int = MAX_REPLIES_PER_READ) -> list[dict]:
    """The replies the workspace's MCP client has not read yet, oldest first, each marked
    delivered as it is handed out (each reply reaches one reader once)."""
    with transaction.atomic():
        waiting = list(
            WorkspaceReply.objects.filter(workspace=workspace, delivered_at__isnull=True)
            .select_related("author")
            .order_by("ts", "id")[:limit]
        )
        return [
            reply_wire(reply)
            for reply in waiting
            if _mark_delivered(reply, WorkspaceReply.DeliveredTo.MCP)
        ]


def replies_waiting(*, workspace: Workspace) -> int:
    return WorkspaceReply.objects.filter(workspace=workspace, delivered_at__isnull=True).count()


# -- legacy notifications -----------------------------------------------------------------


def notification_create(
    *, user: Any, text: Any, urgency: Any = "info", source: str = "manual", workspace: Any = None
) -> Notification:
    if not isinstance(text, str) or not text.strip():
        raise EntryInvalid("text", "must be a non-empty string")
    if len(text) > MAX_NOTIFICATION_CHARS or unstorable_text_problem(text):
        raise EntryInvalid(
            "text", f"at most {MAX_NOTIFICATION_CHARS} characters, no NUL or lone surrogates"
        )
    if urgency not in Notification.Urgency.values:
        raise EntryInvalid("urgency", "must be 'info' or 'important'")
    with transaction.atomic():
        return Notification.objects.create(
            user=user, text=text, urgency=urgency, source=source, workspace=workspace
        )
