# LiveEvent now belongs to the live app (live.0001). State only: the table stays.

from django.db import migrations


def move_content_type(apps, schema_editor):
    # Keep the admin permissions of existing databases: the content type follows the model.
    content_type = apps.get_model("contenttypes", "ContentType")
    if not content_type.objects.filter(app_label="live", model="liveevent").exists():
        content_type.objects.filter(app_label="conversations", model="liveevent").update(
            app_label="live"
        )


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0001_initial'),
        ('live', '0001_initial'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='LiveEvent')],
            database_operations=[],
        ),
        migrations.RunPython(move_content_type, migrations.RunPython.noop),
    ]
