from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "gloveapp.conversations"
    label = "conversations"
    verbose_name = "Conversations"
