"""Decisions become part of grading's record of a review (grading 0006 made the table); the review state
replaces the decided-prefix mark (QueueHead) and the queue indexes this app had put on grading's table; and
grading's models lose their reverse accessors into this app."""

import django.db.models.deletion
from django.db import migrations, models

COPY_DECISIONS = """
    INSERT INTO grading_decision (id, org_id, review_id, outcome, checks, note, decided_by_id, decided_at, learning_id)
    SELECT id, org_id, review_id, outcome, checks, note, decided_by_id, decided_at, learning_id FROM reviewer_decision;
    SELECT setval(pg_get_serial_sequence('grading_decision', 'id'), COALESCE(MAX(id), 1), MAX(id) IS NOT NULL)
        FROM grading_decision;
    UPDATE grading_review SET state = 'decided'
        WHERE state = 'waiting' AND id IN (SELECT review_id FROM grading_decision);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0006_review_state"),
        ("reviewer", "0003_queue_indexes"),
    ]

    operations = [
        migrations.RunSQL(COPY_DECISIONS, migrations.RunSQL.noop),
        migrations.DeleteModel(name="Decision"),
        migrations.DeleteModel(name="QueueHead"),
        migrations.RunSQL(
            "DROP INDEX IF EXISTS reviewer_queue_order; DROP INDEX IF EXISTS reviewer_queue_reason",
            migrations.RunSQL.noop,
        ),
        *(
            migrations.AlterField(
                model_name=model,
                name=field,
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to=target),
            )
            for model, field, target in [
                ("claim", "org", "grading.org"),
                ("claim", "review", "grading.review"),
                ("membership", "org", "grading.org"),
            ]
        ),
    ]
