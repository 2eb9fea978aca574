from django.db import migrations

# The certified panel's counters (grading/figures/definitions.py, metric `certified`) of the reviews graded before
# 0044 stored their pass probability: counted here, as the hourly rebuild counts them, so the panel reads the past
# weeks from the upgrade on (the hourly rebuild recounts only the weeks written since it last ran, so they waited for
# the next daily full rebuild, which reported them as drift). The metric's counters are replaced with a recount, so
# it comes out the same whether or not a write or a rebuild booked some since 0044: a counter the recount gives is
# set to it, any other of the metric deleted. As a rebuild books only what drifted, a counter already right is left
# as it is, its time of change too (the staleness card's "last write", which a round trip through the migrations
# leaves where it was).
#
# The metric's rules are written out as they stand here, not read from the figures' table, which may change after
# this migration: per counting review (current, waiting, decided), filed in its cell (org, kind, criteria version,
# application, week) as a whole and under each text value of its `slice` ("name=value"): of those the judge graded
# (not not_scorable, not error, a pass probability stored), how many (`items`) and the sums of the probability's
# fixed point q = floor(p * 2**32) (`q`) and of the products of its halves (`hi2`, `hilo`, `lo2`); of those routed
# pass or fail under a certificate, how many (`decided_alone`). A counter that sums to 0 is not stored.
#
# The table is locked against writes (page views go on reading it): a worker booking these counters meanwhile waits,
# then adds its review to the recount, which did not see it; unlocked, the recount could overwrite its increment.
# Before that, it waits for the rebuilds booking (grading/reviews/rollups.py: they hold the advisory key (7418, 0)
# shared) and keeps others from booking until it commits; then they find it applied and book nothing: a rebuild that
# counted before the recount would book the drift it saw on top of it.
_CELL = """rv.org_id, rv.kind, rv.criteria_version_id,
    CASE WHEN rv.kind = 'draft' THEN '' ELSE COALESCE(NULLIF(rv.application, ''), c.application, '') END,
    COALESCE(rv.week, date_trunc('week',
        (CASE WHEN rv.kind = 'draft' THEN rv.finished_at ELSE c.started_at END) AT TIME ZONE 'UTC')::date)"""
_Q = "floor(rv.pass_probability * 4294967296)::bigint"
_HI, _LO = f"({_Q} >> 16)", f"({_Q} & 65535)"
_KEY = ("org_id", "kind", "criteria_id", "application", "week", "metric", "key1", "key2", "slice")


def _key(alias: str = "") -> str:
    return ", ".join(f"{alias}{column}" for column in _KEY)


CERTIFIED_COUNTERS = (
    "SELECT pg_advisory_xact_lock(7418, 0)",
    "LOCK TABLE grading_rollup IN EXCLUSIVE MODE",
    f"""
WITH recount ({_key()}, value) AS MATERIALIZED (
    SELECT {_CELL}, 'certified', x.key1, '', sliced.slice, sum(x.amount)::bigint
    FROM grading_review rv
    LEFT JOIN grading_conversation c ON c.id = rv.conversation_id
    CROSS JOIN LATERAL (
        SELECT rv.route NOT IN ('not_scorable', 'error') AND rv.pass_probability IS NOT NULL AS graded,
            rv.route IN ('pass', 'fail') AND rv.certificate_id IS NOT NULL AS alone
    ) f
    CROSS JOIN LATERAL (VALUES
        ('items', 1::bigint, f.graded), ('q', {_Q}, f.graded), ('hi2', {_HI} * {_HI}, f.graded),
        ('hilo', {_HI} * {_LO}, f.graded), ('lo2', {_LO} * {_LO}, f.graded), ('decided_alone', 1::bigint, f.alone)
    ) x(key1, amount, counts)
    CROSS JOIN LATERAL (
        SELECT '' AS slice
        UNION ALL SELECT left(s.key || '=' || (s.value #>> '{{}}'), 300) FROM jsonb_each(
            CASE WHEN jsonb_typeof(rv.slice) = 'object' THEN rv.slice ELSE '{{}}'::jsonb END) s
        WHERE jsonb_typeof(s.value) = 'string'
    ) sliced
    WHERE rv.state IN ('current', 'waiting', 'decided') AND x.counts
    GROUP BY 1, 2, 3, 4, 5, 7, 9
    HAVING sum(x.amount) <> 0
), gone AS (
    DELETE FROM grading_rollup g WHERE g.metric = 'certified'
        AND NOT EXISTS (SELECT 1 FROM recount n WHERE ({_key("n.")}) = ({_key("g.")}))
)
INSERT INTO grading_rollup ({_key()}, value, updated_at)
SELECT {_key()}, value, now() FROM recount
ON CONFLICT ON CONSTRAINT rollup_unique_cell_counter
DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at WHERE grading_rollup.value <> EXCLUDED.value
""",  # noqa: S608 - constants of this migration
)


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0044_review_pass_probability"),
    ]

    operations = [
        migrations.RunSQL(list(CERTIFIED_COUNTERS), migrations.RunSQL.noop),
    ]
