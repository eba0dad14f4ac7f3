"""The roastery: the demo's second agent, a mesh peer that answers stock questions.

    python manage.py run_agent roastery --mesh-id roastery --capability stock

Other agents (the shop's Brew, or any peer) ask it over the mesh ("How much Kenya AA is
left?"); it checks the shop's stock and replies to the message, which unblocks a sender that
was waiting. With the offline demo model it does this by rule (gloveapp/demo/demo_mesh.py).
"""

from __future__ import annotations

from gloveapp.agents.config import AgentSpec
from gloveapp.demo.coffee import check_stock

SYSTEM_PROMPT = """\
You are the roastery behind a small specialty coffee shop. Other agents message you over the
mesh about coffee stock. For each question, check the stock with check_stock, then answer the
agent that asked with glove_mesh_send_message, setting in_reply_to to the id of its message,
so that it stops waiting. Be brief and exact: bags in stock, or out of stock.
"""


def build_agent() -> AgentSpec:
    return AgentSpec(
        name="roastery",
        title="Roastery",
        system_prompt=SYSTEM_PROMPT,
        tools=[check_stock],
        compaction_instructions="Summarize the stock questions answered so far.",
    )
