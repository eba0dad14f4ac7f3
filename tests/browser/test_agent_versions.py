"""Staff try a change before customers see it: edit the coffee agent's draft, read its diff,
replay 20 recorded conversations against it, read the report, and publish it through an
approval a barista gives on /approvals/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import BARISTA_PASSWORD, STAFF_PASSWORD
from tests.browser.test_coffee_shop import log_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

WAIT_MS = 60_000
# 20 conversations of the coffee agent, recorded as its turns store them (in memory with
# the offline demo model, then appended), owned by the demo user.
RECORD = """
import asyncio
from django.contrib.auth import get_user_model
from gloveapp.agents.config import configured_model, get_agent_spec
from gloveapp.conversations.services import messages_append, session_create
from gloveapp.core.compaction import CompactionConfig
from gloveapp.core.glove import Glove
from gloveapp.core.store import MemoryStore

spec = get_agent_spec("coffee")
owner = get_user_model().objects.get(username="demo")

async def answered(text):
    store = MemoryStore()
    glove = Glove(store=store, model=configured_model(spec=spec.model),
                  system_prompt=spec.system_prompt,
                  compaction_config=CompactionConfig(compaction_instructions="Summarize."))
    glove.build()
    await glove.process_request(text)
    return await store.get_messages()

ids = []
for index in range(20):
    session = session_create(owner=owner, agent_name="coffee", session_id=f"replayed-{index}")
    messages_append(session_id=session.pk, messages=asyncio.run(answered("hello")))
    ids.append(session.pk)
print(" ".join(ids))
"""
# The other browser tests meet the coffee agent as the code makes it.
TEARDOWN = """
from gloveapp.conversations.models import Session
from gloveapp.versions.models import AgentPointer
Session.objects.filter(key__startswith="replayed-").delete()
AgentPointer.objects.filter(pk="coffee").update(published=None, publish_needs_approval=False)
"""


def test_staff_replay_a_draft_and_publish_it_through_an_approval(server, browser):
    expect.set_options(timeout=WAIT_MS)
    # These 20 by their ids: a sample would also draw the other browser tests' coffee chats.
    recorded = server.manage("shell", "-c", RECORD).strip().splitlines()[-1]
    try:
        staff = browser.new_context(viewport={"width": 1280, "height": 1000})
        page = staff.new_page()
        log_in(page, server.url, "staff", STAFF_PASSWORD, next_url="/admin/versions/agentpointer/")
        page.get_by_role("link", name="coffee: start versioning").click()
        expect(page.locator("[data-draft]")).to_have_text("none yet")

        prompt = page.get_by_label("System prompt")
        prompt.fill(prompt.input_value() + "\nAlways mention the seasonal blend.")
        page.get_by_label("Note").fill("seasonal blend")
        page.get_by_role("button", name="Save as the new draft").click()
        expect(page.locator("[data-draft]")).to_have_text("coffee v1")
        expect(page.locator("[data-diff]")).to_contain_text("+Always mention the seasonal blend.")

        page.get_by_label("Publishing needs an approval").check()
        page.get_by_role("button", name="Save the checks").click()
        page.locator("[data-replay-form] [name=ids]").fill(recorded)
        page.get_by_role("button", name="Start the replay").click()
        progress = page.locator("[data-progress]")
        expect(progress).to_contain_text("done: 20 of 20 replayed")
        expect(page.locator("[data-identical]")).to_have_text("20")
        page.get_by_role("link", name="all").click()
        expect(page.locator("[data-result]")).to_have_count(20)

        page.goto(f"{server.url}/admin/versions/agentpointer/coffee/change/")
        page.get_by_label("Replay report linked").select_option(index=1)
        page.get_by_role("button", name="Ask to publish the draft").click()
        expect(page.locator("[data-publish-requests] [data-state]")).to_have_text("pending")
        expect(page.locator("[data-published]")).to_contain_text("the code")

        barista = browser.new_context(viewport={"width": 1280, "height": 900})
        approvals = barista.new_page()
        log_in(approvals, server.url, "barista", BARISTA_PASSWORD, next_url="/approvals/?view=all")
        row = approvals.locator("#approvals-list .approvals-row", has_text="Publish agent version")
        row.first.click()
        detail = approvals.locator("#approvals-detail")
        expect(detail).to_contain_text("/admin/versions/replayrun/")
        detail.get_by_role("button", name="Approve", exact=True).click()
        expect(detail).to_contain_text("Approved by barista")
        barista.close()

        page.reload()
        expect(page.locator("[data-published]")).to_have_text("coffee v1")
        expect(page.locator("[data-publish-requests] [data-state]")).to_have_text("published")
        staff.close()
    finally:
        server.manage("shell", "-c", TEARDOWN)
