"""Daphne's app, minus its start-up cost: `manage.py runserver` is still Daphne's (ASGI,
websockets included), but no other process imports Daphne.

`"daphne"` in INSTALLED_APPS loads daphne.apps, which imports Daphne's server (Twisted and
its TLS and websocket stacks, about a quarter of a second) in every process that sets Django
up, to install Twisted's reactor before anything else imports one. Only Daphne needs it:
the `runserver` command's module imports the server first, and the `daphne` command before
it loads the application.
"""

from __future__ import annotations

from django.apps import AppConfig, apps
from django.core import checks


class DaphneConfig(AppConfig):
    name = "daphne"
    verbose_name = "Daphne"

    def ready(self) -> None:
        checks.register(check_daphne_installed, checks.Tags.staticfiles)


def check_daphne_installed(app_configs, **kwargs):
    """Daphne's own check (daphne.E001): the first app with a `runserver` wins, and
    staticfiles has one too."""
    for app in apps.get_app_configs():
        if app.name == "daphne":
            return []
        if app.name == "django.contrib.staticfiles":
            return [
                checks.Error(
                    "Daphne must be listed before django.contrib.staticfiles in INSTALLED_APPS.",
                    id="daphne.E001",
                )
            ]
    return []
