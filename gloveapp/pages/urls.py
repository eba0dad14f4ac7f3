"""The HTMX chat pages."""

from __future__ import annotations

from django.urls import path

from gloveapp.pages import views

urlpatterns = [
    path("", views.session_list, name="session-list"),
    path("sessions/new", views.session_new, name="session-new"),
    path("sessions/<str:session_id>/", views.chat, name="chat"),
    path("sessions/<str:session_id>/messages", views.message_create, name="message-create"),
    path("sessions/<str:session_id>/slots/<str:slot_id>", views.slot_answer, name="slot-answer"),
    path("sessions/<str:session_id>/cancel", views.turn_cancel, name="turn-cancel"),
]
