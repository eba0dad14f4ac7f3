"""The coffee shop end to end: the turns' entry points, the offline demo model, the coffee tools and the
Django store, the way the chat page drives them (no browser)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from gloveapp.conversations.models import Message
from gloveapp.demo import shop
from gloveapp.demo.models import CartLine, Coffee, Order
from gloveapp.turns import public as turns
from inbox.models import InboxItem
from inbox.services import inbox_item_resolve
from tests.demo.conftest import inbox_items, last_reply, next_slot, say, user_texts

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


async def news(session_id: str) -> list[str]:
    """What the agent said after the newest inbox banner."""
    rows = await sync_to_async(list)(
        Message.objects.filter(session_id=session_id)
        .order_by("seq")
        .values_list("sender", "framework_context", "text")
    )
    banner = max(i for i, row in enumerate(rows) if row[1] == "inbox")
    return [text for sender, _, text in rows[banner:] if sender == "agent" and text]


async def watch_yirgacheffe(session_id: str) -> InboxItem:
    await say(session_id, "Do you have Yirgacheffe?")
    await say(session_id, "yes please")
    [item] = await inbox_items(session_id)
    return item


async def test_it_says_it_is_the_offline_demo_model_in_its_first_reply(session_id):
    await say(session_id, "hello")

    reply = await last_reply(session_id)
    assert "offline demo model" in reply
    assert "not an AI" in reply


async def test_it_offers_a_restock_watch_for_the_out_of_stock_yirgacheffe(session_id):
    await say(session_id, "Do you have Yirgacheffe?")

    reply = await last_reply(session_id)
    assert "Ethiopia Yirgacheffe is out of stock" in reply
    assert "Shall I watch" in reply
    assert await inbox_items(session_id) == []


async def test_it_posts_a_pending_restock_watch_when_the_customer_agrees(session_id):
    item = await watch_yirgacheffe(session_id)

    assert item.tag == "restock_watch"
    assert item.request == "Notify when Yirgacheffe is back in stock"
    assert item.status == InboxItem.Status.PENDING
    assert item.blocking is False
    assert "watching" in (await last_reply(session_id)).lower()


async def test_it_posts_watches_without_a_deadline_by_default(session_id):
    item = await watch_yirgacheffe(session_id)

    assert item.expires_at is None


async def test_it_gives_watches_a_deadline_when_an_inbox_ttl_is_set(session_id, settings):
    settings.GLOVE_INBOX_TTL_SECONDS = 3600

    item = await watch_yirgacheffe(session_id)

    assert item.expires_at is not None
    assert (item.expires_at - item.created_at).total_seconds() == 3600


async def test_it_relays_the_resolution_on_the_next_message(session_id, staff):
    item = await watch_yirgacheffe(session_id)
    # Staff put bags on the shelf and answer the watch by hand.
    await Coffee.objects.filter(pk="yirgacheffe").aupdate(stock=12)
    await sync_to_async(inbox_item_resolve)(
        item_id=item.pk,
        response="Yirgacheffe is back in stock (12 bags).",
        resolved_by="user",
        user=staff,
    )

    await say(session_id, "anything new?")

    assert any("Yirgacheffe is back in stock (12 bags)." in text for text in await news(session_id))
    reply = await last_reply(session_id)
    assert "Ethiopia Yirgacheffe is back in stock: 12 bags" in reply
    assert "Shall I add a bag of Ethiopia Yirgacheffe" in reply
    await sync_to_async(item.refresh_from_db)()
    assert item.status == InboxItem.Status.CONSUMED


async def test_it_promises_no_bag_when_a_watch_is_answered_but_the_shelf_is_empty(
    session_id, staff
):
    # Outside testing found staff answering the watch in the admin without restocking: the
    # agent offered a bag ("good news, shall I add a bag?") and then said "out of stock".
    item = await watch_yirgacheffe(session_id)
    await sync_to_async(inbox_item_resolve)(
        item_id=item.pk,
        response="Yirgacheffe is back in stock (12 bags).",
        resolved_by="user",
        user=staff,
    )

    await say(session_id, "anything new?")

    said = await news(session_id)
    assert not any("Shall I add" in text or "Good news" in text for text in said)
    reply = await last_reply(session_id)
    assert "the roastery answered" in reply.lower()
    assert "Ethiopia Yirgacheffe is not in stock yet" in reply
    assert "Shall I keep watching for Ethiopia Yirgacheffe" in reply
    await say(session_id, "yes")
    watches = await inbox_items(session_id)
    assert [w.status for w in watches] == [InboxItem.Status.CONSUMED, InboxItem.Status.PENDING]
    assert watches[1].request == "Notify when Yirgacheffe is back in stock"


async def test_it_never_sets_a_watch_for_a_coffee_in_stock(session_id):
    await say(session_id, "notify me when Kenya AA is back in stock")

    assert await inbox_items(session_id) == []
    reply = await last_reply(session_id)
    assert "Kenya AA is in stock" in reply
    assert "Shall I add a bag of Kenya AA" in reply


async def test_it_checks_the_shelf_again_before_setting_the_watch_it_offered(session_id):
    await say(session_id, "Do you have Yirgacheffe?")
    assert "Shall I watch" in await last_reply(session_id)
    # Bags arrive while the customer reads the offer.
    await sync_to_async(shop.coffee_stock_set)(sku="yirgacheffe", stock=5)

    await say(session_id, "yes please")

    assert await inbox_items(session_id) == []
    assert "Ethiopia Yirgacheffe is in stock" in await last_reply(session_id)


async def test_it_relays_the_news_only_once(session_id, staff):
    item = await watch_yirgacheffe(session_id)
    await sync_to_async(inbox_item_resolve)(item_id=item.pk, response="Back in stock.", user=staff)
    await say(session_id, "anything new?")

    await say(session_id, "show me the menu")

    assert "Good news" not in await last_reply(session_id)
    banners = await sync_to_async(
        Message.objects.filter(session_id=session_id, framework_context="inbox").count
    )()
    assert banners == 1


async def test_it_sells_the_yirgacheffe_after_staff_restock_it_in_the_admin(session_id, staff):
    await watch_yirgacheffe(session_id)
    admin = Client()
    await sync_to_async(admin.force_login)(staff)

    response = await sync_to_async(admin.post)(
        "/admin/demo/coffee/",
        {"action": "restock_and_notify", "_selected_action": ["yirgacheffe"]},
    )

    assert response.status_code == 302
    [item] = await inbox_items(session_id)
    assert item.status == InboxItem.Status.RESOLVED
    await say(session_id, "any news?")
    assert "back in stock" in await last_reply(session_id)
    await say(session_id, "yes")
    assert "Added 1 x Ethiopia Yirgacheffe" in await last_reply(session_id)


def _edit_stock_in_the_list(admin: Client, sku: str, stock: int):
    """Post the changelist's editable stock column for one coffee, as the admin page does."""
    rows = list(Coffee.objects.order_by("position", "sku").values_list("sku", "stock"))
    data = {
        "form-TOTAL_FORMS": str(len(rows)),
        "form-INITIAL_FORMS": str(len(rows)),
        "form-MIN_NUM_FORMS": "0",
        "form-MAX_NUM_FORMS": "1000",
        "_save": "Save",
    }
    for index, (row_sku, row_stock) in enumerate(rows):
        data[f"form-{index}-sku"] = row_sku
        data[f"form-{index}-stock"] = str(stock if row_sku == sku else row_stock)
    return admin.post("/admin/demo/coffee/", data)


