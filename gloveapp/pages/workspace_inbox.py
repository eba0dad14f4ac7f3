"""The inbox page at `/inbox/` (Linear-style), its partials, replies, and Notifications.

An edge: each view checks who asks (the owner; anyone else gets a 404), calls a selector or
a service and renders. The page works without JavaScript (rows are links, the reply bar is a
form); `static/glove/workspace_inbox.js` adds keyboard, live updates, undo and paging (the
list navigation and the sockets from `list_nav.js`, shared with `/approvals/`).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_POST

from gloveapp.live.replay import current_cursors
from gloveapp.live.streams import workspace_stream
from gloveapp.turns import public as turns
from inbox.workspaces import render as doc_render
from inbox.workspaces import selectors, services
from inbox.workspaces.models import WorkspaceReply

PAGE_SIZE = 50


def _plain_lines(comments: str) -> list[str]:
    lines = []
    for line in comments.splitlines():
        stripped = line.strip().lstrip("#>*- ").replace("**", "").replace("`", "").strip()
        if stripped:
            lines.append(stripped)
    return lines


def _row(entry: Any, read_at: Any) -> dict:
    """A list row: the entry's subject (the first line of its comment, else its first doc's
    name), then the workspace's label and what follows (the next line, or the docs)."""
    lines = _plain_lines(entry.comments or "")
    docs = ""
    if entry.docs:
        more = len(entry.docs) - 1
        docs = f"📄 {entry.docs[0]['path']}" + (f" · +{more} more" if more else "")
    if lines:
        subject, rest = lines[0], (lines[1] if len(lines) > 1 else docs)
    else:
        subject = os.path.basename(entry.docs[0]["path"]) if entry.docs else "(empty)"
        rest = docs
    label = entry.workspace_label or entry.workspace_id
    return {
        "entry": entry,
        "id": str(entry.pk),
        "subject": subject,
        "label": label,
        "preview": f"{label} · {rest}" if rest else label,
        "read": read_at is not None,
        "when": datetime.fromtimestamp(entry.ts / 1000, tz=UTC),
    }


SHOW_LABELS = {"all": "All", "unread": "Unread", "answered": "Answered"}


def _show(request: HttpRequest) -> str:
    show = request.GET.get("show") or "all"
    return show if show in selectors.ENTRY_FILTERS else "all"


def _rows(user: Any, before: Any = None, show: str = "all") -> tuple[list[dict], bool]:
    page = selectors.history(user=user, limit=PAGE_SIZE, before=before, show=show)
    return [_row(e, page.read_at.get(e.pk)) for e in page.entries], page.has_more


def _detail_context(user: Any, entry: Any) -> dict:
    workspace = entry.workspace
    max_bytes = int(getattr(settings, "GLOVE_WORKSPACE_FILE_MAX_BYTES", 1024 * 1024))
    docs = [
        doc_render.render_doc(
            files_url=reverse("workspace-file", args=[workspace.pk]),
            root=workspace.root,
            rel=doc["path"],
            max_bytes=max_bytes,
            root_identity=workspace.root_identity,
        )
        for doc in entry.docs
    ]
    unread = not selectors.entry_is_read(entry, user)
    return {
        "entry": entry,
        "row": _row(entry, None if unread else True),
        "entry_unread": unread,
        "workspace": workspace,
        "docs": docs,
        "comments_html": _comments_html(entry.comments or ""),
        "replies": selectors.entry_replies(entry),
        "download_max_bytes": doc_render.download_max_bytes(),
    }


def _comments_html(comments: str) -> str:
    if not comments:
        return ""
    try:
        return doc_render.bounded_markdown_html(comments)
    except doc_render.TooComplex:
        return format_html('<pre class="doc__text">{}</pre>', comments)


