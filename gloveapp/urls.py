from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.utils.csp import CSP
from django.views.decorators.csp import csp_override
from django.views.generic import RedirectView, TemplateView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from gloveapp.api.common.metrics import metrics_view
from gloveapp.demo.login import LoginView
from gloveapp.lib.http.health import healthz
from gloveapp.turns.admin import usage_page


def _moved_admin(new_app: str):
    """The admin pages of models that moved to another app answer at their old address too.

    The admin derives its URLs from the app label: the shop's models went from `agents` to
    `demo`, the event log from `conversations` to `live`. A 308 keeps the method and body,
    so an old bookmark or a POSTed admin action still works.
    """

    def view(request: HttpRequest, rest: str) -> HttpResponsePermanentRedirect:
        query = request.META.get("QUERY_STRING", "")
        target = f"/admin/{new_app}/{rest}" + (f"?{query}" if query else "")
        return HttpResponsePermanentRedirect(target, preserve_request=True)

    return view


handler400 = "gloveapp.api.common.errors.bad_request"
handler500 = "gloveapp.api.common.errors.server_error"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Prometheus' scrape (GLOVE_METRICS_TOKEN; 404 while it is unset).
    path("metrics", metrics_view, name="metrics"),
    # The remote store first: its clients' calls are most of the traffic, and every include
    # tried before the one that matches costs a Resolver404 raised and caught.
    path("api/", include("gloveapp.api.urls")),
    re_path(r"^admin/agents/(?P<rest>(?:coffee|order|cartline)/.*)$", _moved_admin("demo")),
    re_path(r"^admin/conversations/(?P<rest>liveevent/.*)$", _moved_admin("live")),
    # The usage charts (gloveapp/turns/usage_report.py), inside the admin's login.
    path("admin/usage/", admin.site.admin_view(usage_page), name="admin-usage"),
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin's).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", TemplateView.as_view(template_name="api/index.html"), name="api-index"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/docs/",
        # Swagger UI: its script served apart (the split view), its one inline <style> allowed here.
        csp_override({**settings.SECURE_CSP, "style-src": [CSP.SELF, CSP.UNSAFE_INLINE]})(
            SpectacularSwaggerSplitView.as_view(url_name="api-schema")
        ),
        name="api-docs",
    ),
    path("", include("gloveapp.pages.urls")),
]
# Daphne serves no static files itself; under DEBUG Django does (htmx is vendored, no CDN).
# With DEBUG off, run collectstatic and let the proxy serve STATIC_ROOT.
urlpatterns += staticfiles_urlpatterns()
