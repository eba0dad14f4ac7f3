"""Settings of the frozen-worker test's processes: the demo model, slow.

    DJANGO_SETTINGS_MODULE=tests.healing.slow_model manage.py turn_worker

Each model call waits `SLOW_SECONDS` first (longer than the test's lease), so a worker
frozen in the middle of one resumes with the call done and its reply ready to store; then
it reads the reply for a moment without yielding (as parsing a large response does), so
the resumed worker's heartbeat cannot abort the turn before the turn goes on to store it:
without a fence on the writes, the reply would be stored every time, not by chance.
"""

from gloveapp.core.providers.registry import register_model_provider
from gloveapp.settings import *  # noqa: F403

GLOVE_MODEL = "slow-demo"
SLOW_SECONDS = 3.0
READ_SECONDS = 0.3


def _slow_demo(model: str = "", **kwargs):
    import asyncio
    import time

    from gloveapp.demo.demo_model import DemoModel

    class SlowDemoModel(DemoModel):
        async def prompt(self, *args, **kwargs):
            await asyncio.sleep(SLOW_SECONDS)  # not abortable, like a request in flight
            result = await super().prompt(*args, **kwargs)
            time.sleep(READ_SECONDS)  # noqa: ASYNC251 - holds the loop on purpose
            return result

    return SlowDemoModel()


# Registered here, before the system checks look at GLOVE_MODEL.
register_model_provider("slow-demo", _slow_demo, replace=True)
