from __future__ import annotations

from django.urls import include, path

from gloveapp.accounts.views import FaviconView, LoginView

urlpatterns = [
    path("favicon.ico", FaviconView.as_view(), name="favicon"),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
]
