"""Assignment end times stored before the API refused them, outside the years Python can read (until
9999-12-31T23:59:59-14:00 was stored as the year 10000), are repaired: while one was stored, the queue, the item page
and the assignment itself answered 500 to everyone who could see the item."""

from django.db import migrations

# Clamped to the nearest instant Python can read, not dropped: the assignment stays as the lead or the key made it
# and means what it meant. An end past the year 9999 still never comes while anyone works the queue (and the audit
# event keeps the time that was asked for); one before the year 1 has long passed, as it had.
REPAIR_ASSIGNMENT_TIMES = """
UPDATE reviewer_assignment SET until = '9999-12-31 23:59:59.999999+00' WHERE until >= '10000-01-01 00:00:00+00';
UPDATE reviewer_assignment SET until = '0001-01-01 00:00:00+00' WHERE until < '0001-01-01 00:00:00+00';
"""


class Migration(migrations.Migration):
    dependencies = [
        ("reviewer", "0010_invitation"),
    ]

    operations = [
        migrations.RunSQL(REPAIR_ASSIGNMENT_TIMES, reverse_sql=migrations.RunSQL.noop),
    ]
