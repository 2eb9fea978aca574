from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0006_review_state"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="evidence_state",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
