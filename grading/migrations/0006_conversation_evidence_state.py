from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0005_one_active_strategy"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="evidence_state",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
