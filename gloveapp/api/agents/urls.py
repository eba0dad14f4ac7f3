"""The server's agents from any client: start a turn, stream it, answer it, stop it."""

from __future__ import annotations

from django.urls import path

from gloveapp.api.agents import cancel, events, handoff, permission_prompts, slots, turns

urlpatterns = [
    path(
        "sessions/<str:session_id>/permission-prompts",
        permission_prompts.PermissionPromptListApi.as_view(),
        name="api-session-permission-prompts",
    ),
    path(
        "sessions/<str:session_id>/permission-prompts/<str:prompt_id>",
        permission_prompts.PermissionPromptAnswerApi.as_view(),
        name="api-session-permission-prompt",
    ),
    path(
        "sessions/<str:session_id>/cancel", cancel.TurnCancelApi.as_view(), name="api-turn-cancel"
    ),
    path(
        "sessions/<str:session_id>/agent/turns",
        turns.AgentTurnStartApi.as_view(),
        name="api-session-agent-turns",
    ),
    path(
        "sessions/<str:session_id>/agent/turns/<str:turn_id>",
        turns.AgentTurnDetailApi.as_view(),
        name="api-session-agent-turn",
    ),
    path(
        "sessions/<str:session_id>/handoff",
        handoff.SessionHandoffApi.as_view(),
        name="api-session-handoff",
    ),
    path(
        "sessions/<str:session_id>/events",
        events.session_events,
        name="api-session-events",
    ),
    path(
        "sessions/<str:session_id>/slots",
        slots.SlotListApi.as_view(),
        name="api-session-slots",
    ),
    path(
        "sessions/<str:session_id>/slots/<str:slot_id>",
        slots.SlotAnswerApi.as_view(),
        name="api-session-slot",
    ),
]
