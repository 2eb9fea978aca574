from django.db import migrations

# The `decided_by` counters credited an agreed decision (several people answered alike) to person 0, "a former
# user"; they now credit it to each person whose answer made it (grading/figures/definitions.py, EACH_DECIDER).
# Counted again here, as the hourly rebuild counts them, so the dashboard is right from the upgrade on. A write
# booked by a worker still running the old code meanwhile is put right by the next hourly rebuild.
DECISIONS_CREDITED = (
    "DELETE FROM grading_rollup WHERE metric = 'decided_by'",
    """
INSERT INTO grading_rollup (org_id, kind, criteria_id, application, week, metric, key1, key2, value, updated_at)
SELECT rv.org_id, rv.kind, rv.criteria_version_id,
    CASE WHEN rv.kind = 'draft' THEN '' ELSE COALESCE(NULLIF(rv.application, ''), c.application, '') END,
    date_trunc('week', dc.decided_at AT TIME ZONE 'UTC')::date, 'decided_by', decider.person::text, '', count(*), now()
FROM grading_decision dc
JOIN grading_review rv ON rv.id = dc.review_id AND rv.state <> 'trial'
LEFT JOIN grading_conversation c ON c.id = rv.conversation_id
CROSS JOIN LATERAL (
    SELECT COALESCE(dc.decided_by_id, 0) AS person WHERE dc.basis <> 'agreed'
    UNION ALL SELECT a.person_id FROM grading_answer a WHERE dc.basis = 'agreed' AND a.review_id = rv.id
) decider
GROUP BY 1, 2, 3, 4, 5, 7
ON CONFLICT ON CONSTRAINT rollup_unique_cell_counter DO UPDATE SET value = grading_rollup.value + EXCLUDED.value
""",
)


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0025_retention_erasure_audit_items"),
    ]

    operations = [
        migrations.RunSQL(list(DECISIONS_CREDITED), migrations.RunSQL.noop),
    ]
