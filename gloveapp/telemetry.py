"""Switch tracing on in this process when the `OTEL_*` environment asks for it: the SDK's
exporter (`gloveapp.observe.tracing`) and the instrumentation packages for Django (every
request a span; WSGI and ASGI), psycopg (every PostgreSQL statement a span; SQLite is not
traced), Redis and httpx (the model providers' SDKs use httpx).

Called from the turns app's `ready()`, before any server builds its middleware, so every
process (granian's and uvicorn's workers, the turn workers, commands) is set up alike.
"""

from __future__ import annotations

import logging

from gloveapp.observe import tracing

logger = logging.getLogger(__name__)
_instrumented = False


def setup_tracing() -> bool:
    global _instrumented
    if not tracing.configure():
        return False
    if _instrumented:
        return True
    _instrumented = True
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    instrumentors = (
        DjangoInstrumentor(),
        # Patches psycopg.connect, which Django's backend calls for each new connection: set
        # up here, before the first query opens one. No SQL comments are added to queries.
        PsycopgInstrumentor(),
        RedisInstrumentor(),
        HTTPXClientInstrumentor(),
    )
    for instrumentor in instrumentors:
        try:
            instrumentor.instrument()
        except Exception:
            logger.exception("could not switch on %s", type(instrumentor).__name__)
    return True
