"""The coffee shop: coffees, orders and cart lines.

The tables keep the names they had when the models lived in the agents app (`agents_coffee`,
`agents_order`, `agents_cartline`). The admin's filter by payment, in the list's order, is
built with `CREATE INDEX IF NOT EXISTS` on PostgreSQL (`add_index_if_absent`: it may be built
beforehand with CREATE INDEX CONCURRENTLY under the same name, docs/howto/deploy.md).
"""

import django.db.models.deletion
from django.db import migrations, models

from gloveapp.lib.db.migrations import add_index_if_absent


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('conversations', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='Coffee',
            fields=[
                ('sku', models.CharField(max_length=50, primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=100)),
                ('origin', models.CharField(blank=True, default='', max_length=100)),
                ('notes', models.CharField(blank=True, default='', max_length=200)),
                ('price_cents', models.PositiveIntegerField()),
                ('stock', models.PositiveIntegerField(default=0, help_text='Bags on the shelf.')),
                ('position', models.PositiveIntegerField(default=0)),
            ],
            options={
                'db_table': 'agents_coffee',
                'verbose_name_plural': 'coffees',
                'ordering': ['position', 'sku'],
            },
        ),
        migrations.CreateModel(
            name='Order',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('lines', models.JSONField(default=list)),
                ('total_cents', models.PositiveIntegerField()),
                ('payment', models.CharField(choices=[('saved_card', 'saved card'), ('pickup', 'pay at pickup')], max_length=20)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='coffee_orders', to='conversations.session')),
            ],
            options={
                'db_table': 'agents_order',
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['created_at', 'id'], name='order_created_idx')],
            },
        ),
        migrations.CreateModel(
            name='CartLine',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('quantity', models.PositiveIntegerField(default=1)),
                ('added_at', models.DateTimeField(auto_now_add=True)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='coffee_cart_lines', to='conversations.session')),
                ('coffee', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='demo.coffee')),
            ],
            options={
                'db_table': 'agents_cartline',
                'ordering': ['added_at', 'id'],
                'constraints': [models.UniqueConstraint(fields=('session', 'coffee'), name='cartline_unique_coffee')],
            },
        ),
        add_index_if_absent(
            "demo",
            "order",
            models.Index(fields=["payment", "created_at", "id"], name="order_payment_idx"),
        ),
    ]
