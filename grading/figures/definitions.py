"""What each dashboard figure counts, defined once: the table `FIGURES`.

A figure is a counter (its metric and two keys) and the rule by which a review adds to it: a condition over the
review's fields (and its decision, its labels, its findings), the keys and the amount, and the week it is filed
under. The rules are written with the few expressions of grading/figures/expressions.py, each of which knows two
forms of itself: Python over a review read as a dict, and SQL over the same columns. From the table come, by
construction:

- `contributions`: what one review adds (the rollups' upkeep in every write, grading/reviews/rollups.py);
- `live_counters_sql`: every counter of some orgs in one GROUP BY (the hourly rebuild, the check of the upkeep);
- `counted_in` and `machine_said`: the reviews behind one number (the dashboard's lists, reviewer/dashboards).

So what a figure counts changes here, in one place. The two forms of each expression are held equal by
tests/grading/figures/test_definitions.py on generated reviews; a form that drifts fails it, naming the counter.
Why two: every write books what a review adds (Python, for the review in hand), while the hourly rebuild and a
number's list read every review of an org or a cell (SQL); bench/README.md, "Rules kept in two forms", has the figures.

Plain SQL is assembled here from this module's constants (names of ours, never a value from outside); every
value from outside is a parameter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from django.db.models import BooleanField, Expression, F, Q

from grading.core.weeks import monday, monday_sql
from grading.figures.expressions import (
    FIXED_POINT_PARTS,
    KEY_LENGTH,
    AtMost,
    Bucket,
    Case,
    CheckVerdict,
    Col,
    Eq,
    Expr,
    FixedPoint,
    HasKey,
    HumanCheckVerdict,
    In,
    IsNumber,
    Lit,
    NonEmptyList,
    Not,
    Pair,
    Present,
    Row,
    Seconds,
    Stored,
    Text,
    Thousandths,
    WholeNumber,
    both,
    col,
    sql_literal,
)
from grading.models import (
    COUNTING_STATES,
    DECIDED_ALONE,
    GRADED,
    HUMAN_PASS,
    LIVE_STATES,
    UNGRADED,
    CriteriaVersion,
    Decision,
    ItemKind,
    Label,
    ReviewState,
    Route,
)
from grading.models.criteria import default_checks

PASS_FAIL = Label.PASS_FAIL
# --- the rules the figures share ------------------------------------------------------------------------------

KIND, ROUTE, STATE, REASON, AUDIT = col("kind"), col("route"), col("state"), col("reason"), col("audit")
FINISHED, SUBMITTED = col("finished_at"), col("submitted")
OUTCOME, DECIDED_AT = col("outcome"), col("decided_at")  # its decision's
# When it was routed to people, and when they owed it a decision (ServiceTarget; None: no target named it). Set while
# it waits and never changed once it is decided, so a decided review's figures below stay what they were booked as.
ROUTED_AT, DUE_AT = col("routed_at"), col("due_at")
# A person credited with the review's decision (EACH_DECIDER): its id, 0 for an account since deleted.
DECIDER = Col("decider", "decider.person")
LABEL_CHECK, LABEL_VERDICT = Col("label_check", "l.check_name"), Col("label_verdict", "l.verdict")  # one label's
# How many labels of one check on one item gave each answer (`answers_pattern`): people against people.
LABEL_PATTERN = Col("label_pattern", "l.pattern")
LABEL_SPLIT = Col("label_split", "l.split")  # those labels do not all give one verdict
LABEL_AGREED = Col("label_agreed", "l.agreed")  # the verdict they all gave (`labels_verdict`), where they agree
# People against people: an item's verdicts on a check are compared once two or more people gave one (labellers, or
# every place of an item several people decide). The population those figures read, not what a verdict is.
SEVERAL_PEOPLE = 2
# Answers in the queue (several people on one item, `Answer`): the same columns, `agreed` being the item's human
# verdict on the check (the agreed or the adjudicated decision), once there is one (`decided`; a decision that
# stores no verdict on the check, which `decision_record` never writes, has none).
ANSWERS_DECIDED = Col("label_decided", "l.decided")
# Two named people's verdicts on one check of one item ("12:15:pass:fail", the lower person id first): Cohen's
# kappa per pair of people.
ANSWER_PAIR = Col("answer_pair", "l.pair")
VERDICTS = ("pass", "fail", "unknown")
EACH = Col("each", "each.name")  # the name a figure of several names (`Figure.each`) is counted for
# A review's checks are those its criteria version asked when it was graded (a version defines its own: issue 39),
# so the figures per check count each check the review holds an answer to: the conversation checks of `checks`,
# a draft's scores of `sub_scores`. Every review of one version answers the same checks.
ANSWERED_CHECKS, SCORED_CHECKS = "checks", "sub_scores"
FINDING = Col("finding", "finding.code")  # one of the review's finding codes

# The review counts (its criteria's activeness is the cell's business). Read by most figures, so the rebuild reads
# it once per review, as the column `counting` of its rows (_ROW_SQL).
_COUNTING_RULE = In(Col("state", "rv.state"), tuple(COUNTING_STATES))
COUNTING = Stored(_COUNTING_RULE, "counting")
IS_DRAFT = Eq(KIND, Lit(ItemKind.DRAFT))
IS_CONVERSATION = Eq(KIND, Lit(ItemKind.CONVERSATION))
# The machine gave a verdict to compare with a person's (not an error, not a conversation it could not score).
SCORED = In(ROUTE, GRADED)
DECIDED_ROUTE = In(ROUTE, DECIDED_ALONE)
# The machine's verdict on the whole item: its route; for a draft it was unsure about, what the judge leaned to.
MACHINE_PASS_FAIL = Case(
    DECIDED_ROUTE, ROUTE, Case(IS_DRAFT, Case(col("judge_passed"), Lit("pass"), Lit("fail")), Lit("unknown"))
)
# A person's decision on a draft: approved passes, rejected or sent back fails.
HUMAN_PASS_FAIL = Case(Eq(OUTCOME, Lit(Decision.Outcome.APPROVE)), Lit("pass"), Lit("fail"))
# Which sample a person's decision belongs to: the audit sample (picked by a rule that ignores the machine) or
# the items the machine was unsure about (biased: the hard ones).
AGREEMENT_GROUPS = {"audit": AUDIT, "unsure": both(Not(AUDIT), Eq(ROUTE, Lit(Route.HUMAN)))}


def labels_verdict(verdicts: Iterable[str]) -> str | None:
    """An item's human verdict on one check from its labels about the evidence it holds: the verdict every label
    gives, one label being one person's verdict; none while they split. The one reading of it: trials and worked
    examples (grading/reviews/human.py) and the dashboard's judge against the labellers' agreed verdict (LABEL_AGREED,
    over the items SEVERAL_PEOPLE or more labellers labelled)."""
    said = set(verdicts)
    return next(iter(said)) if len(said) == 1 else None


def answers_pattern(answers: Iterable[str]) -> str:
    """How many people gave each answer to one check of one item: "2:1:0" (pass, fail, unknown: VERDICTS order)
    while every answer is a verdict, as it was when every check was one; otherwise each answer given with its
    count, in code point order ("billing=2,refund=1"; a score's "4=1,5=2"). `pattern_counts` reads it back."""
    counts = Counter(answers)
    if counts.keys() <= set(VERDICTS):
        return ":".join(str(counts[verdict]) for verdict in VERDICTS)
    return ",".join(f"{answer}={counts[answer]}" for answer in sorted(counts))


def pattern_counts(pattern: str) -> Counter:
    """`answers_pattern` read back as answer -> count (a part the counter's key length cut off is left out)."""
    if "=" not in pattern:
        return Counter(dict(zip(VERDICTS, map(int, pattern.split(":")), strict=True)))
    counts: Counter = Counter()
    for part in pattern.split(","):
        answer, _, count = part.partition("=")
        if count.isdigit():
            counts[answer] = int(count)
    return counts


def checks_of(kind: str, version: CriteriaVersion | None = None) -> tuple[str, ...]:
    """The checks an item of `kind` gets an answer to, by the machine and by people: a conversation's, as `version`
    asks them (without one: the checks every version asked before versions defined their own), or a draft's pass
    or fail."""
    if kind == ItemKind.DRAFT:
        return (PASS_FAIL,)
    return (version.check_set() if version is not None else default_checks(kind)).keys


def answers_of(kind: str, version: CriteriaVersion | None, check: str) -> tuple[str, ...]:
    """The answers the machine and people give to `check` of an item of `kind` under `version`, which people's are
    compared with: a draft passes or fails; pass_fail and a check the version does not ask are read as verdicts."""
    if kind == ItemKind.DRAFT:
        return ("pass", "fail")
    check_set = version.check_set() if version is not None else default_checks(kind)
    return check_set[check].answers if check in check_set.keys else VERDICTS


def machine_categories(kind: str) -> tuple[str, ...]:
    """The verdicts the machine gives an item of `kind` as a whole, that people's are compared with: a draft passes
    or fails; a conversation passes, fails or is unknown."""
    return ("pass", "fail") if kind == ItemKind.DRAFT else VERDICTS


def machine_verdict(check: Expr) -> Expr:
    """What the machine said on `check` (a conversation check, or pass_fail for the whole item), read where
    SCORED holds."""
    if isinstance(check, Lit):
        return MACHINE_PASS_FAIL if check.value == PASS_FAIL else CheckVerdict(check)
    return Case(Eq(check, Lit(PASS_FAIL)), MACHINE_PASS_FAIL, CheckVerdict(check))


# --- the figures ----------------------------------------------------------------------------------------------

# Which week a figure files a review under: the item's (filed when graded: `review_row`), the week the judging
# happened (what it cost, what failed), or the week of the person's decision.
FILED, SPENT, DECIDED = "filed", "spent", "decided"
# What a figure counts over: the review; the review with its decision (only decided ones); each of its labels
# (those of its subject that speak about the evidence it read); each check two or more of its labels answer;
# each of its distinct finding codes.
REVIEW, WITH_DECISION, EACH_LABEL, EACH_FINDING = "review", "decision", "label", "finding"
EACH_LABELLED_CHECK = "labelled_check"
# Each check answered by every one of the review's reviewer slots (two or more): counted once all the answers
# are in, never while the item still waits for some (nothing about blind answers shows before).
EACH_ANSWERED_CHECK = "answered_check"
EACH_ANSWER_PAIR = "answer_pair"  # each two people's answers on such a check
# Each person credited with the review's decision: whoever decided it (one person, or the adjudicator), or, for an
# agreed decision (several people answered alike: decided by no one person), each person whose answer made it.
EACH_DECIDER = "decider"


@dataclass(frozen=True, eq=False)
class Figure:
    metric: str
    when: Expr
    key1: Expr = Lit("")
    key2: Expr = Lit("")
    amount: Expr = Lit(1)
    week: str = FILED
    over: str = REVIEW
    # Counted once for each of these names (EACH), or for each key of the review's JSON object in the column named
    # (ANSWERED_CHECKS: each check the review answers, whatever its version asks).
    each: tuple[str, ...] | str = ()


_TOKENS = HasKey("usage", "prompt_tokens")
_DRAFT_COUNTING = both(COUNTING, IS_DRAFT)
_VERDICT_WAIT = Seconds(FINISHED, SUBMITTED)
_DECISION_WAIT = Seconds(DECIDED_AT, FINISHED)
_HUMAN_WAIT = Seconds(DECIDED_AT, SUBMITTED)
_DATED = both(Present(DUE_AT), Present(ROUTED_AT))  # a service-level target gave it a due time
ON_TIME, LATE = "on_time", "late"
_CHECK_AGREEMENT = [
    Figure(
        f"agree_{group}",
        both(COUNTING, IS_CONVERSATION, SCORED, in_group),
        EACH,
        Pair(CheckVerdict(EACH), HumanCheckVerdict(EACH)),  # machine_verdict of a conversation check
        over=WITH_DECISION,
        each=ANSWERED_CHECKS,
    )
    for group, in_group in AGREEMENT_GROUPS.items()
]
# People against people in the queue, by sample, as the labels' figures below are.
_ANSWER_AGREEMENT = [
    figure
    for group, in_group in AGREEMENT_GROUPS.items()
    for figure in (
        Figure(f"people_{group}", both(COUNTING, in_group), LABEL_CHECK, LABEL_PATTERN, over=EACH_ANSWERED_CHECK),
        Figure(f"people_split_{group}", both(COUNTING, in_group, LABEL_SPLIT), LABEL_CHECK, over=EACH_ANSWERED_CHECK),
        Figure(
            f"agree_people_{group}",
            both(COUNTING, SCORED, in_group, ANSWERS_DECIDED),
            LABEL_CHECK,
            Pair(machine_verdict(LABEL_CHECK), LABEL_AGREED),
            over=EACH_ANSWERED_CHECK,
        ),
        Figure(f"people_pair_{group}", both(COUNTING, in_group), LABEL_CHECK, ANSWER_PAIR, over=EACH_ANSWER_PAIR),
    )
]
_DRAFT_AGREEMENT = [
    Figure(
        f"agree_{group}",
        both(COUNTING, IS_DRAFT, SCORED, in_group),
        Lit(PASS_FAIL),
        Pair(MACHINE_PASS_FAIL, HUMAN_PASS_FAIL),
        over=WITH_DECISION,
    )
    for group, in_group in AGREEMENT_GROUPS.items()
]

# The certified panel's sums: of the counting reviews the judge graded (UNGRADED: the audit sample skips those too),
# how many, and their pass probabilities (`Review.pass_probability`) summed in fixed point (`FixedPoint`: Σq and the
# three sums that give Σq² exactly); and those routed pass or fail under a certificate (decided alone). The same
# sums again (key2 AUDITED) over those whose evidence has people's audit verdict (AUDIT_PASSED), and (key2 PASSED)
# the count and Σq of those people passed: the people's side of the interval, with no audited item read one by one.
CERTIFIED = "certified"
PASS_PROBABILITY = "pass_probability"  # noqa: S105 - a column, not a password
ITEMS, DECIDED_ALONE = "items", "decided_alone"
AUDITED, PASSED = "audited", "passed"
AUDIT_PASSED = col("audit_passed")
_JUDGE_GRADED = both(COUNTING, Not(In(ROUTE, UNGRADED)), Present(col(PASS_PROBABILITY)))
_AUDITED = both(_JUDGE_GRADED, Present(AUDIT_PASSED))
_CERTIFIED = [
    *(
        figure
        for when, key2 in ((_JUDGE_GRADED, ""), (_AUDITED, AUDITED))
        for figure in (
            Figure(CERTIFIED, when, Lit(ITEMS), Lit(key2)),
            *(
                Figure(CERTIFIED, when, Lit(part), Lit(key2), amount=FixedPoint(PASS_PROBABILITY, part))
                for part in FIXED_POINT_PARTS
            ),
        )
    ),
    Figure(CERTIFIED, both(_AUDITED, AUDIT_PASSED), Lit(ITEMS), Lit(PASSED)),
    Figure(CERTIFIED, both(_AUDITED, AUDIT_PASSED), Lit("q"), Lit(PASSED), amount=FixedPoint(PASS_PROBABILITY, "q")),
    Figure(CERTIFIED, both(COUNTING, DECIDED_ROUTE, Present(col("certificate_id"))), Lit(DECIDED_ALONE)),
]

FIGURES: tuple[Figure, ...] = (
    # What judging cost, and what failed, in the week it happened: facts of the review whatever its state.
    Figure("judged", _TOKENS, week=SPENT),
    Figure("tokens", _TOKENS, Lit("prompt"), amount=WholeNumber("usage", "prompt_tokens"), week=SPENT),
    Figure("tokens", _TOKENS, Lit("completion"), amount=WholeNumber("usage", "completion_tokens"), week=SPENT),
    Figure("error", Eq(ROUTE, Lit(Route.ERROR)), REASON, week=SPENT),
    # Who decided (an agreed decision counts for each person who answered), and how long the item waited for its
    # decision, in the week of the decision.
    Figure("decided_by", Lit(True), Text(DECIDER), week=DECIDED, over=EACH_DECIDER),
    Figure("decision_wait_s", Lit(True), amount=_DECISION_WAIT, week=DECIDED, over=WITH_DECISION),
    Figure("decision_wait", Lit(True), Bucket(_DECISION_WAIT), week=DECIDED, over=WITH_DECISION),
    # Service-level targets (reviewer/dashboards/service.py): the items a target dated, by week of their decision:
    # decided on time or late, how long each took from its routing and how long its target gave it.
    Figure(
        "decided_due",
        _DATED,
        Case(AtMost(DECIDED_AT, DUE_AT), Lit(ON_TIME), Lit(LATE)),
        week=DECIDED,
        over=WITH_DECISION,
    ),
    Figure(
        "decided_due_s", _DATED, Lit("took"), amount=Seconds(DECIDED_AT, ROUTED_AT), week=DECIDED, over=WITH_DECISION
    ),
    Figure("decided_due_s", _DATED, Lit("target"), amount=Seconds(DUE_AT, ROUTED_AT), week=DECIDED, over=WITH_DECISION),
    # The stored state of the item's latest review (the staleness audit and the queue depth read these).
    Figure("state", In(STATE, tuple(LIVE_STATES)), STATE),
    # What the counting reviews say.
    Figure("route", COUNTING, ROUTE, Case(DECIDED_ROUTE, Lit(""), REASON)),
    Figure("decision", COUNTING, OUTCOME, over=WITH_DECISION),
    Figure("check", both(COUNTING, IS_CONVERSATION, SCORED), EACH, CheckVerdict(EACH), each=ANSWERED_CHECKS),
    Figure("repaired_pass", both(_DRAFT_COUNTING, Eq(ROUTE, Lit(Route.PASS)), NonEmptyList("repairs", "applied"))),
    Figure("finding", _DRAFT_COUNTING, FINDING, over=EACH_FINDING),
    Figure(
        "subscore_milli",
        both(_DRAFT_COUNTING, IsNumber("sub_scores", EACH)),
        EACH,
        amount=Thousandths("sub_scores", EACH),
        each=SCORED_CHECKS,
    ),
    Figure("subscore_n", both(_DRAFT_COUNTING, IsNumber("sub_scores", EACH)), EACH, each=SCORED_CHECKS),
    Figure("verdict_wait_s", both(_DRAFT_COUNTING, SCORED), amount=_VERDICT_WAIT),
    Figure("verdict_wait", both(_DRAFT_COUNTING, SCORED), Bucket(_VERDICT_WAIT)),
    Figure("human_wait_s", _DRAFT_COUNTING, amount=_HUMAN_WAIT, over=WITH_DECISION),
    Figure("human_wait", _DRAFT_COUNTING, Bucket(_HUMAN_WAIT), over=WITH_DECISION),
    # The judge against people: decisions (by sample), and labels imported from elsewhere.
    *_CHECK_AGREEMENT,
    *_DRAFT_AGREEMENT,
    Figure(
        "agree_label",
        both(COUNTING, SCORED),
        LABEL_CHECK,
        Pair(machine_verdict(LABEL_CHECK), LABEL_VERDICT),
        over=EACH_LABEL,
    ),
    # People against people: each item's pattern of labels per check (grading/figures/raters.py reads them).
    Figure("people_label", COUNTING, LABEL_CHECK, LABEL_PATTERN, over=EACH_LABELLED_CHECK),
    Figure("people_split", both(COUNTING, LABEL_SPLIT), LABEL_CHECK, over=EACH_LABELLED_CHECK),
    # The judge against the labellers' agreed verdict (the item's human verdict, where they did not split).
    Figure(
        "agree_people",
        both(COUNTING, SCORED, Not(LABEL_SPLIT)),
        LABEL_CHECK,
        Pair(machine_verdict(LABEL_CHECK), LABEL_AGREED),
        over=EACH_LABELLED_CHECK,
    ),
    *_ANSWER_AGREEMENT,
    # The quality rate's interval (grading/dashboard/certified.py), per cell: the items the judge graded, the sums
    # of its pass probabilities in fixed point, the same over the audited items and those people passed, and those
    # it decided alone under a certificate.
    *_CERTIFIED,
)
METRICS = frozenset(figure.metric for figure in FIGURES)


# --- where a review is filed ----------------------------------------------------------------------------------

SLICE_LENGTH = 300  # a counter's slice: a dimension's name (64) and value (200), as name=value


def slice_key(name: str, value: str) -> str:
    """A slice's name on its counters and in links: "release=2.4" (a name holds no "=")."""
    return f"{name}={value}"[:SLICE_LENGTH]


def slice_keys(filed: object) -> list[str]:
    """The slices a review (its `slice`: the item's dimension values when it was graded) adds to, besides the whole
    cell: _SLICES_SQL in Python."""
    pairs = filed.items() if isinstance(filed, dict) else ()
    return [slice_key(name, value) for name, value in pairs if isinstance(value, str)]


def review_row(review: Mapping[str, Any]) -> Row:
    """A review (the columns `rollups` reads: its own, and its conversation's application and start) as the
    figures read it: when its evidence arrived, and where it is filed (as the item was when it was graded; a
    review from before that was stored, as the item is now)."""
    row = dict(review)
    row["submitted"] = review["submitted_at"] or review["started_at"]
    row[COUNTING.key] = COUNTING.rule.py(review)
    if review["kind"] == ItemKind.DRAFT:
        row["application"] = ""
        row["week"] = review["week"] or monday(review["finished_at"])
    else:
        row["application"] = review["application"] or review["conversation__application"] or ""
        row["week"] = review["week"] or monday(review["conversation__started_at"])
    return row


def audit_passed_sql(review: str) -> str:
    """People's audit verdict on the evidence the review `review` (an alias) read, as SQL: whether the latest decision
    on any audit review of its item with its fingerprint passed the item (a draft approved, a conversation's outcome
    `pass` under the checks of the version the decided review was graded by); NULL where none. A decision on a
    conversation that answers no check (the verdicts `answer_verdicts` reads are none) is passed over, as
    `human_verdicts` does. Both forms of the figures read it as a column (AUDIT_PASSED), so the rule has this one
    form; the rebuild asks it only of the reviews the certified panel counts, each kind by its item's column (one
    index scan a review)."""
    states = ", ".join(map(sql_literal, COUNTING_STATES))
    return f"""CASE WHEN {review}.state NOT IN ({states}) OR {review}.pass_probability IS NULL THEN NULL
        WHEN {review}.kind = {sql_literal(ItemKind.DRAFT)} THEN {_latest_audit_sql(review, ItemKind.DRAFT)}
        ELSE {_latest_audit_sql(review, ItemKind.CONVERSATION)} END"""


def _latest_audit_sql(review: str, kind: str) -> str:
    answered = """AND EXISTS (SELECT FROM jsonb_each(
        CASE WHEN jsonb_typeof(dc.checks) = 'object' THEN dc.checks ELSE '{}'::jsonb END) said
        WHERE jsonb_typeof(said.value) = 'string')"""
    return f"""(SELECT dc.outcome IN ({", ".join(map(sql_literal, HUMAN_PASS))})
        FROM grading_review ar JOIN grading_decision dc ON dc.review_id = ar.id
        WHERE ar.{kind}_id = {review}.{kind}_id AND ar.fingerprint = {review}.fingerprint AND ar.audit
            {answered if kind == ItemKind.CONVERSATION else ""}
        ORDER BY dc.decided_at DESC, dc.id DESC LIMIT 1)"""  # noqa: S608 - constants of ours and an alias


# The same, in SQL: the columns of `r` that every figure's SQL reads (`rv` a review, the conversation looked up).
_CONVERSATION = "(SELECT c.{} FROM grading_conversation c WHERE c.id = rv.conversation_id)"
_FILED_WEEK = f"""COALESCE(rv.week, CASE WHEN rv.kind = {sql_literal(ItemKind.DRAFT)}
            THEN {monday_sql("rv.finished_at")} ELSE {monday_sql(_CONVERSATION.format("started_at"))} END)"""
_ROW_SQL = f"""
    SELECT rv.id, rv.org_id, rv.kind, rv.criteria_version_id AS criteria_id,
        CASE WHEN rv.kind = {sql_literal(ItemKind.DRAFT)} THEN ''
            ELSE COALESCE(NULLIF(rv.application, ''), {_CONVERSATION.format("application")}, '') END AS application,
        {_FILED_WEEK} AS week,
        {monday_sql("rv.finished_at")} AS spent_week,
        rv.state, {_COUNTING_RULE.sql()} AS {COUNTING.key}, rv.route, rv.reason, rv.checks, rv.findings, rv.sub_scores,
        rv.repairs, rv.usage, rv.judge_passed,
        rv.finished_at, COALESCE(rv.submitted_at, rv.started_at) AS submitted, rv.audit, rv.fingerprint,
        rv.conversation_id, rv.draft_id, rv.routed_at, rv.due_at, rv.slice, rv.pass_probability, rv.certificate_id,
        {audit_passed_sql("rv")} AS {AUDIT_PASSED.key}
    FROM grading_review rv WHERE rv.state <> {sql_literal(ReviewState.TRIAL)}"""  # noqa: S608 - constants of ours
_DECIDED_SQL = """
    SELECT r.*, dc.outcome, dc.checks AS human_checks, dc.decided_at, COALESCE(dc.decided_by_id, 0) AS decided_by,
        dc.basis
    FROM r JOIN grading_decision dc ON dc.review_id = r.id"""
# One person's answer (`a`, on review `r`) as verdicts per check (check_name, verdict): a draft's outcome as
# pass or fail (HUMAN_PASS_FAIL), a conversation's verdict on each check (`answer_record` writes only verdicts;
# anything else stored there is not one).
ANSWER_VERDICTS = f"""
    SELECT {sql_literal(PASS_FAIL)} AS check_name,
        CASE WHEN a.outcome = {sql_literal(Decision.Outcome.APPROVE)} THEN 'pass' ELSE 'fail' END AS verdict
        WHERE r.kind = {sql_literal(ItemKind.DRAFT)}
    UNION ALL SELECT c.key, c.value #>> '{{}}' FROM jsonb_each(
        CASE WHEN jsonb_typeof(a.checks) = 'object' THEN a.checks ELSE '{{}}'::jsonb END) c
        WHERE r.kind = {sql_literal(ItemKind.CONVERSATION)} AND jsonb_typeof(c.value) = 'string'"""  # noqa: S608 - constants
# The item's human verdict on check `g.check_name`, from its decision `dc`, in the same terms.
_DECIDED_VERDICT = f"""CASE WHEN r.kind = {sql_literal(ItemKind.DRAFT)}
    THEN CASE WHEN dc.outcome = {sql_literal(Decision.Outcome.APPROVE)} THEN 'pass' ELSE 'fail' END
    WHEN jsonb_typeof(dc.checks -> g.check_name) = 'string' THEN dc.checks ->> g.check_name END"""
# `answers_pattern` over `g`, one row per answer given to one check with how many gave it (`n`).
_VERDICT_COUNTS = ", ".join(f"coalesce(sum(g.n) FILTER (WHERE g.verdict = {sql_literal(v)}), 0)" for v in VERDICTS)
_PATTERN = f"""CASE WHEN bool_and(g.verdict IN ({", ".join(map(sql_literal, VERDICTS))}))
    THEN concat_ws(':', {_VERDICT_COUNTS})
    ELSE string_agg(g.verdict || '=' || g.n, ',' ORDER BY g.verdict COLLATE "C") END"""
_FROM = {
    REVIEW: "FROM r",
    WITH_DECISION: "FROM d r",
    EACH_LABEL: """FROM r JOIN grading_label l ON l.fingerprint = r.fingerprint
        AND (l.conversation_id = r.conversation_id OR l.draft_id = r.draft_id)""",
    EACH_LABELLED_CHECK: f"""FROM r CROSS JOIN LATERAL (
        SELECT g.check_name, {_PATTERN} AS pattern, count(*) > 1 AS split,
            CASE WHEN count(*) = 1 THEN min(g.verdict) END AS agreed
        FROM (SELECT l.check_name, l.verdict, count(*) AS n FROM grading_label l WHERE l.fingerprint = r.fingerprint
            AND (l.conversation_id = r.conversation_id OR l.draft_id = r.draft_id) GROUP BY 1, 2) g
        GROUP BY g.check_name HAVING sum(g.n) >= {SEVERAL_PEOPLE}) l""",  # noqa: S608 - constants
    EACH_ANSWERED_CHECK: f"""FROM r CROSS JOIN LATERAL (
        SELECT g.check_name, {_PATTERN} AS pattern, count(*) > 1 AS split,
            (SELECT {_DECIDED_VERDICT} FROM grading_decision dc WHERE dc.review_id = r.id) AS agreed,
            (SELECT {_DECIDED_VERDICT} FROM grading_decision dc WHERE dc.review_id = r.id) IS NOT NULL AS decided
        FROM (SELECT v.check_name, v.verdict, count(*) AS n, max(a.slots) AS slots
            FROM grading_answer a CROSS JOIN LATERAL ({ANSWER_VERDICTS}) v WHERE a.review_id = r.id GROUP BY 1, 2) g
        GROUP BY g.check_name HAVING sum(g.n) >= greatest({SEVERAL_PEOPLE}, max(g.slots))) l""",  # noqa: S608 - constants
    EACH_ANSWER_PAIR: f"""FROM r CROSS JOIN LATERAL (
        WITH x AS (
            SELECT a.person_id, v.check_name, v.verdict,
                count(*) OVER (PARTITION BY v.check_name) >= greatest({SEVERAL_PEOPLE}, max(a.slots) OVER ())
                    AS answered
            FROM grading_answer a CROSS JOIN LATERAL ({ANSWER_VERDICTS}) v WHERE a.review_id = r.id)
        SELECT x.check_name, concat_ws(':', x.person_id, y.person_id, x.verdict, y.verdict) AS pair
        FROM x JOIN x y ON y.check_name = x.check_name AND y.person_id > x.person_id
        WHERE x.answered) l""",  # noqa: S608 - constants
    EACH_DECIDER: f"""FROM d r CROSS JOIN LATERAL (
        SELECT r.decided_by AS person WHERE r.basis <> {sql_literal(Decision.Basis.AGREED)}
        UNION ALL SELECT a.person_id FROM grading_answer a
            WHERE r.basis = {sql_literal(Decision.Basis.AGREED)} AND a.review_id = r.id) decider""",  # noqa: S608 - constants
    EACH_FINDING: f"""FROM r CROSS JOIN LATERAL (
        SELECT DISTINCT left(f ->> 'code', {KEY_LENGTH}) AS code FROM jsonb_array_elements(
            CASE WHEN jsonb_typeof(r.findings) = 'array' THEN r.findings ELSE '[]'::jsonb END) f
        WHERE jsonb_typeof(f) = 'object' AND jsonb_typeof(f -> 'code') = 'string') finding""",  # noqa: S608 - constants
}
_WEEK_SQL = {FILED: "r.week", SPENT: "r.spent_week", DECIDED: monday_sql("r.decided_at")}


def _key_sql(key: Expr) -> str:
    return key.sql() if isinstance(key, Lit) else f"left({key.sql()}, {KEY_LENGTH})"


def _from_sql(figure: Figure) -> str:
    if isinstance(figure.each, str):
        column = f"r.{figure.each}"
        keys = f"CASE WHEN jsonb_typeof({column}) = 'object' THEN {column} ELSE '{{}}'::jsonb END"
        return _FROM[figure.over] + f" CROSS JOIN LATERAL jsonb_object_keys({keys}) each(name)"
    names = ", ".join(f"({sql_literal(name)})" for name in figure.each)
    return _FROM[figure.over] + (f" CROSS JOIN (VALUES {names}) each(name)" if figure.each else "")


def _each_of(each: tuple[str, ...] | str) -> Callable[[Row], Iterable[str | None]]:
    """`Figure.each` in Python: the names a figure is counted for on one row (None: once, for no name)."""
    if isinstance(each, str):
        return lambda row: row[each] if isinstance(row[each], dict) else ()
    names = each or (None,)
    return lambda row: names


# `slice_keys` in SQL: the whole cell (''), then each dimension value the review was filed under, as name=value.
_SLICES_SQL = f"""CROSS JOIN LATERAL (SELECT '' AS slice UNION ALL
    SELECT left(s.key || '=' || (s.value #>> '{{}}'), {SLICE_LENGTH}) FROM jsonb_each(
        CASE WHEN jsonb_typeof(r.slice) = 'object' THEN r.slice ELSE '{{}}'::jsonb END) s
    WHERE jsonb_typeof(s.value) = 'string') sliced"""  # noqa: S608 - constants of ours


def _branch_sql(figure: Figure) -> str:
    amount = "count(*)" if isinstance(figure.amount, Lit) else f"sum({figure.amount.sql()})"
    cell = f"r.org_id, r.kind, r.criteria_id, r.application, {_WEEK_SQL[figure.week]}"
    return (
        f"SELECT {cell}, {sql_literal(figure.metric)},"
        f" {_key_sql(figure.key1)}, {_key_sql(figure.key2)}, sliced.slice, {amount}"
        f" {_from_sql(figure)} {_SLICES_SQL} WHERE {figure.when.sql()} GROUP BY 1, 2, 3, 4, 5, 7, 8, 9"
    )


# The reviews that add to some counter of a week in the parameter `weeks` (a date[]): filed, judged or decided in
# one of them (_WEEK_SQL's three weeks).
_IN_WEEKS_SQL = f"""
    AND ({_FILED_WEEK} = ANY(%(weeks)s) OR {monday_sql("rv.finished_at")} = ANY(%(weeks)s)
        OR rv.id IN (SELECT dc.review_id FROM grading_decision dc
            WHERE dc.org_id = ANY(%(orgs)s) AND {monday_sql("dc.decided_at")} = ANY(%(weeks)s)))"""  # noqa: S608 - constants


_COUNTER_COLUMNS = "org_id, kind, criteria_id, application, week, metric, key1, key2, slice, value"


def live_counters_sql(extra_branches: Sequence[str] = (), *, weeks: bool = False) -> str:
    """One statement computing every figure's counters for the orgs in the parameter `orgs` (plus the counters
    of `extra_branches`, SELECTs of the same ten columns), as (cell, metric, key1, key2, slice, value) rows.
    `weeks`: the figures' counters of the weeks in the parameter `weeks` only (a date[]), read from the reviews
    that add to them alone (`extra_branches` are counted whole): an incremental rebuild's recount."""
    reviewed = "\n    UNION ALL ".join(map(_branch_sql, FIGURES))
    if weeks:
        reviewed = f"SELECT * FROM ({reviewed}) reviewed({_COUNTER_COLUMNS}) WHERE reviewed.week = ANY(%(weeks)s)"  # noqa: S608
    branches = "\n    UNION ALL ".join([reviewed, *extra_branches])
    return f"""
WITH r AS MATERIALIZED ({_ROW_SQL} AND rv.org_id = ANY(%(orgs)s){_IN_WEEKS_SQL if weeks else ""}
), d AS MATERIALIZED ({_DECIDED_SQL}
), counters({_COUNTER_COLUMNS}) AS (
    {branches}
)
SELECT org_id, kind, criteria_id, application, week, metric, key1, key2, slice, sum(value)::bigint FROM counters
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 HAVING sum(value) <> 0
"""  # noqa: S608 - assembled from this module's constants; the orgs are a parameter


# --- what one review contributes, in Python -------------------------------------------------------------------


def answer_verdicts(kind: str, outcome: str, checks: object) -> list[tuple[str, str]]:
    """One person's answer (or decision) as (check, verdict) pairs: ANSWER_VERDICTS in Python."""
    if kind == ItemKind.DRAFT:
        return [(PASS_FAIL, "pass" if outcome == Decision.Outcome.APPROVE else "fail")]
    pairs = checks.items() if isinstance(checks, dict) else ()
    return [(check, verdict) for check, verdict in pairs if isinstance(verdict, str)]


def _answered_checks(row: Row, decision: Mapping[str, Any] | None, answers: Sequence[Mapping[str, Any]]) -> list:
    by_check: dict[str, list[str]] = {}
    for answer in answers:
        for check, verdict in answer_verdicts(row["kind"], answer["outcome"], answer["checks"]):
            by_check.setdefault(check, []).append(verdict)
    slots = max((answer["slots"] for answer in answers), default=0)
    decided = dict(answer_verdicts(row["kind"], decision["outcome"], decision["checks"])) if decision else {}
    return [
        {
            "label_check": check,
            "label_pattern": answers_pattern(verdicts),
            "label_split": len(set(verdicts)) > 1,
            "label_agreed": decided.get(check),
            "label_decided": decided.get(check) is not None,
        }
        for check, verdicts in sorted(by_check.items())
        if len(verdicts) >= max(SEVERAL_PEOPLE, slots)
    ]


def _answer_pairs(row: Row, answers: Sequence[Mapping[str, Any]]) -> list:
    """Each two people's verdicts on a check every place answered (EACH_ANSWER_PAIR in Python)."""
    by_check: dict[str, list[tuple[int, str]]] = {}
    for answer in answers:
        for check, verdict in answer_verdicts(row["kind"], answer["outcome"], answer["checks"]):
            by_check.setdefault(check, []).append((answer["person_id"], verdict))
    slots = max((answer["slots"] for answer in answers), default=0)
    return [
        {"label_check": check, "answer_pair": f"{p}:{q}:{v}:{w}"}
        for check, given in sorted(by_check.items())
        if len(given) >= max(SEVERAL_PEOPLE, slots)
        for (p, v), (q, w) in combinations(sorted(given), 2)
    ]


def _overs(
    row: Row,
    decision: Mapping[str, Any] | None,
    labels: Sequence[Mapping[str, Any]],
    answers: Sequence[Mapping[str, Any]],
) -> dict[str, list]:
    """For each `Figure.over`, the fields it adds to the row, once per thing it counts over."""
    findings = row["findings"] if isinstance(row["findings"], list) else []
    codes = {f["code"][:KEY_LENGTH] for f in findings if isinstance(f, dict) and isinstance(f.get("code"), str)}
    by_check: dict[str, list[str]] = {}
    for label in labels:
        by_check.setdefault(label["check_name"], []).append(label["verdict"])
    decided, deciders = [], []
    if decision is not None:
        decided = [
            {"outcome": decision["outcome"], "human_checks": decision["checks"], "decided_at": decision["decided_at"]}
        ]
        if decision["basis"] == Decision.Basis.AGREED:
            deciders = [{"decider": answer["person_id"]} for answer in answers]
        else:
            deciders = [{"decider": decision["decided_by_id"] or 0}]
    return {
        REVIEW: [{}],
        WITH_DECISION: decided,
        EACH_DECIDER: deciders,
        EACH_LABEL: [{"label_check": label["check_name"], "label_verdict": label["verdict"]} for label in labels],
        EACH_LABELLED_CHECK: [
            {
                "label_check": check,
                "label_pattern": answers_pattern(verdicts),
                "label_split": labels_verdict(verdicts) is None,
                "label_agreed": labels_verdict(verdicts),
            }
            for check, verdicts in sorted(by_check.items())
            if len(verdicts) >= SEVERAL_PEOPLE
        ],
        EACH_ANSWERED_CHECK: _answered_checks(row, decision, answers),
        EACH_ANSWER_PAIR: _answer_pairs(row, answers),
        EACH_FINDING: [{"finding": code} for code in sorted(codes)],
    }


# The table as the upkeep reads it, per `over`: each figure's parts as closures, read once here, not per review.
_COMPILED = {
    over: [
        (f.metric, f.week, _each_of(f.each), f.when.fn, f.key1.fn, f.key2.fn, f.amount.fn)
        for f in FIGURES
        if f.over == over
    ]
    for over in (
        REVIEW,
        WITH_DECISION,
        EACH_LABEL,
        EACH_LABELLED_CHECK,
        EACH_ANSWERED_CHECK,
        EACH_ANSWER_PAIR,
        EACH_DECIDER,
        EACH_FINDING,
    )
}


def contributions(
    review: Mapping[str, Any],
    decision: Mapping[str, Any] | None,
    labels: Sequence[Mapping[str, Any]],
    answers: Sequence[Mapping[str, Any]] = (),
) -> Counter:
    """The counters one review (as `review_row` reads it) adds, with its decision (outcome, checks, decided_at,
    decided_by_id, basis; or None), its labels and its answers (several people's, `Answer`: person_id, outcome,
    checks, slots): each counter once for the whole cell and once for each dimension value the review was filed
    under (`slice_keys`), so a slice's figures are read from counters as the whole's are."""
    out: Counter = Counter()
    if review["state"] == ReviewState.TRIAL:
        return out
    row = review_row(review)
    base = (row["org_id"], row["kind"], row["criteria_version_id"], row["application"])
    slices = ("", *slice_keys(row["slice"]))
    weeks = {FILED: row["week"], SPENT: monday(row["finished_at"])}
    if decision is not None:
        weeks[DECIDED] = monday(decision["decided_at"])
    for over, things in _overs(row, decision, labels, answers).items():
        for fields in things:
            row.update(fields)
            for metric, week, each, when, key1, key2, amount in _COMPILED[over]:
                for name in each(row):
                    row["each"] = name
                    if when(row):
                        keys = (str(key1(row))[:KEY_LENGTH], str(key2(row))[:KEY_LENGTH])
                        for filed_under in slices:
                            out[(*base, weeks[week], metric, *keys, filed_under)] += amount(row)
    return out


# --- the reviews behind a counter, as a condition on a review -------------------------------------------------


class _RowHolds(Expression):
    """A condition on a review (the queryset's row, by its id) written in the figures' SQL: true when the review,
    read as the rebuild reads it, satisfies `sql` (with `params`)."""

    def __init__(self, sql: str, params: Sequence[object], review_id: Any = None) -> None:
        super().__init__(output_field=BooleanField())
        self.sql, self.params = sql, list(params)
        self.review_id = review_id if review_id is not None else F("pk")

    def get_source_expressions(self) -> list:
        return [self.review_id]

    def set_source_expressions(self, exprs: list) -> None:
        (self.review_id,) = exprs

    def as_sql(self, compiler, connection) -> tuple[str, list]:
        review_id, review_params = compiler.compile(self.review_id)
        assert not review_params, "a review's id is a column"
        return self.sql.replace("{review_id}", review_id), self.params


def _exists(figure: Figure, tests: Iterable[tuple[str, object]]) -> tuple[str, list]:
    """EXISTS: the review (by `{review_id}`) counts in `figure` with these (SQL expression, value) tests."""
    tests = list(tests)
    where = " AND ".join([figure.when.sql(), *(f"{text} = %s" for text, _ in tests)])
    # `d` only where the figure reads it: a CTE named twice is computed whole, every column of `r` for each review
    # listed (people's audit verdict among them); named once, it is inlined and only what the test reads is.
    decided = f", d AS ({_DECIDED_SQL})" if figure.over in (WITH_DECISION, EACH_DECIDER) else ""
    rows = f"r AS ({_ROW_SQL} AND rv.id = {{review_id}}){decided}"
    sql = f"EXISTS (WITH {rows} SELECT 1 {_from_sql(figure)} WHERE {where})"  # noqa: S608 - constants; keys are parameters
    return sql, [value for _, value in tests]


def counted_in(
    metric: str, key1: str | None = None, key2: str | None = None, *, pair: tuple[str | None, str | None] = (None, None)
) -> Q:
    """The reviews that add to the counters of `metric` with these keys (None: any), whatever their cell: the
    reviews behind one number, with the cell (org, kind, criteria, application, weeks) left to the caller.
    `pair` narrows a confusion table's key2 (machine>person) by either side."""
    if metric not in METRICS:
        raise ValueError(f"no figure counts {metric!r}")
    parts, params = [], []
    for figure in (figure for figure in FIGURES if figure.metric == metric):
        tests: list[tuple[str, object]] = []
        if key1 is not None:
            tests.append((_key_sql(figure.key1), key1))
        if key2 is not None:
            tests.append((_key_sql(figure.key2), key2))
        for side, value in enumerate(pair, start=1):
            if value is not None:
                tests.append((f"split_part({_key_sql(figure.key2)}, '>', {side})", value))
        sql, values = _exists(figure, tests)
        parts.append(sql)
        params += values
    return Q(_RowHolds("(" + " OR ".join(parts) + ")", params))


def machine_said(check: str, verdict: str) -> Q:
    """The reviews on which the machine gave `verdict` on `check` (a conversation check, or pass_fail)."""
    said = Figure("machine_said", both(SCORED, Eq(machine_verdict(Lit(check)), Lit(verdict))))
    return Q(_RowHolds(*_exists(said, [])))
