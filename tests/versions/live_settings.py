"""Settings of the replay fault tests' servers and turn workers: the scripted shop agent
(tests/fakes/replay_model.py) beside the demo's (tests/versions/test_worker_death.py).

    DJANGO_SETTINGS_MODULE=tests.versions.live_settings manage.py turn_worker
"""

from gloveapp.settings import *  # noqa: F403
from gloveapp.settings import GLOVE_AGENTS
from tests.fakes import replay_model

# Registered here, before the system checks look at the agents' models.
replay_model.register()
GLOVE_AGENTS = {
    **GLOVE_AGENTS,
    "shop": {"factory": "tests.fakes.replay_model.shop_agent", "model": "replay-test"},
}
