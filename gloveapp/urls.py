from __future__ import annotations

from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # The inbox's own routes (resolve webhook, workspace inbox) come before the generic API.
    path("", include("inbox.urls")),
    path("api/", include("gloveapp.conversations.api.urls")),
    path("", include("gloveapp.conversations.urls")),
]
# Daphne serves no static files itself; under DEBUG Django does (htmx is vendored, no CDN).
# With DEBUG off, run collectstatic and let the proxy serve STATIC_ROOT.
urlpatterns += staticfiles_urlpatterns()
