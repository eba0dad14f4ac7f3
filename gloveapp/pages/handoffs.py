"""The staff console at `/handoffs/`: chats waiting for a person, by group, and one chat's
conversation with what a person does there (claim, take over, reply, note, hand back, close);
and the chat page's "Talk to a person" (`POST /sessions/<id>/handoff`).

An edge, as `/approvals/` is: each view checks who asks (staff of the chat's group, or its
person; anyone else gets the same 404 whether or not the chat exists), reads through
`conversations.handoff_selectors`, changes through `conversations.handoff` and renders. It
works without JavaScript (rows are links, every action a form); `static/glove/handoffs.js`
adds j/k/Enter (`list_nav.js`), c to claim, r to reply, and live updates from each group's
stream (`/ws/handoffs/<group>/`).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from gloveapp.agents.handoff_config import agent_handoff_group
from gloveapp.conversations import access, handoff
from gloveapp.conversations import handoff_selectors as selectors
from gloveapp.conversations.models import Answerer, Session
from gloveapp.lib import paging
from gloveapp.lib.db.outages import answer_after_commit
from gloveapp.live.replay import current_cursors
from gloveapp.live.streams import handoffs_stream
from gloveapp.pages.context import console_entries

VIEW_LABELS = {"waiting": "Waiting", "mine": "My chats"}


def _staff_only(request: HttpRequest) -> None:
    if not handoff.is_staff_member(request.user):
        raise Http404("No such page.")


def _chat_or_404(request: HttpRequest, session_id: str) -> tuple[Session, str]:
    """The chat if the console may show it to this staff member; else the 404 of no chat."""
    _staff_only(request)
    session = selectors.console_chat(session_id)
    if session is None:
        raise Http404("No such chat.")
    agent_group = agent_handoff_group(session.agent_name)
    if not handoff.may_handle(request.user, session, agent_group=agent_group):
        raise Http404("No such chat.")
    return session, agent_group


def _view(request: HttpRequest) -> str:
    view = request.GET.get("view") or "waiting"
    return view if view in selectors.VIEWS else "waiting"


# The name the console's cursors are signed for: a cursor of another list is refused.
CONSOLE_LISTED = "pages.handoff-console"


@login_required
@require_GET
def console_page(request: HttpRequest) -> HttpResponse:
    _staff_only(request)
    view = _view(request)
    try:
        cursor = paging.parse_cursor(request.GET.get("cursor"), listed=CONSOLE_LISTED)
    except paging.PageParamError as problem:
        return HttpResponse(problem.message, status=400, content_type="text/plain")
    group = request.GET.get("group")
    if group is not None and (len(group) > 150 or not group.isprintable()):
        return HttpResponse("group: not a group's name.", status=400, content_type="text/plain")
    groups = selectors.staff_groups(request.user)
    # One cursor per group's stream (each numbers its events on its own), read first.
    last_event_ids = current_cursors({name: handoffs_stream(name) for name in groups})
    rows, next_cursor = selectors.console_page(request.user, view=view, group=group, cursor=cursor)
    context = {
        "queue_page": "handoffs",  # the ids of glove/queue_page.html
        "rows": rows,
        "next_cursor": next_cursor.encode(CONSOLE_LISTED) if next_cursor else None,
        "view": view,
        "group": group,
        "views": list(VIEW_LABELS.items()),
        "counts": selectors.queue_counts(request.user),
        "groups": groups,
        "last_event_ids": last_event_ids,
        "selected": None,
    }
    if request.GET.get("part") == "rows":
        return render(request, "handoffs/console.html#rows", context)
    wanted = request.GET.get("chat")
    if wanted:
        try:
            session, agent_group = _chat_or_404(request, wanted)
        except Http404:
            session = None
        if session is not None:
            context["selected"] = _detail_context(request, session, agent_group)
    return render(request, "handoffs/console.html", context)


def _detail_context(
    request: HttpRequest, session: Session, agent_group: str, *, error: str = ""
) -> dict[str, Any]:
    holder = session.answerer == Answerer.PERSON and (
        session.answerer_person_id == request.user.pk or request.user.is_superuser
    )
    return {
        "session": session,
        "answerer": handoff.answerer_of(session),
        "entries": console_entries(session),
        "audit": selectors.audit(session.pk),
        "holds": holder,
        "may_claim": session.answerer == Answerer.QUEUED,
        "may_take_over": session.answerer in (Answerer.AGENT, Answerer.QUEUED),
        "may_close": session.answerer == Answerer.QUEUED or holder,
        "group": session.answerer_group or agent_group,
        "chat_url": reverse("chat", args=[session.pk]),
        "error": error,
    }


def _detail(
    request: HttpRequest, session: Session, agent_group: str, *, error: str = "", status=200
) -> HttpResponse:
    context = _detail_context(request, session, agent_group, error=error)
    return render(request, "handoffs/_detail.html", context, status=status)


@login_required
@require_GET
def chat_detail(request: HttpRequest, session_id: str) -> HttpResponse:
    session, agent_group = _chat_or_404(request, session_id)
    if request.GET.get("part") == "detail" or request.htmx:
        return _detail(request, session, agent_group)
    return redirect(f"{reverse('handoffs')}?chat={session.pk}")


def _act(request: HttpRequest, session_id: str, change: Any) -> HttpResponse:
    """Run `change(session)`; answer with the chat's pane (htmx) or back to the console.
    A conflict (another claimant won, the chat is someone else's) is a 409 saying who
    answers; a wrong field a 400 naming it."""
    session, agent_group = _chat_or_404(request, session_id)
    try:
        change(session)
    except handoff.HandoffConflict as conflict:
        session.refresh_from_db()
        return _detail(request, session, agent_group, error=str(conflict), status=409)
    except handoff.HandoffInvalid as invalid:
        return _detail(
            request, session, agent_group, error=f"{invalid.field}: {invalid}", status=400
        )
    console = f"{reverse('handoffs')}?chat={session.pk}"
    if not request.htmx:
        return redirect(console)
    # The change is committed: if the database went away since, the pane is not re-read but
    # the page is loaded again (a GET), never a 503 that would have the change sent twice.
    return answer_after_commit(
        lambda: _detail(request, selectors.console_chat(session.pk) or session, agent_group),
        otherwise=lambda: HttpResponse(headers={"HX-Redirect": console}),
    )


def _take_over(request: HttpRequest, session: Session) -> Any:
    return handoff.handoff_take_over(
        session_id=session.pk,
        staff=request.user,
        reason=request.POST.get("reason", ""),
        group=agent_handoff_group(session.agent_name),
    )


# What a person does with a chat on the console: `POST /handoffs/<id>/<action>`, each one
# service of `conversations.handoff` called with the form's field.
ACTIONS: dict[str, Any] = {
    "claim": lambda request, session: handoff.handoff_claim(
        session_id=session.pk, staff=request.user
    ),
    "take-over": _take_over,
    "reply": lambda request, session: handoff.staff_reply(
        session_id=session.pk, staff=request.user, text=request.POST.get("text", "")
    ),
    "note": lambda request, session: handoff.staff_note(
        session_id=session.pk, staff=request.user, text=request.POST.get("text", "")
    ),
    "hand-back": lambda request, session: handoff.handoff_hand_back(
        session_id=session.pk, staff=request.user, summary=request.POST.get("summary", "")
    ),
    "close": lambda request, session: handoff.handoff_close(
        session_id=session.pk, staff=request.user, reason=request.POST.get("reason", "")
    ),
}


@login_required
@require_POST
def chat_action(request: HttpRequest, session_id: str, action: str) -> HttpResponse:
    change = ACTIONS.get(action)
    if change is None:
        raise Http404("No such page.")
    return _act(request, session_id, lambda session: change(request, session))


@login_required
@require_POST
def handoff_request(request: HttpRequest, session_id: str) -> HttpResponse:
    """The chat page's "Talk to a person": its owner only (anyone else: the 404 of no
    chat); the chat goes to its agent's handoff group's queue."""
    session = access.owned_session(request.user, session_id)
    try:
        handoff.handoff_request(
            session_id=session.pk,
            reason=request.POST.get("reason", "") or "The customer asked for a person.",
            group=agent_handoff_group(session.agent_name),
            actor=handoff.Actor(user=request.user),
            via="page",
        )
    except handoff.HandoffConflict as conflict:
        return HttpResponse(str(conflict), status=409, content_type="text/plain")
    except handoff.HandoffInvalid as invalid:
        return HttpResponse(f"{invalid.field}: {invalid}", status=400, content_type="text/plain")
    if request.htmx:
        return HttpResponse(status=204)
    return redirect(reverse("chat", args=[session.key]))
