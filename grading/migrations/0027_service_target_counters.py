from django.db import migrations

# The queue's service-level figures (decided on time or late, the time taken and the target given, by week of the
# decision) are counters now (grading/figures/definitions.py, `decided_due` and `decided_due_s`), read where they
# were counted from the decisions on each page view. Counted here for the decisions made so far, as the hourly
# rebuild counts them, so the dashboard keeps its past weeks from the upgrade on. A decision booked meanwhile by a
# worker still running the old code is put right by the next hourly rebuild.
_CELL = """rv.org_id, rv.kind, rv.criteria_version_id,
    CASE WHEN rv.kind = 'draft' THEN '' ELSE COALESCE(NULLIF(rv.application, ''), c.application, '') END,
    date_trunc('week', dc.decided_at AT TIME ZONE 'UTC')::date"""
_DATED = """FROM grading_decision dc
JOIN grading_review rv ON rv.id = dc.review_id AND rv.state <> 'trial'
    AND rv.due_at IS NOT NULL AND rv.routed_at IS NOT NULL
LEFT JOIN grading_conversation c ON c.id = rv.conversation_id"""
_SECONDS = "greatest(0, floor(extract(epoch FROM {later} - {earlier})))::bigint"
SERVICE_TARGET_COUNTERS = (
    "DELETE FROM grading_rollup WHERE metric IN ('decided_due', 'decided_due_s')",
    f"""
INSERT INTO grading_rollup (org_id, kind, criteria_id, application, week, metric, key1, key2, value, updated_at)
SELECT {_CELL}, 'decided_due', CASE WHEN dc.decided_at <= rv.due_at THEN 'on_time' ELSE 'late' END, '', count(*),
    now()
{_DATED}
GROUP BY 1, 2, 3, 4, 5, 7
UNION ALL
SELECT {_CELL}, 'decided_due_s', x.key1, '', sum(x.seconds), now()
{_DATED}
CROSS JOIN LATERAL (
    SELECT 'took' AS key1, {_SECONDS.format(later="dc.decided_at", earlier="rv.routed_at")} AS seconds
    UNION ALL SELECT 'target', {_SECONDS.format(later="rv.due_at", earlier="rv.routed_at")}
) x
GROUP BY 1, 2, 3, 4, 5, 7
HAVING sum(x.seconds) <> 0
""",  # noqa: S608 - constants of this migration
)


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0026_decisions_credited_to_their_people"),
    ]

    operations = [
        migrations.RunSQL(list(SERVICE_TARGET_COUNTERS), migrations.RunSQL.noop),
    ]
