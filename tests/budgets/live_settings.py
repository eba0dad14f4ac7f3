"""Settings of the budget tests' servers and turn workers: the priced test agent as the
default, and a daily budget of $1.00 for everyone (tests/budgets/test_workers.py).

    DJANGO_SETTINGS_MODULE=tests.budgets.live_settings manage.py turn_worker
"""

from gloveapp.settings import *  # noqa: F403
from gloveapp.settings import GLOVE_AGENTS, GLOVE_MODEL_PRICES
from tests.budgets import agent

# Registered here, before the system checks look at the agents' models.
agent.register()
GLOVE_AGENTS = {**GLOVE_AGENTS, **agent.AGENTS}
GLOVE_DEFAULT_AGENT = "spender"
GLOVE_MODEL_PRICES = {**GLOVE_MODEL_PRICES, **agent.PRICES}
GLOVE_BUDGETS = [
    {
        "id": "daily-dollar",
        "name": "A dollar a day",
        "scope": "everyone",
        "window": "day",
        "cap_usd": "1.00",
        "action": "refuse",
    }
]
