# The admin's ledger filters, each one range of an index: one budget's rows newest first (a
# scan of the whole ledger before), and the released rows (a partial index: a reservation's
# insert does not enter it). `CREATE INDEX IF NOT EXISTS`: on a large ledger, build them
# beforehand with CREATE INDEX CONCURRENTLY under the same names (docs/howto/deploy.md).

from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent


class Migration(migrations.Migration):
    dependencies = [("budgets", "0001_initial")]

    operations = [
        add_index_if_absent(
            "budgets",
            "budgetreservation",
            models.Index(
                fields=["budget_key", "created_at", "id"], name="budget_ledger_budget_idx"
            ),
        ),
        add_index_if_absent(
            "budgets",
            "budgetreservation",
            models.Index(
                fields=["created_at", "id"],
                condition=models.Q(state="released"),
                name="budget_ledger_released_idx",
            ),
        ),
    ]
