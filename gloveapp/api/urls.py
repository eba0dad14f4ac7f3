"""The REST API (DRF), mounted at /api/: one URLconf per audience, included in this order.

The remote store's routes come first, so its hot paths resolve in fewer tries; the webhooks'
`inbox/resolve` comes before the workspace inbox's `inbox/<entry_id>`, so that word is never
read as an entry id. The URL names are global (no namespaces): `reverse("api-sessions")`.
"""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("", include("gloveapp.api.store.urls")),
    path("", include("gloveapp.api.agents.urls")),
    path("", include("gloveapp.api.webhooks.urls")),
    path("", include("gloveapp.api.mcp.urls")),
]
