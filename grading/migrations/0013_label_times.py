"""Label times stored before validation refused them, outside the years Python can read (0001-01-01T00:00+14:00 was
stored as 1 BC), are repaired so their rows read again and importing their file again works."""

from django.db import migrations

# A label's time is when its labeller said they labelled; the one that cannot be read is replaced by when Tollgate
# recorded the label, the nearest time known to be true.
REPAIR_LABEL_TIMES = """
UPDATE grading_label SET labelled_at = created_at
 WHERE labelled_at < '0001-01-01 00:00:00+00' OR labelled_at >= '10000-01-01 00:00:00+00';
"""


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0012_criteria_trial_one_running"),
    ]

    operations = [
        migrations.RunSQL(REPAIR_LABEL_TIMES, reverse_sql=migrations.RunSQL.noop),
    ]
