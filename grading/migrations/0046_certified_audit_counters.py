from django.db import migrations

# The certified panel's counters of people's audit verdicts (grading/figures/definitions.py, metric `certified`, key2
# `audited` and `passed`): from here the panel reads the audited items' sums from counters, not the audited items one
# by one, so the counters of the reviews graded and decided before are counted here, as the hourly rebuild counts
# them (it recounts only the weeks written since it last ran). The metric's counters are recounted whole, as 0045
# did, and replaced the same way: a counter the recount gives is set to it, any other of the metric deleted, and one
# already right is left as it is, its time of change too.
#
# The metric's rules are written out as they stand here, not read from the figures' table, which may change after
# this migration: 0045's, and per counting review the judge graded whose evidence has people's audit verdict (the
# latest decision on an audit review of its item with its fingerprint that answers something: a draft's, or a
# conversation's with a check answered), the same sums under key2 `audited`; of those people passed (the draft
# approved, the conversation's outcome `pass`), how many and their Σq under key2 `passed`.
#
# The rebuilds are waited for and kept off, and the table is locked against writes (page views go on reading it),
# for 0045's reasons.
_CELL = """rv.org_id, rv.kind, rv.criteria_version_id,
    CASE WHEN rv.kind = 'draft' THEN '' ELSE COALESCE(NULLIF(rv.application, ''), c.application, '') END,
    COALESCE(rv.week, date_trunc('week',
        (CASE WHEN rv.kind = 'draft' THEN rv.finished_at ELSE c.started_at END) AT TIME ZONE 'UTC')::date)"""
_Q = "floor(rv.pass_probability * 4294967296)::bigint"
_HI, _LO = f"({_Q} >> 16)", f"({_Q} & 65535)"
_KEY = ("org_id", "kind", "criteria_id", "application", "week", "metric", "key1", "key2", "slice")
_LATEST_AUDIT = """(
    SELECT dc.outcome IN ('approve', 'pass')
    FROM grading_review ar JOIN grading_decision dc ON dc.review_id = ar.id
    WHERE ar.{item} = rv.{item} AND ar.fingerprint = rv.fingerprint AND ar.audit {answered}
    ORDER BY dc.decided_at DESC, dc.id DESC LIMIT 1)"""
_ANSWERED = """AND EXISTS (SELECT FROM jsonb_each(
        CASE WHEN jsonb_typeof(dc.checks) = 'object' THEN dc.checks ELSE '{}'::jsonb END) said
        WHERE jsonb_typeof(said.value) = 'string')"""
_AUDIT_PASSED = f"""CASE WHEN rv.kind = 'draft' THEN {_LATEST_AUDIT.format(item="draft_id", answered="")}
    ELSE {_LATEST_AUDIT.format(item="conversation_id", answered=_ANSWERED)} END"""


def _key(alias: str = "") -> str:
    return ", ".join(f"{alias}{column}" for column in _KEY)


def _sums(key2: str, counts: str) -> str:
    return f"""('items', '{key2}', 1::bigint, {counts}), ('q', '{key2}', {_Q}, {counts}),
        ('hi2', '{key2}', {_HI} * {_HI}, {counts}), ('hilo', '{key2}', {_HI} * {_LO}, {counts}),
        ('lo2', '{key2}', {_LO} * {_LO}, {counts})"""


CERTIFIED_COUNTERS = (
    "SELECT pg_advisory_xact_lock(7418, 0)",
    "LOCK TABLE grading_rollup IN EXCLUSIVE MODE",
    f"""
WITH recount ({_key()}, value) AS MATERIALIZED (
    SELECT {_CELL}, 'certified', x.key1, x.key2, sliced.slice, sum(x.amount)::bigint
    FROM grading_review rv
    LEFT JOIN grading_conversation c ON c.id = rv.conversation_id
    CROSS JOIN LATERAL (
        SELECT rv.route NOT IN ('not_scorable', 'error') AND rv.pass_probability IS NOT NULL AS graded,
            rv.route IN ('pass', 'fail') AND rv.certificate_id IS NOT NULL AS alone
    ) f
    CROSS JOIN LATERAL (
        SELECT CASE WHEN f.graded THEN {_AUDIT_PASSED} END AS passed
    ) people
    CROSS JOIN LATERAL (VALUES
        {_sums("", "f.graded")},
        {_sums("audited", "people.passed IS NOT NULL")},
        ('items', 'passed', 1::bigint, coalesce(people.passed, false)),
        ('q', 'passed', {_Q}, coalesce(people.passed, false)),
        ('decided_alone', '', 1::bigint, f.alone)
    ) x(key1, key2, amount, counts)
    CROSS JOIN LATERAL (
        SELECT '' AS slice
        UNION ALL SELECT left(s.key || '=' || (s.value #>> '{{}}'), 300) FROM jsonb_each(
            CASE WHEN jsonb_typeof(rv.slice) = 'object' THEN rv.slice ELSE '{{}}'::jsonb END) s
        WHERE jsonb_typeof(s.value) = 'string'
    ) sliced
    WHERE rv.state IN ('current', 'waiting', 'decided') AND x.counts
    GROUP BY 1, 2, 3, 4, 5, 7, 8, 9
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
        ("grading", "0045_certified_counters"),
    ]

    operations = [
        migrations.RunSQL(list(CERTIFIED_COUNTERS), migrations.RunSQL.noop),
    ]
