"""`manage.py setup_demo`: the demo users, the shop and a first chat; prints how to log in."""

from __future__ import annotations

import os

from django.core.management.base import BaseCommand

from gloveapp.agents.config import model_label
from gloveapp.demo.bootstrap import DemoAccount, demo_setup


class Command(BaseCommand):
    help = "Create the demo user, the staff user and a first coffee-shop chat (idempotent)."

    def handle(self, *args, **options) -> None:
        result = demo_setup(
            demo_password=os.environ.get("DEMO_PASSWORD") or None,
            staff_password=os.environ.get("STAFF_PASSWORD") or None,
            barista_password=os.environ.get("BARISTA_PASSWORD") or None,
            manager_password=os.environ.get("MANAGER_PASSWORD") or None,
        )
        base = f"http://{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
        write = self.stdout.write
        write(self.style.SUCCESS("glove-django demo is ready."))
        write(f"  Chat:   {base}/")
        write(f"  Admin:  {base}/admin/")
        write(f"  Model:  {model_label()}")
        write(f"  Customer login: {self._login(result.demo)}")
        write(f"  Staff login:    {self._login(result.staff)}  (admin)")
        write(f"  Approvers:      {self._login(result.barista)} (baristas), ")
        write(f"                  {self._login(result.manager)} (managers): {base}/approvals/")
        write(f"  First chat: {base}/sessions/{result.session_id}/")
        write("  Try: 'show me the menu', 'do you have Yirgacheffe?', 'yes', 'add 2 Kenya AA',")
        write("       'checkout'. Then, as staff, open Admin -> Coffees, select Ethiopia")
        write("       Yirgacheffe and run 'Restock 12 bags and notify restock watchers': the")
        write("       watch resolves, the chat's sidebar updates live, and the customer's next")
        write("       message hears the news. (Resolving the item under Inbox items relays a")
        write("       reply too, but leaves the shelf empty.)")
        write("  Approvals: 'add 6 Colombia', 'checkout, pay at pickup' waits for a barista on")
        write(
            "       /approvals/, who may change the quantity; the chat goes on when they approve."
        )
        write("  Mesh (make run starts the roastery agent): 'ask the roastery about Kenya AA',")
        write("       then any message: Brew relays the roastery's answer. Admin -> Mesh traffic.")
        write(f"  Workspace inbox: {base}/inbox/  (an agent working in a folder pushes to you)")
        write("       python manage.py create_workspace --label Research --root ~/research \\")
        write("           --owner demo --write        # writes ~/research/.mcp.json")
        write("       Start Claude Code in that folder (or run examples/mcp_client.py with the")
        write("       URL and token in .mcp.json) and ask it to push to the inbox; reply from")
        write("       /inbox/ and the agent reads your reply with inbox_read.")
        write("       Tour: docs/tutorial/index.md")

    def _login(self, account: DemoAccount) -> str:
        if account.password is None:
            return f"{account.username} (existing account, password unchanged)"
        return f"{account.username} / {account.password}"
