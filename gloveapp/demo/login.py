"""The login page, naming the demo's logins while they still have their development passwords."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views

from gloveapp.demo.bootstrap import demo_logins


class LoginView(auth_views.LoginView):
    """Django's login, plus the demo's logins when `make run` created them and they still
    have their development passwords (only where GLOVE_DEMO_LOGIN_HINT is on: checking a
    password is deliberately slow, so not on every anonymous page view in production)."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["demo_logins"] = demo_logins() if settings.GLOVE_DEMO_LOGIN_HINT else []
        return context
