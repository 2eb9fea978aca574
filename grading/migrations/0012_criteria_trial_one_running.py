from django.conf import settings
from django.db import migrations, models

# Versions may already have several trials running (they were not limited): all but the newest of each are closed,
# so that the constraint can be made. Their tasks still record what they grade.
CLOSE_ALL_BUT_THE_NEWEST = """
UPDATE grading_criteriatrial AS trial SET finished_at = now()
WHERE trial.finished_at IS NULL AND EXISTS (
    SELECT 1 FROM grading_criteriatrial AS newer
    WHERE newer.criteria_version_id = trial.criteria_version_id AND newer.finished_at IS NULL AND newer.id > trial.id
)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0011_grading_tickets"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunSQL(CLOSE_ALL_BUT_THE_NEWEST, migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name="criteriatrial",
            constraint=models.UniqueConstraint(
                condition=models.Q(("finished_at__isnull", True)),
                fields=("criteria_version",),
                name="criteria_trial_one_running_per_version",
            ),
        ),
    ]
