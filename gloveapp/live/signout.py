"""Close a user's sockets when their login ends: on logout and when their password changes.

A socket is authorised when it connects; without this it would go on streaming to a
browser whose user has logged out (or to whoever stole a session that a password change
was meant to end). Every socket joins its user's group; these receivers send that group a
`user.signed_out` message after the change commits, and each socket closes with 4401. The
same is stored in the event log (stream `user:<pk>`), which every socket also watches, so a
logout while Redis is away still closes them (at the relay's poll cadence).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_save, pre_save

from gloveapp.live.eventlog import record_event
from gloveapp.live.streams import user_stream

SIGNED_OUT = "user.signed_out"


def user_group(user_pk: Any) -> str:
    return f"user.{user_pk}"


def close_users_sockets(user_pk: Any) -> None:
    # Stored first: each process's relay closes the user's sockets from the event log even
    # while the channel layer's Redis is away (it would drop the message below). The
    # channel layer's message closes them at once when Redis is there.
    with transaction.atomic():
        record_event(stream=user_stream(user_pk), type=SIGNED_OUT, payload={})
    layer = get_channel_layer()
    if layer is not None:
        group = user_group(user_pk)
        async_to_sync(layer.group_send)(group, {"type": "user.signed_out", "group": group})


def _on_logged_out(sender, request, user, **kwargs) -> None:
    if user is not None and user.pk is not None:
        transaction.on_commit(lambda: close_users_sockets(user.pk))


def _note_password_change(sender, instance, update_fields=None, **kwargs) -> None:
    # Compared with the stored hash before the save; a login saving only `last_login`
    # (update_fields) is not a password change.
    instance._glove_password_changed = False
    if instance.pk is None or (update_fields is not None and "password" not in update_fields):
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    instance._glove_password_changed = stored is not None and stored != instance.password


def _on_saved(sender, instance, created, **kwargs) -> None:
    if getattr(instance, "_glove_password_changed", False):
        instance._glove_password_changed = False
        pk = instance.pk
        transaction.on_commit(lambda: close_users_sockets(pk))


def connect_signals() -> None:
    User = get_user_model()
    user_logged_out.connect(_on_logged_out, dispatch_uid="glove-live-logout")
    pre_save.connect(_note_password_change, sender=User, dispatch_uid="glove-live-password")
    post_save.connect(_on_saved, sender=User, dispatch_uid="glove-live-password-saved")
