from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings

from gloveapp.conf import fill_app_defaults


class LiveConfig(AppConfig):
    name = "gloveapp.live"
    label = "live"
    verbose_name = "Live events"

    def ready(self) -> None:
        from gloveapp.live.signout import connect_signals

        # Every app sits on this one: in a project of its own (docs/howto/existing-project.md)
        # the settings it leaves out get their declared defaults before anything reads them.
        fill_app_defaults(settings)
        connect_signals()
        # Every PostgreSQL statement waits for its answer at most GLOVE_DB_WAIT_SECONDS.
        from django.db.backends.signals import connection_created

        from gloveapp.lib.db.timeouts import bound_statement_waits

        connection_created.connect(bound_statement_waits, dispatch_uid="glove_bounded_waits")
