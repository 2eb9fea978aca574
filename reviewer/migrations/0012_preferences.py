"""A person's own page settings: after a decision, the next item opens (on unless they turn it off)."""


import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('auth', '0012_alter_user_first_name_max_length'),
        ('reviewer', '0011_assignment_times'),
    ]

    operations = [
        migrations.CreateModel(
            name='Preferences',
            fields=[
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to=settings.AUTH_USER_MODEL)),
                ('next_after_decision', models.BooleanField(default=True, help_text='After a decision, open the next free item (claim next) rather than the queue.')),
            ],
        ),
    ]
