# The coffee shop's models now belong to the demo app (demo.0001). State only: the tables stay.

from django.db import migrations


def move_content_types(apps, schema_editor):
    # Keep the admin permissions and log entries of existing databases: the content types
    # follow the models to their new app (a fresh database has none yet at this point).
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in ("coffee", "order", "cartline"):
        if not content_type.objects.filter(app_label="demo", model=model).exists():
            content_type.objects.filter(app_label="agents", model=model).update(app_label="demo")


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0001_initial'),
        ('demo', '0001_initial'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='CartLine'),
                migrations.DeleteModel(name='Order'),
                migrations.DeleteModel(name='Coffee'),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_types, migrations.RunPython.noop),
    ]
