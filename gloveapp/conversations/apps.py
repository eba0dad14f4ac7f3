from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "gloveapp.conversations"
    label = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from gloveapp import checks  # noqa: F401  (registers the system checks)
