# The usage page's days kept as data (`turns.usage_rollup`): a row a day, summed from its
# turn steps by the turn worker's scheduler, so the page never reads the steps.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('turns', '0014_admin_filter_indexes'),
    ]

    operations = [
        migrations.CreateModel(
            name='UsageDay',
            fields=[
                ('day', models.DateField(primary_key=True, serialize=False)),
                ('summary', models.JSONField()),
                ('steps', models.PositiveIntegerField(default=0)),
                ('computed_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['day'],
            },
        ),
    ]
