"""Indexes the review queue reads in order. They live on grading's review table, so they are plain SQL here
(grading owns the model; see the note in reviewer/selectors.py `queue_reviews`). Both are partial: only reviews
routed to humans that are their item's current one, a small slice of all reviews."""

from django.db import migrations

# The priority expression must be exactly reviewer.selectors.PRIORITY as Django writes it, so the planner
# recognises it and reads rows in queue order instead of sorting.
PRIORITY = "(CASE WHEN kind = 'draft' THEN 0 ELSE 1 END)"
WHERE = "WHERE is_current AND route = 'human'"


class Migration(migrations.Migration):
    dependencies = [("reviewer", "0002_claims_and_decisions")]
    # The indexes read is_current, which grading 0006 replaces (reviewer 0004 drops them again).
    run_before = [("grading", "0006_review_state")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX IF NOT EXISTS reviewer_queue_order ON grading_review (org_id, {PRIORITY}, finished_at, id) {WHERE}",
            "DROP INDEX IF EXISTS reviewer_queue_order",
        ),
        migrations.RunSQL(
            f"CREATE INDEX IF NOT EXISTS reviewer_queue_reason ON grading_review "
            f"(org_id, reason, {PRIORITY}, finished_at, id) {WHERE}",
            "DROP INDEX IF EXISTS reviewer_queue_reason",
        ),
    ]