async def test_it_tells_restock_watchers_when_staff_edit_the_stock_column(session_id, staff):
    # The changelist's editable stock column is a restock too: it goes through the shop's
    # service, so the watching chat hears it (it used to save the row and tell nobody).
    await watch_yirgacheffe(session_id)
    admin = Client()
    await sync_to_async(admin.force_login)(staff)

    response = await sync_to_async(_edit_stock_in_the_list)(admin, "yirgacheffe", 5)

    assert response.status_code == 302
    assert (await Coffee.objects.aget(pk="yirgacheffe")).stock == 5
    [item] = await inbox_items(session_id)
    assert item.status == InboxItem.Status.RESOLVED
    assert item.response == "Ethiopia Yirgacheffe is back in stock (5 bags)."
    await say(session_id, "any news?")
    assert "back in stock" in await last_reply(session_id)


async def test_it_tells_no_watcher_when_staff_lower_the_stock_in_the_list(session_id, staff):
    await watch_yirgacheffe(session_id)
    admin = Client()
    await sync_to_async(admin.force_login)(staff)

    response = await sync_to_async(_edit_stock_in_the_list)(admin, "yirgacheffe", 0)

    assert response.status_code == 302
    [item] = await inbox_items(session_id)
    assert item.status == InboxItem.Status.PENDING


async def test_it_still_answers_an_old_admin_address_of_the_shop(staff):
    # The shop's admin moved from /admin/agents/ to /admin/demo/ with its app; old links
    # (and POSTed actions: 308 keeps the method) are sent on.
    admin = Client()
    await sync_to_async(admin.force_login)(staff)

    response = await sync_to_async(admin.get)("/admin/agents/coffee/?o=1")

    assert response.status_code == 308
    assert response["Location"] == "/admin/demo/coffee/?o=1"


