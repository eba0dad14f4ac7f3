"""What the replay fault tests do in the live server's database, from a process of its own
(`python -m tests.versions.live <step> ...`, with the server's environment); each step
prints its answer as JSON.

    record COUNT DELAY   COUNT recorded conversations of the shop agent and a draft on the
                         same prompt whose model takes DELAY seconds a call; their ids
    ask_publish          a published v1, a draft v2, publishing through an approval, asked
                         by "asker": the approval's id and fingerprint
    approve ID FP        "approver" approves it
"""

from __future__ import annotations

import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.versions.live_settings")
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402

from gloveapp.approvals.services import approval_decide  # noqa: E402
from gloveapp.conversations.services import session_create  # noqa: E402
from gloveapp.core.approvals.decisions import Decision  # noqa: E402
from gloveapp.versions.models import AgentPointer  # noqa: E402
from gloveapp.versions.promotion import publish_request  # noqa: E402
from gloveapp.versions.services import version_draft, version_publish  # noqa: E402
from tests.fakes import replay_model  # noqa: E402
from tests.versions.conftest import TEXTS  # noqa: E402


def _person(name: str):
    user, _ = get_user_model().objects.get_or_create(
        username=name, defaults={"is_staff": True, "is_superuser": True}
    )
    return user


def record(count: int, delay: float) -> list[str]:
    owner = get_user_model().objects.create_user("carla")
    ids = []
    for index in range(count):
        session = session_create(owner=owner, agent_name="shop", session_id=f"chat-{index}")
        replay_model.record(session.pk, TEXTS[index % len(TEXTS)])
        ids.append(session.pk)
    version_draft(
        agent_name="shop", system_prompt=replay_model.PROMPT, model_settings={"delay": delay}
    )
    return ids


def ask_publish() -> dict[str, str]:
    asker = _person("asker")
    version_publish(version=version_draft(agent_name="shop", system_prompt=replay_model.PROMPT))
    draft = version_draft(agent_name="shop", system_prompt=replay_model.PROMPT + "\nBe brief.")
    AgentPointer.objects.filter(pk="shop").update(publish_needs_approval=True)
    request = publish_request(version=draft, by=asker)
    from gloveapp.approvals.models import ApprovalRequest

    approval = ApprovalRequest.objects.get(pk=request.approval_id)
    return {"id": str(approval.pk), "fingerprint": approval.fingerprint}


def approve(approval_id: str, fingerprint: str) -> str:
    approval_decide(
        request_id=approval_id,
        decision=Decision(kind="approve", fingerprint=fingerprint),
        channel="python",
        user=_person("approver"),
    )
    return "approved"


if __name__ == "__main__":
    step, *args = sys.argv[1:]
    if step == "record":
        answer: object = record(int(args[0]), float(args[1]))
    elif step == "ask_publish":
        answer = ask_publish()
    else:
        answer = approve(*args)
    print(json.dumps(answer))
