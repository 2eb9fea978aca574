from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0023_judges_examples_spend"),
    ]

    operations = [
        migrations.AddField(
            model_name="gradingrun",
            name="spend_capped",
            field=models.PositiveIntegerField(
                default=0, help_text="Items left waiting because a spend cap of their org or version was reached."
            ),
        ),
    ]