async def test_it_refuses_to_add_a_coffee_that_is_out_of_stock(session_id):
    await say(session_id, "add a Yirgacheffe")

    assert "out of stock" in await last_reply(session_id)
    assert await sync_to_async(CartLine.objects.filter(session_id=session_id).count)() == 0


async def test_it_places_the_order_when_checkout_is_confirmed(session_id):
    await say(session_id, "add 2 Kenya AA")
    await turns.submit_message(session_id=session_id, text="checkout, I'll pay at pickup")

    slot = await next_slot(session_id)
    assert slot.template == "tools/coffee/checkout_slot.html"
    assert slot.tool_name == "checkout"
    assert slot.input["total"] == "$42.00"
    assert await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="confirm")
    await turns.wait_until_idle(session_id)

    order = await sync_to_async(Order.objects.get)(session_id=session_id)
    assert order.total_cents == 4200
    assert order.payment == "pickup"
    assert f"Order #{order.pk} is placed" in await last_reply(session_id)
    assert await sync_to_async(CartLine.objects.filter(session_id=session_id).count)() == 0
    kenya = await sync_to_async(Coffee.objects.get)(pk="kenya-aa")
    assert kenya.stock == 6
    assert (await sync_to_async(turns.visible_slots)(session_id)) == []


async def test_it_places_nothing_when_checkout_is_cancelled(session_id):
    await say(session_id, "add Colombia Huila")
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")

    slot = await next_slot(session_id)
    await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="cancel")
    await turns.wait_until_idle(session_id)

    assert await sync_to_async(Order.objects.filter(session_id=session_id).count)() == 0
    assert "haven't placed the order" in await last_reply(session_id)
    assert await sync_to_async(CartLine.objects.filter(session_id=session_id).count)() == 1


async def test_it_keeps_the_result_for_the_page_to_draw_after_a_reload(session_id):
    await say(session_id, "show me the menu")

    results = await sync_to_async(
        lambda: [
            result
            for message in Message.objects.filter(session_id=session_id).filter(
                tool_results__isnull=False
            )
            for result in message.tool_results
        ]
    )()
    [catalogue] = results
    assert catalogue["tool_name"] == "get_catalogue"
    names = [coffee["name"] for coffee in catalogue["result"]["renderData"]["coffees"]]
    assert "Ethiopia Yirgacheffe" in names


async def test_it_queues_a_second_message_until_the_running_turn_ends(session_id):
    await say(session_id, "add Kenya AA")
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")
    slot = await next_slot(session_id)

    ahead = await turns.submit_message(session_id=session_id, text="show me the menu")

    assert ahead == 1
    assert await sync_to_async(turns.is_busy)(session_id)
    assert (await sync_to_async(turns.queued)(session_id)) == 1
    assert "show me the menu" not in await user_texts(session_id)
    await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="confirm")
    await turns.wait_until_idle(session_id)
    assert await user_texts(session_id) == [
        "add Kenya AA",
        "checkout, pay at pickup",
        "show me the menu",
    ]
    # The checkout's whole turn (its result and reply) came before the next message.
    rows = await sync_to_async(list)(
        Message.objects.filter(session_id=session_id).order_by("seq").values_list("sender", "text")
    )
    menu_at = rows.index(("user", "show me the menu"))
    assert any("Order #" in text for sender, text in rows[:menu_at] if sender == "agent")
    assert (await sync_to_async(turns.queued)(session_id)) == 0
    assert not (await sync_to_async(turns.is_busy)(session_id))


async def test_it_answers_false_for_a_slot_nobody_waits_on(session_id):
    assert not await turns.answer_slot(session_id=session_id, slot_id="slot_99", value="confirm")


async def test_it_draws_past_results_and_the_waiting_prompt_on_a_reloaded_page(
    session_id, customer
):
    await say(session_id, "show me the menu")
    await say(session_id, "add 2 Kenya AA")
    await turns.submit_message(session_id=session_id, text="checkout, pay at pickup")
    slot = await next_slot(session_id)
    browser = Client()
    await sync_to_async(browser.force_login)(customer)

    page = (await sync_to_async(browser.get)(f"/sessions/{session_id}/")).content.decode()

    assert "Brew&#x27;s coffees" in page or "Brew's coffees" in page
    assert "out of stock" in page
    assert "Added 2 \u00d7 Kenya AA." in page
    assert "Confirm your order" in page
    assert f"/sessions/{session_id}/slots/{slot.id}" in page
    await turns.answer_slot(session_id=session_id, slot_id=slot.id, value="confirm")
    await turns.wait_until_idle(session_id)
    page = (await sync_to_async(browser.get)(f"/sessions/{session_id}/")).content.decode()
    assert "Confirm your order" not in page
    assert "placed" in page
