# The coffee shop's models moved here from the agents app. State only: the tables
# `agents_coffee`, `agents_order` and `agents_cartline` (created by agents.0001) keep their rows.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('agents', '0001_initial'),
        ('conversations', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
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
            ],
            database_operations=[],
        ),
    ]
