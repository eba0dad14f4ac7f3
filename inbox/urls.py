from __future__ import annotations

from django.urls import path

from inbox.views import InboxResolveApi

urlpatterns: list = [
    path("api/inbox/resolve", InboxResolveApi.as_view(), name="inbox-resolve"),
]
