from __future__ import annotations

from django.apps import AppConfig


class PagesConfig(AppConfig):
    """The HTMX pages and the chat websocket; an app so that its templates are found."""

    name = "gloveapp.pages"
    label = "pages"
    verbose_name = "Pages"
