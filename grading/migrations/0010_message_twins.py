"""Messages sent twice under one id in a payload are kept (as twins) so the record reads `duplicate_id`; and times
stored before validation refused them, outside the years Python can read, are repaired so their rows read again."""

from django.db import migrations, models

# PostgreSQL holds times from 4713 BC; Python only the years 1 to 9999. A row outside that cannot be read at all, so
# the times are put where reading works: a message's time is not evidence (it is dropped, as importers drop a bad
# one), and a conversation's start and last activity become the time it was last written.
REPAIR_TIMES = """
UPDATE grading_message SET created_at = NULL
 WHERE created_at < '0001-01-01 00:00:00+00' OR created_at >= '10000-01-01 00:00:00+00';
UPDATE grading_conversation SET started_at = updated_at
 WHERE started_at < '0001-01-01 00:00:00+00' OR started_at >= '10000-01-01 00:00:00+00';
UPDATE grading_conversation SET last_activity_at = updated_at
 WHERE last_activity_at < '0001-01-01 00:00:00+00' OR last_activity_at >= '10000-01-01 00:00:00+00';
"""


class Migration(migrations.Migration):

    dependencies = [
        ('grading', '0009_criteria_editing'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='message',
            name='message_unique_external_id',
        ),
        migrations.AddField(
            model_name='message',
            name='twin',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.UniqueConstraint(fields=('conversation', 'external_id', 'twin'), name='message_unique_external_id_twin'),
        ),
        migrations.RunSQL(REPAIR_TIMES, reverse_sql=migrations.RunSQL.noop),
    ]
