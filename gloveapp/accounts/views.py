from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.views.generic import RedirectView

from gloveapp.agents.demo import demo_logins


class LoginView(auth_views.LoginView):
    """Django's login, plus the demo's logins when `make run` created them and they still
    have their development passwords (only where GLOVE_DEMO_LOGIN_HINT is on: checking a
    password is deliberately slow, so not on every anonymous page view in production)."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["demo_logins"] = demo_logins() if settings.GLOVE_DEMO_LOGIN_HINT else []
        return context


class FaviconView(RedirectView):
    """Browsers ask for /favicon.ico on every page that names none (the admin's)."""

    permanent = True

    def get_redirect_url(self, *args, **kwargs) -> str:
        return static("favicon.svg")
