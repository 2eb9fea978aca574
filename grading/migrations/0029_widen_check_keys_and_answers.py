"""A check's key is up to 32 characters, and so is an answer (a category's key): labels and worked examples keep
both, so their columns are widened (issue 39)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0028_criteria_version_checks"),
    ]

    operations = [
        migrations.AlterField(
            model_name="criteriaexample",
            name="check_name",
            field=models.CharField(help_text="A check of the version's, or pass_fail for a draft.", max_length=32),
        ),
        migrations.AlterField(
            model_name="criteriaexample",
            name="human_verdict",
            field=models.CharField(help_text="The person's answer, as a review stores it.", max_length=32),
        ),
        migrations.AlterField(
            model_name="criteriaexample",
            name="machine_verdict",
            field=models.CharField(blank=True, help_text="The machine's at the time, if any.", max_length=32),
        ),
        migrations.AlterField(
            model_name="label",
            name="check_name",
            field=models.CharField(
                help_text="A check of the item's criteria, or pass_fail for the item.", max_length=32
            ),
        ),
        migrations.AlterField(
            model_name="label",
            name="verdict",
            field=models.CharField(
                help_text="The answer, as a review stores it: pass, a category, a score.", max_length=32
            ),
        ),
    ]
