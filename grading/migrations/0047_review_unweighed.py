"""An index of the reviews the judge graded with no pass probability, which the hourly rebuild's task looks for
first (grading/reviews/services.py `pass_probabilities_backfill`): only a worker still on an older release writes
one, during an upgrade, so the index is empty out of one."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0046_certified_audit_counters"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="review",
            index=models.Index(
                condition=models.Q(
                    ("pass_probability__isnull", True),
                    models.Q(("route__in", ("not_scorable", "error")), _negated=True),
                ),
                fields=["org"],
                name="review_unweighed",
            ),
        ),
    ]
