"""The HTMX chat pages.

Each view checks who asks, calls one entry point or service function and renders: the whole page,
or, when htmx asks (`request.htmx`), only the partial it targets. Every form also works as a
plain HTML form (a 303 back to the page), so the pages read and post without JavaScript.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from gloveapp.agents.config import AgentNotStartable, startable_agent
from gloveapp.conversations import access, idempotency
from gloveapp.conversations import selectors as conversation_selectors
from gloveapp.conversations import services as conversation_services
from gloveapp.conversations.kept_results import kept_chunks, kept_tool_result
from gloveapp.conversations.models import Session
from gloveapp.conversations.services import session_create
from gloveapp.core import input_rules
from gloveapp.lib import paging
from gloveapp.pages import context as pages
from gloveapp.turns import lifecycle, submit
from gloveapp.turns import public as turns

CHAT_TEMPLATE = "conversations/chat.html"
# Chats per page of the chat list (`/`).
CHAT_LIST_PAGE = 50
# The name its cursors are signed for: a cursor of another list is refused here.
CHATS_LISTED = "pages.chat-list"
MAX_MESSAGE_CHARS = 20_000


def _chat_url(session_id: str) -> str:
    """The chat page of a session as its owner names it (their key; see `access`)."""
    return reverse("chat", args=[session_id])


def _see_other(url: str) -> HttpResponseRedirect:
    response = HttpResponseRedirect(url)
    response.status_code = 303
    return response


@login_required
@require_GET
@vary_on_headers("HX-Request")
def session_list(request: HttpRequest) -> HttpResponse:
    """One page of the chat list (`CHAT_LIST_PAGE` chats, newest first); `?cursor=` names
    the next, and htmx asks for the rows alone when the "more" row scrolls into view."""
    try:
        cursor = paging.parse_cursor(request.GET.get("cursor"), listed=CHATS_LISTED)
    except paging.PageParamError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain")
    sessions, next_cursor = conversation_selectors.sessions_listed_for(
        request.user, limit=CHAT_LIST_PAGE, cursor=cursor
    )
    template = "conversations/session_list.html"
    if request.htmx and cursor is not None:
        template += "#rows"
    context = {
        "sessions": sessions,
        "cursor": cursor,
        "next_cursor": next_cursor.encode(CHATS_LISTED) if next_cursor else None,
    }
    return render(request, template, context)


@login_required
@require_POST
def session_new(request: HttpRequest) -> HttpResponse:
    # The form may name an agent (`agent`); the agents' access rule decides who may open it.
    agent_name = request.POST.get("agent", "") or settings.GLOVE_DEFAULT_AGENT
    try:
        startable_agent(agent_name, request.user)
    except AgentNotStartable as refused:
        return HttpResponse(f"agent: {refused}", status=400, content_type="text/plain")
    session = session_create(owner=request.user, agent_name=agent_name)
    if request.htmx:
        return HttpResponseClientRedirect(_chat_url(session.key))
    return _see_other(_chat_url(session.key))


@login_required
@require_GET
# One URL answers with the page or a partial: caches (and the back button) must tell them apart.
@vary_on_headers("HX-Request", "HX-Target")
def chat(request: HttpRequest, session_id: str) -> HttpResponse:
    """The chat page at its newest messages; `?before=<seq>` the page of older ones (the
    "earlier messages" link without JavaScript); `?from=<seq>` (a refresh of the page's
    history) everything it shows from that message on, within `HISTORY_WIDEST`."""
    session = access.viewable_session(request.user, session_id)
    try:
        before = paging.parse_seq(request.GET.get("before"), field="before")
        start = paging.parse_seq(request.GET.get("from"), field="from")
    except paging.PageParamError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain")
    context = pages.chat_context(session, user=request.user, before=before, start=start)
    target = request.htmx.target if request.htmx else None
    template = f"{CHAT_TEMPLATE}#{target}" if target in pages.PARTIALS else CHAT_TEMPLATE
    return render(request, template, context)


@login_required
@require_GET
def tool_result_download(request: HttpRequest, session_id: str, call_id: str) -> HttpResponse:
    """The whole of a tool result the conversation shows cut (`conversations.kept_results`):
    for whoever may see the session (its owner, staff); anyone else gets the same 404."""
    session = access.viewable_session(request.user, session_id)
    kept = kept_tool_result(session_id=session.pk, call_id=call_id)
    if kept is None:
        raise Http404("No whole result is kept for this call.")
    response = StreamingHttpResponse(kept_chunks(kept), content_type="application/json")
    response["Content-Length"] = str(kept.size)
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in kept.tool_name)[:80]
    response["Content-Disposition"] = f'attachment; filename="{name or "result"}-result.json"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_GET
def chat_history(request: HttpRequest, session_id: str) -> HttpResponse:
    """One page of a chat's history older than `before` (a seq), as the page's "earlier"
    loader swaps it in when it scrolls into view."""
    session = access.viewable_session(request.user, session_id)
    try:
        before = paging.parse_seq(request.GET.get("before"), field="before")
    except paging.PageParamError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain")
    if before is None:
        return HttpResponse("before: required.", status=400, content_type="text/plain")
    context = pages.history_context(session, user=request.user, before=before)
    return render(request, f"{CHAT_TEMPLATE}#earlier", context)


def _messages_partial(request: HttpRequest, session: Session) -> HttpResponse:
    # A sent message is listed under the history, queued or running, until its turn stores
    # it: the list is read from the database, so every tab and a reload show the same. The
    # page sends the oldest message it shows (`from`): what it shows is rendered again, no
    # more (the earlier pages a reader loaded stay), within `HISTORY_WIDEST`.
    try:
        start = paging.parse_seq(request.POST.get("from"), field="from")
    except paging.PageParamError:
        start = None
    context = pages.chat_context(session, user=request.user, start=start)
    return render(request, f"{CHAT_TEMPLATE}#messages", context)


def _composer_error(
    request: HttpRequest, session: Session, error: str, status: int = 422
) -> HttpResponse:
    context = pages.chat_context(session, user=request.user)
    context["composer_error"] = error
    response = render(request, f"{CHAT_TEMPLATE}#composer", context, status=status)
    return reswap(retarget(response, "#composer"), "outerHTML")


def _slots_partial(request: HttpRequest, session: Session) -> HttpResponse:
    return render(request, f"{CHAT_TEMPLATE}#slots", pages.chat_context(session, user=request.user))


@login_required
@require_POST
async def message_create(request: HttpRequest, session_id: str) -> HttpResponse:
    user = await request.auser()
    session = await sync_to_async(access.owned_session)(user, session_id)
    text = request.POST.get("text", "").strip()
    error = message_error(text)
    status = 400
    key = request.headers.get(idempotency.KEY_HEADER) or request.POST.get("idempotency_key")
    if error is None and key:
        try:
            idempotency.check_key(key)
        except idempotency.IdempotencyKeyInvalid as exc:
            error = str(exc)
    if error is None:
        try:
            await sync_to_async(_submit_once)(session=session, user=user, text=text, key=key)
        except (turns.QueueFull, turns.TurnLimitReached) as exc:
            error, status = str(exc), 429
        except idempotency.IdempotencyKeyReused as exc:
            error = str(exc)
    if error is not None:
        if request.htmx:
            # A refused input is a 422; a full queue or a spent turn limit stays a 429.
            return await sync_to_async(_composer_error)(
                request, session, error, 429 if status == 429 else 422
            )
        return HttpResponse(error, status=status, content_type="text/plain")
    if request.htmx:
        return await sync_to_async(_messages_partial)(request, session)
    return _see_other(_chat_url(session.key))


def _submit_once(*, session: Session, user: Any, text: str, key: str | None) -> None:
    """Queue the message; with a key, once: the same post sent again stores nothing new."""
    if not key:
        turns.submit_message_sync(session_id=session.pk, text=text, user_id=user.pk, source="page")
        return
    idempotency.idempotent_write(
        user_id=user.pk,
        key=key,
        scope=f"message_create:{session.pk}",
        fingerprint=idempotency.request_fingerprint(text),
        perform=lambda: {
            "ahead": turns.submit_message_sync(
                session_id=session.pk, text=text, user_id=user.pk, source="page"
            )
        },
    )


def message_error(text: str) -> str | None:
    """Why a composed message cannot be sent, or None."""
    if not text:
        return "Write a message first."
    if len(text) > MAX_MESSAGE_CHARS:
        return "That message is too long."
    if input_rules.contains_nul(text):
        return "The message contains a NUL character, which cannot be stored."
    return None


# The form field a slot's "Dismiss" button posts (`dismiss=true`); no slot form names a field
# of its answer so.
DISMISS_FIELD = "dismiss"


def slot_value(form: dict[str, str]) -> Any:
    """The value a slot form answers with.

    `json` carries any JSON value; a lone `value` is a string (permission prompts post
    once/always/deny_once/always_deny); otherwise the fields become an object, with
    "true"/"false" as booleans so a `<button name="confirmed" value="true">` answers
    `{"confirmed": true}`.
    """
    fields = {key: value for key, value in form.items() if key != "csrfmiddlewaretoken"}
    if "json" in fields:
        return json.loads(fields["json"])
    if set(fields) == {"value"}:
        return fields["value"]
    booleans = {"true": True, "false": False}
    return {key: booleans.get(value, value) for key, value in fields.items()}


@login_required
@require_POST
async def slot_answer(request: HttpRequest, session_id: str, slot_id: str) -> HttpResponse:
    user = await request.auser()
    session = await sync_to_async(access.owned_session)(user, session_id)
    form = request.POST.dict()
    # A slot's "Dismiss" button posts `dismiss=true`: closed unanswered (`turns.answer_slot`).
    dismiss = form.get(DISMISS_FIELD) == "true"
    try:
        value = None if dismiss else slot_value(form)
    except (ValueError, RecursionError):  # JSONDecodeError, or an integer of 4,300+ digits
        return HttpResponse("The answer is not valid JSON.", status=400, content_type="text/plain")
    try:
        answered = await turns.answer_slot(
            session_id=session.pk,
            slot_id=slot_id,
            value=value,
            dismiss=dismiss,
            by=user.get_username(),
            via="page",
        )
    except ValueError as refused:
        return HttpResponse(str(refused), status=400, content_type="text/plain")
    if not answered:
        # Already answered (another tab, a double click) or gone with a finished turn.
        raise Http404("That prompt is no longer waiting for an answer.")
    if request.htmx:
        return await sync_to_async(_slots_partial)(request, session)
    return _see_other(_chat_url(session.key))


@login_required
@require_POST
def turn_cancel(request: HttpRequest, session_id: str) -> HttpResponse:
    """The stop button: abort the running turn, whichever worker runs it."""
    session = access.owned_session(request.user, session_id)
    lifecycle.turn_cancel(session_id=session.pk, user_id=request.user.pk)
    if request.htmx:
        return HttpResponse(status=204)
    return _see_other(_chat_url(session.key))


@login_required
@require_POST
def turn_withdraw(request: HttpRequest, session_id: str, turn_id: int) -> HttpResponse:
    """Take a queued message back before it runs."""
    session = access.owned_session(request.user, session_id)
    withdrawn = submit.turn_withdraw(
        session_id=session.pk, turn_id=turn_id, user_id=request.user.pk
    )
    if not withdrawn and not request.htmx:
        return HttpResponse(
            "That message is no longer waiting: it has started or was withdrawn.",
            status=409,
            content_type="text/plain",
        )
    if request.htmx:
        # Either way the list shows where the message is now (withdrawn, or running).
        return _messages_partial(request, session)
    return _see_other(_chat_url(session.key))


@login_required
@require_POST
def permission_reset(request: HttpRequest, session_id: str) -> HttpResponse:
    """Forget one remembered permission answer (`permission`), or all of the chat's."""
    session = access.owned_session(request.user, session_id)
    raw = request.POST.get("permission", "")
    if raw and not (raw.isascii() and raw.isdigit() and len(raw) < 19):
        return HttpResponse("permission: must be a number.", status=400, content_type="text/plain")
    conversation_services.permissions_reset(
        session_id=session.pk, permission_id=int(raw) if raw else None
    )
    if request.htmx:
        return render(
            request, f"{CHAT_TEMPLATE}#permissions", pages.chat_context(session, user=request.user)
        )
    return _see_other(_chat_url(session.key))
