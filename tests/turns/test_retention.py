"""Retention: every growing table forgets its old rows by itself, from the turn worker's
scheduler, in bounded batches; recent and unfinished rows stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from gloveapp.approvals.models import ApprovalRequest
from gloveapp.conversations.models import IdempotentRequest, Session
from gloveapp.live.models import LiveEvent
from gloveapp.turns.models import Turn, TurnSlot
from gloveapp.turns.retention import retention_apply
from inbox.models import InboxItem
from mesh.models import MeshDelivery, MeshSentMessage
from tests.helpers import serve_worker_until

pytestmark = [pytest.mark.postgres]

OLD = timedelta(days=400)
NEW = timedelta(minutes=5)


def ago(age: timedelta):
    return timezone.now() - age


def make_session(name: str = "kept") -> Session:
    return Session.objects.create(id=name, key=name)


def inbox_item(session: Session, name: str, *, status: str, age: timedelta) -> InboxItem:
    return InboxItem.objects.create(
        id=name,
        key=name,
        session=session,
        tag="t",
        request="?",
        status=status,
        created_at=ago(age),
        consumed_at=ago(age) if status == InboxItem.Status.CONSUMED else None,
    )


def approval(session: Session, *, status: str, age: timedelta) -> ApprovalRequest:
    return ApprovalRequest.objects.create(
        session=session,
        tool_name="checkout",
        args={},
        fingerprint="f",
        decisions=["approve", "reject"],
        status=status,
        created_at=ago(age),
        decided_at=ago(age) if status == ApprovalRequest.Status.DECIDED else None,
    )


def turn(session: Session, *, status: str, age: timedelta) -> Turn:
    row = Turn.objects.create(session=session, text="hi", status=status)
    Turn.objects.filter(pk=row.pk).update(
        created_at=ago(age), finished_at=ago(age) if status == Turn.Status.DONE else None
    )
    return row


def task_result(*, status: str, age: timedelta) -> DBTaskResult:
    row = DBTaskResult.objects.create(
        status=status,
        args_kwargs={"args": [], "kwargs": {}},
        task_path="gloveapp.turns.queue.tasks.run_session",
        backend_name="default",
        run_after=ago(age),
        finished_at=ago(age) if status == "SUCCESSFUL" else None,
        exception_class_path="",
        traceback="",
    )
    # Enqueued when it was (on PostgreSQL: the day partition it lives in).
    DBTaskResult.objects.filter(pk=row.pk).update(enqueued_at=ago(age))
    return row


def live_event(stream: str, age: timedelta) -> LiveEvent:
    row = LiveEvent.objects.create(stream=stream, seq=1, type="t", payload={})
    LiveEvent.objects.filter(pk=row.pk).update(created_at=ago(age))
    return row


@pytest.mark.django_db(transaction=True)
def test_it_forgets_every_old_row_and_keeps_recent_and_unfinished_ones():
    session = make_session()
    user = get_user_model().objects.create_user("owner")
    inbox_item(session, "consumed-old", status="consumed", age=OLD)
    inbox_item(session, "consumed-new", status="consumed", age=NEW)
    inbox_item(session, "pending-old", status="pending", age=OLD)
    approval(session, status="decided", age=OLD)
    decided_new = approval(session, status="decided", age=NEW)
    open_old = approval(session, status="open", age=OLD)
    done_old = turn(session, status=Turn.Status.DONE, age=OLD)
    TurnSlot.objects.create(turn=done_old, session=session, slot_id="s", renderer="r")
    done_new = turn(session, status=Turn.Status.DONE, age=NEW)
    queued_old = turn(session, status=Turn.Status.QUEUED, age=OLD)
    task_result(status="SUCCESSFUL", age=OLD)
    task_new = task_result(status="SUCCESSFUL", age=NEW)
    task_ready = task_result(status="READY", age=OLD)
    for key, age in (("k-old", OLD), ("k-new", NEW)):
        row = IdempotentRequest.objects.create(user=user, key=key, scope="s", fingerprint="f")
        IdempotentRequest.objects.filter(pk=row.pk).update(created_at=ago(age))
    for message_id, age in (("m-old", OLD), ("m-new", NEW)):
        MeshSentMessage.objects.create(message_id=message_id, sender="a", kind="direct")
        MeshSentMessage.objects.filter(pk=message_id).update(created_at=ago(age))
        delivery = MeshDelivery.objects.create(
            message_id=message_id, recipient="b", sender="a", kind="direct", body={}
        )
        MeshDelivery.objects.filter(pk=delivery.pk).update(delivered_at=ago(age))
    live_event("session:kept", OLD)
    event_new = live_event("session:kept", NEW)

    pruned = retention_apply()

    assert sorted(InboxItem.objects.values_list("id", flat=True)) == [
        "consumed-new",
        "pending-old",
    ]
    assert sorted(ApprovalRequest.objects.values_list("pk", flat=True)) == sorted(
        [decided_new.pk, open_old.pk]
    )
    assert sorted(Turn.objects.values_list("pk", flat=True)) == [done_new.pk, queued_old.pk]
    assert not TurnSlot.objects.exists()
    assert sorted(DBTaskResult.objects.values_list("pk", flat=True)) == sorted(
        [task_new.pk, task_ready.pk]
    )
    assert list(IdempotentRequest.objects.values_list("key", flat=True)) == ["k-new"]
    assert list(MeshSentMessage.objects.values_list("pk", flat=True)) == ["m-new"]
    assert list(MeshDelivery.objects.values_list("message_id", flat=True)) == ["m-new"]
    assert list(LiveEvent.objects.values_list("pk", flat=True)) == [event_new.pk]
    assert pruned["finished turns"] == 1
    assert pruned["consumed inbox items"] == 1
    assert pruned["decided approvals"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_retention_of_zero_days_keeps_a_table_forever(settings):
    settings.GLOVE_RETAIN_TURNS_DAYS = 0
    old = turn(make_session(), status=Turn.Status.DONE, age=OLD)

    pruned = retention_apply()

    assert "finished turns" not in pruned
    assert list(Turn.objects.values_list("pk", flat=True)) == [old.pk]


@pytest.mark.django_db(transaction=True)
def test_it_deletes_in_bounded_batches_never_one_huge_delete(settings):
    settings.GLOVE_RETENTION_BATCH = 2
    session = make_session()
    for index in range(5):
        inbox_item(session, f"old-{index}", status="consumed", age=OLD)

    with CaptureQueriesContext(connection) as queries:
        retention_apply()

    deletes = [
        q["sql"] for q in queries.captured_queries if q["sql"].startswith('DELETE FROM "inbox_')
    ]
    assert len(deletes) == 3  # 2 + 2 + 1
    assert not InboxItem.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_the_turn_worker_applies_retention_by_itself_with_no_cron_line():
    session = await sync_to_async(make_session)()
    old = await sync_to_async(turn)(session, status=Turn.Status.DONE, age=OLD)
    kept = await sync_to_async(turn)(session, status=Turn.Status.DONE, age=NEW)
    await serve_worker_until(
        lambda: not Turn.objects.filter(pk=old.pk).exists(), worker_id="retention-test", looks=200
    )

    assert [pk async for pk in Turn.objects.values_list("pk", flat=True)] == [kept.pk]


@pytest.mark.django_db(transaction=True)
async def test_the_turn_worker_expires_inbox_items_past_their_deadline_with_no_cron_line():
    session = await sync_to_async(make_session)()
    await InboxItem.objects.acreate(
        id="due",
        key="due",
        session=session,
        tag="t",
        request="?",
        created_at=ago(OLD),
        expires_at=ago(NEW),
    )
    await serve_worker_until(
        lambda: InboxItem.objects.get(pk="due").status != InboxItem.Status.PENDING,
        worker_id="expiry-test",
        looks=200,
    )
    item = await InboxItem.objects.aget(pk="due")

    assert (item.status, item.resolved_by) == ("resolved", "expiry")
    assert item.response.startswith("Expired:")


def login_record(model, name: str, age: timedelta, **extra):
    row = model.objects.create(
        username=name, ip_address="10.0.0.1", user_agent="b", path_info="/", **extra
    )
    model.objects.filter(pk=row.pk).update(attempt_time=ago(age))
    return row


@pytest.mark.django_db(transaction=True)
def test_it_forgets_old_login_records_but_never_an_attempt_that_may_still_lock_out(settings):
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog

    settings.GLOVE_RETAIN_LOGIN_RECORDS_DAYS = 1
    settings.AXES_COOLOFF_TIME = 72.0  # hours: longer than the retention
    attempt = {"get_data": "", "post_data": "", "failures_since_start": 3}
    for model, extra in ((AccessLog, {}), (AccessFailureLog, {}), (AccessAttempt, attempt)):
        for name, age in (("old", OLD), ("new", NEW), ("two-days", timedelta(days=2))):
            login_record(model, f"{model.__name__}-{name}", age, **extra)

    pruned = retention_apply()

    assert sorted(AccessLog.objects.values_list("username", flat=True)) == ["AccessLog-new"]
    assert list(AccessFailureLog.objects.values_list("username", flat=True)) == [
        "AccessFailureLog-new"
    ]
    # Two days old is past the retention, not past the cool-off: it may still lock out.
    assert sorted(AccessAttempt.objects.values_list("username", flat=True)) == [
        "AccessAttempt-new",
        "AccessAttempt-two-days",
    ]
    assert pruned["login records"] == 5
