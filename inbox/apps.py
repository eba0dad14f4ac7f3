from django.apps import AppConfig


class InboxConfig(AppConfig):
    name = "inbox"
    verbose_name = "Inbox"

    def ready(self) -> None:
        # Registers the webhook's OpenAPI security scheme with drf-spectacular.
        from inbox import schema  # noqa: F401
