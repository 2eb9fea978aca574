"""The conversation's org_id index goes: conversation_unique_external_id (org_id, external_id) serves every lookup by
org, and the single-column index was what generic plans chose for a lookup by external id (grading/models.py)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0013_label_times"),
    ]

    operations = [
        migrations.AlterField(
            model_name="conversation",
            name="org",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="conversations",
                to="grading.org",
            ),
        ),
    ]