@login_required
@require_GET
def inbox_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    if request.GET.get("part") == "rows":
        try:
            rows, has_more = _rows(user, before=request.GET.get("before"), show=_show(request))
        except selectors.BadParameter:
            rows, has_more = [], False
        response = render(request, "inbox/_entry_rows.html", {"rows": rows})
        response["X-Has-More"] = "1" if has_more else "0"
        return response
    # The cursor is read before the state it belongs to: an event committed in between is
    # replayed to the page, never lost.
    workspaces = selectors.owned_workspace_ids(user)
    last_event_ids = current_cursors({str(id_): workspace_stream(str(id_)) for id_ in workspaces})
    show = _show(request)
    rows, has_more = _rows(user, show=show)
    selected = None
    wanted = request.GET.get("entry")
    if wanted:
        entry = selectors.owned_entry(user, wanted)
        if entry is not None:
            # Shown, not marked: a GET changes nothing. The detail POSTs its read mark
            # (htmx, on load; a button without JavaScript).
            selected = _detail_context(user, entry)
    return render(
        request,
        "inbox/workspace_inbox.html",
        {
            "rows": rows,
            "has_more": has_more,
            "selected": selected,
            "workspace_ids": workspaces,
            "last_event_ids": last_event_ids,
            "unread": selectors.unread_count(user),
            "show": show,
            "shows": list(SHOW_LABELS.items()),
        },
    )


@login_required
@require_GET
def entry_detail(request: HttpRequest, entry_id: str) -> HttpResponse:
    entry = selectors.owned_entry(request.user, entry_id)
    if entry is None:
        raise Http404("No such entry.")
    if request.GET.get("part") == "row":
        page_read = entry.reads.filter(user=request.user).values_list("read_at", flat=True)
        return render(request, "inbox/_entry_rows.html", {"rows": [_row(entry, page_read.first())]})
    return render(request, "inbox/_entry_detail.html", _detail_context(request.user, entry))


@login_required
@require_POST
def entry_read(request: HttpRequest, entry_id: str) -> HttpResponse:
    """Mark the entry read for this user (the detail's htmx POST, or its button)."""
    entry = selectors.owned_entry(request.user, entry_id)
    if entry is None:
        raise Http404("No such entry.")
    services.entry_mark_read(entry=entry, user=request.user)
    if request.htmx:
        return HttpResponse("")  # the button goes (hx-swap="delete")
    return HttpResponseRedirect(f"{reverse('workspace-inbox')}?entry={entry.pk}", status=303)


def reply_text(entry: Any, text: str) -> str:
    """The reply as the chat receives it: the entry quoted, then what the user wrote."""
    label = entry.workspace_label or entry.workspace_id
    when = datetime.fromtimestamp(entry.ts / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    quoted = [f"Inbox entry from {label} ({when}):"]
    quoted += (entry.comments or "").strip().splitlines()[:20]
    quoted += [f"📄 {doc['path']}" for doc in entry.docs]
    body = "\n".join("> " + line if line else ">" for line in quoted)
    return f"{body}\n\n{text}".strip()


@login_required
@require_POST
async def entry_reply(request: HttpRequest, entry_id: str) -> HttpResponse:
    """Store the reply on the entry's thread, for the workspace's agent: its MCP client reads
    it with `inbox_read`, or, when the workspace names one of the server's agents, that
    agent's session receives it as a turn at once."""
    user = await request.auser()
    entry = await sync_to_async(selectors.owned_entry)(user, entry_id)
    if entry is None:
        raise Http404("No such entry.")
    try:
        reply = await sync_to_async(services.entry_reply)(
            entry=entry, author=user, text=request.POST.get("text", "")
        )
    except services.EntryInvalid as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    workspace = entry.workspace
    if workspace.agent_name:
        session = await sync_to_async(services.workspace_reply_session)(workspace=workspace)
        try:
            await turns.submit_message(
                session_id=session.pk,
                text=reply_text(entry, reply.text),
                user_id=user.pk,
                source="page",
            )
        except (turns.QueueFull, turns.TurnLimitReached) as exc:
            # Stored on the thread all the same; the agent has not received it yet.
            return HttpResponse(str(exc), status=429, content_type="text/plain")
        await sync_to_async(services.reply_mark_delivered)(
            reply=reply, to=WorkspaceReply.DeliveredTo.AGENT
        )
    response = HttpResponseRedirect(f"{reverse('workspace-inbox')}?entry={entry.pk}")
    response.status_code = 303
    return response


@login_required
@require_GET
def notifications_page(request: HttpRequest) -> HttpResponse:
    notifications = selectors.notifications_of(request.user)
    return render(request, "inbox/notifications.html", {"notifications": notifications})
