"""What goes into Slack-style text and CSV cells cannot become a link or a formula."""

from __future__ import annotations

import csv
import io
import json

import pytest

from gloveapp.approvals.models import ApprovalDecision
from gloveapp.approvals.services import approval_decide
from gloveapp.core.approvals.decisions import Decision
from gloveapp.core.escaping import csv_cell
from tests.approvals.helpers import open_request
from tests.approvals.mailserver import HookReceiver
from tests.approvals.test_page import client_for

pytestmark = pytest.mark.django_db

FAKE_LINK = "```<https://evil.example|Approve here>```"


def test_a_coffee_named_like_a_link_stays_text_in_the_slack_webhook(settings, session_id, barista):
    from gloveapp.approvals.notifications import notifications_deliver

    barista.email = "bea@example.com"
    barista.save()
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    settings.GLOVE_APPROVAL_WEBHOOK_SECRET = "the-secret-that-signs-our-notifications"
    with HookReceiver(statuses=[]) as hook:
        settings.GLOVE_APPROVAL_WEBHOOKS = {"baristas": hook.url}
        open_request(session_id, args={"product": FAKE_LINK, "quantity": 12})
        notifications_deliver()
        [payload] = [body for body in hook.bodies() if "blocks" in body]

    code = payload["blocks"][1]["text"]["text"]
    inside = code.removeprefix("```").removesuffix("```")
    assert "```" not in inside and "`" not in inside  # the block cannot be closed early
    assert "<" not in inside and ">" not in inside  # no link, mention or <!channel>
    assert "&lt;https://evil.example|Approve here&gt;" in inside
    for block in payload["blocks"][:2]:
        assert "<https://evil.example" not in block["text"]["text"]
    # Receivers that read the JSON get the arguments exactly as they are.
    assert payload["approval"]["args"]["product"] == FAKE_LINK


@pytest.mark.parametrize(
    "hostile", ['=HYPERLINK("https://evil.example","x")', "+1+1", "-2", "@SUM(A1)", "\tx", "\rx"]
)
def test_the_audit_csv_keeps_formulas_as_text(session_id, barista, admin_user, hostile):
    row = open_request(session_id)
    approval_decide(
        request_id=row.pk,
        decision=Decision("reject", row.fingerprint, reason=hostile),
        user=barista,
        channel="page",
    )

    exported = client_for(admin_user).post(
        "/admin/approvals/approvaldecision/",
        {"action": "export_audit", "_selected_action": [ApprovalDecision.objects.get().pk]},
    )
    lines = list(csv.reader(io.StringIO(b"".join(exported.streaming_content).decode())))

    reason = lines[1][lines[0].index("reason")]
    assert reason == "'" + hostile
    for cell in lines[1]:
        assert not cell.startswith(("=", "+", "-", "@", "\t", "\r"))


def test_a_plain_cell_is_left_alone():
    assert csv_cell("Yirgacheffe") == "Yirgacheffe"
    assert csv_cell(json.dumps({"a": "=1"})) == '{"a": "=1"}'
    assert csv_cell(12) == 12
