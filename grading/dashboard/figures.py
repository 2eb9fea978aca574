"""The stakeholders' figures, built from the rollup counters: what the dashboard page shows and what
`GET /api/v1/dashboard` returns, one function for both so they cannot differ.

Only counting reviews count (the counters of the active criteria versions' counting states); unknowns stand beside
the quality number, never inside it; weeks are ISO weeks (Monday to Sunday, UTC).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.core.errors import FieldInvalid
from grading.core.evidence import NotScorable
from grading.core.outcomes import UNKNOWN_CHECK
from grading.core.schemas import METADATA_VALUE_MAX, identifier_checked
from grading.core.weeks import iso_week, monday, week_named, weeks_before
from grading.dashboard.regrade import regrade_progress
from grading.delivery.evaluations import evaluation_export_status
from grading.figures.agreement import agreement_of
from grading.figures.definitions import METRICS, PASS_FAIL, VERDICTS, machine_categories, pattern_counts, slice_key
from grading.figures.expressions import OVER, WAIT_BUCKETS
from grading.figures.raters import jackknife_interval, krippendorff_alpha, people_agreement, score_agreement
from grading.models import CriteriaVersion, GradingRun, ItemKind, Org, Review, ReviewState, Route, state_now
from grading.models.criteria import default_checks
from grading.models.reach import Reach
from grading.reviews.rollups import ERASED, THUMBS, Key, SlicedKey, rollup_last_rebuild, scope_counters, slice_of

DEFAULT_WEEKS = 8
MAX_WEEKS = 104
GROUPS = ("audit", "label", "unsure")
GROUP_LABELS = {
    "audit": "audit sample (fixed rule, blind): unbiased",
    "label": "imported labels",
    "unsure": "items the machine was unsure about: biased toward hard cases",
}
SECTIONS = ("quality", "gate", "staleness", "agreement", "queue")


class InvalidScope(FieldInvalid):
    pass


def parse_iso_week(text: str, field: str) -> date:
    try:
        return week_named(text)
    except ValueError as refused:
        raise InvalidScope(field, str(refused)) from None


@dataclass(frozen=True)
class Scope:
    """What the page and the API were asked for: an org, a range of ISO weeks, optionally one application
    (conversations only: drafts have none) and one dimension value (a slice: the reviews filed under it); for a
    person, only what their memberships reach (None: the whole org, as for an org's API key). Every figure, even
    the whole-org ones (staleness, queue depth), stays within reach."""

    org: Org
    since: date  # a Monday
    until: date  # a Monday, included
    application: str = ""
    reach: Reach | None = None
    slice: str = ""  # "release=2.4" (grading/figures/definitions.py `slice_key`); "" the whole

    def reaches(self, kind: str, application: str) -> bool:
        """Within the reader's reach (whatever application was asked for)."""
        return self.reach is None or self.reach.covers(kind, application)

    def covers(self, kind: str, application: str) -> bool:
        """Within reach and, for a conversation, of the application asked for."""
        return self.reaches(kind, application) and (
            kind == ItemKind.DRAFT or not self.application or application == self.application
        )

    @property
    def weeks(self) -> list[date]:
        count = (self.until - self.since).days // 7 + 1
        return [self.since + timedelta(weeks=n) for n in range(count)]

    def as_query(self) -> dict[str, str]:
        query = {"from": iso_week(self.since), "to": iso_week(self.until)}
        if self.application:
            query["application"] = self.application
        if self.slice:
            query["slice"] = self.slice
        return query

    @property
    def slice_filter(self) -> dict[str, str]:
        """The slice as a lookup on `Review.slice` (`slice__contains`): {} for the whole."""
        name, _, value = self.slice.partition("=")
        return {name: value} if self.slice else {}


def scope_for(
    org: Org,
    *,
    since: str | None = None,
    until: str | None = None,
    application: str | None = None,
    reach: Reach | None = None,
    slices: Sequence[str] = (),
    today=None,
) -> Scope:
    """The scope from the page's or the API's parameters: by default the last eight ISO weeks, this one included.
    An application asked for must be within `reach`; a slice ("release=2.4", each select of the page sending one,
    most of them empty) must name one of the org's dimensions, and only one."""
    this_week = monday(today or timezone.now())
    end = parse_iso_week(until, "to") if until else this_week
    start = parse_iso_week(since, "from") if since else weeks_before(end, DEFAULT_WEEKS - 1)
    if start > end:
        raise InvalidScope("from", "must not be after to")
    if (end - start).days // 7 + 1 > MAX_WEEKS:
        raise InvalidScope("from", f"a range spans at most {MAX_WEEKS} weeks")
    application = (application or "").strip()
    if len(application) > 100:
        raise InvalidScope("application", "at most 100 characters")
    try:
        identifier_checked(application)
    except ValueError as refused:
        raise InvalidScope("application", str(refused)) from None
    if application and reach is not None and not reach.covers(ItemKind.CONVERSATION, application):
        raise InvalidScope("application", "is not one of the applications you may see")
    return Scope(org, start, end, application, reach, slice_checked(org, slices))


def slice_checked(org: Org, slices: Sequence[str]) -> str:
    """The one slice asked for ("" for none) as `slice_key` writes it, or InvalidScope naming `slice`. One at a
    time: the counters are kept per dimension value, not per combination of them."""
    asked = [text.strip() for text in slices if text.strip()]
    if len(asked) > 1:
        raise InvalidScope("slice", "one dimension value at a time (the figures are kept per dimension value)")
    if not asked:
        return ""
    name, equals, value = asked[0].partition("=")
    if not equals or not value:
        raise InvalidScope("slice", "must be a dimension and a value, as name=value")
    if name not in org.dimensions:
        named = ", ".join(org.dimensions) or "none"
        raise InvalidScope("slice", f"{name!r} is not one of the org's dimensions ({named})")
    try:
        identifier_checked(value)
    except ValueError as refused:
        raise InvalidScope("slice", str(refused)) from None
    if len(value) > METADATA_VALUE_MAX:
        raise InvalidScope("slice", f"a value is at most {METADATA_VALUE_MAX} characters")
    return slice_key(name, value)


# --- reading the counters -------------------------------------------------------------------------------------


# The metrics whose figures are read week by week (the trends, the tokens, the time to a decision, the decisions per
# person and week, and the service panel's share within target: reviewer/dashboards/service.py); every other
# metric's counters are read summed over the scope's weeks (`scope_counters`).
BY_WEEK = frozenset({
    "route", "repaired_pass", "judged", "tokens", "decided_by", "decision_wait", "decision_wait_s", "decided_due",
    "decided_due_s",
})  # fmt: skip


@dataclass
class Counters:
    """The counters of one scope, with a few lookups the figures need."""

    scope: Scope
    rows: dict[Key, int]  # the scope's weeks only; a metric outside BY_WEEK may be summed over them (week None)
    active: dict[str, CriteriaVersion]
    states: dict[tuple[str, int, str], int]  # (kind, criteria id, state) -> count, over every week
    last_write: datetime | None  # the newest change among the counters read (None: not read from the rollup)
    _by: dict | None = None
    _asked: dict = field(default_factory=dict)

    def asked(self, kind: str) -> CheckSet:
        """The checks the active version of `kind` asks (a kind with no active version: the checks of today)."""
        if kind not in self._asked:
            active = self.active.get(kind)
            self._asked[kind] = active.check_set() if active is not None else default_checks(kind)
        return self._asked[kind]

    def state_now(self, kind: str, criteria_id: int, stored: str) -> str:
        """What reviews counted under (kind, criteria, stored state) read as now (ReviewState)."""
        active = self.active.get(kind)
        return state_now(stored, criteria_active=active is not None and criteria_id == active.pk)

    def pick(self, kind: str, metric: str, *, active_only: bool = True) -> list[tuple[Key, int]]:
        """Counters of one metric within the scope: the active version's (or any version's), this application's."""
        if self._by is None:
            self._by = self._within_scope()
        rows = self._by.get((kind, metric), [])
        if not active_only:
            return rows
        wanted = self.active.get(kind)
        if wanted is None:
            return []
        wanted_id = wanted.pk
        return [(key, value) for key, value in rows if key[2] == wanted_id]

    def _within_scope(self) -> dict[tuple[str, str], list[tuple[Key, int]]]:
        """The rows by (kind, metric), those of the cells outside the scope left out (asked once per cell)."""
        by: dict[tuple[str, str], list[tuple[Key, int]]] = {}
        covered: dict[tuple[str, str], bool] = {}
        for key, value in self.rows.items():
            cell = (key[1], key[3])
            if cell not in covered:
                covered[cell] = self.scope.covers(*cell)
            if covered[cell]:
                by.setdefault((key[1], key[5]), []).append((key, value))
        return by

    def total(self, kind: str, metric: str, key1: str | None = None, key2: str | None = None, **kw) -> int:
        return sum(
            v
            for k, v in self.pick(kind, metric, **kw)
            if (key1 is None or k[6] == key1) and (key2 is None or k[7] == key2)
        )


def counters_for(
    scope: Scope,
    rows: dict[SlicedKey, int] | None = None,
    *,
    metrics: Collection[str] = (),
    active: dict[str, CriteriaVersion] | None = None,
) -> Counters:
    """The scope's counters (of its slice) from the rollup, or from `rows` (e.g. `live_counters`, to check the
    rollup); from the rollup, only those of `metrics` when some are named (`PAGE_METRICS`, `STATISTICS_METRICS`).
    `active`: the org's active versions by kind, when the caller has read them (`Counters.active`)."""
    if active is None:
        active = {cv.kind: cv for cv in CriteriaVersion.objects.filter(org=scope.org, is_active=True)}
    if rows is None:
        read = scope_counters(
            org_id=scope.org.pk,
            since=scope.since,
            until=scope.until,
            keep=scope.reaches,
            slice_key=scope.slice,
            by_week=BY_WEEK,
            metrics=metrics,
        )
        return Counters(scope, read.rows, active, read.states, read.last_write)
    rows = slice_of(rows, scope.slice)
    states: Counter = Counter()
    for key, value in rows.items():
        if key[5] == "state" and scope.reaches(key[1], key[3]):
            states[(key[1], key[2], key[6])] += value
    in_scope = {key: value for key, value in rows.items() if scope.since <= key[4] <= scope.until}
    return Counters(scope, in_scope, active, dict(states), None)


# --- the figures ----------------------------------------------------------------------------------------------


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _median_bucket(histogram: Counter) -> int | None:
    """The upper bound (seconds) of the bucket holding the median; -1 past the last bound; None when empty."""
    n = sum(histogram.values())
    if not n:
        return None
    seen = 0
    for bound in [*map(str, WAIT_BUCKETS), OVER]:
        seen += histogram.get(bound, 0)
        if seen * 2 >= n:
            return -1 if bound == OVER else int(bound)
    return -1


NOT_SAMPLED = "not_sampled"  # outside the share of its slice the version's judge grades (judge sampling)
GRADED = ("pass", "fail", "unknown", "human_other", "not_scorable", "error", NOT_SAMPLED)


def route_counted_as(route: str, reason: str) -> str:
    """What a conversation's review counts as in the quality figures: its route, with people's items split into the
    unknowns (a required check was unknown) and the rest, and the judge's sample apart from the not scorable."""
    if route == Route.HUMAN:
        return "unknown" if reason == UNKNOWN_CHECK else "human_other"
    if route == Route.NOT_SCORABLE and reason == NotScorable.OUTSIDE_JUDGE_SAMPLE:
        return NOT_SAMPLED
    return route


def judged_share(*, graded: int, not_sampled: int) -> dict:
    """The share of the graded items the judge was asked about, which every judged figure covers: under a version
    that samples its judge (grading/checks/routing.py) the rest are counted but not scored."""
    return {NOT_SAMPLED: not_sampled, "judged_share": _ratio(graded - not_sampled, graded)}


def quality_figures(c: Counters) -> dict:
    kind = ItemKind.CONVERSATION
    weeks = {week: Counter() for week in c.scope.weeks}
    apps: dict[str, Counter] = defaultdict(Counter)
    for (_, _, _, application, week, _, route, reason), n in c.pick(kind, "route"):
        name = route_counted_as(route, reason)
        weeks[week][name] += n
        apps[application][name] += n
    for (_, _, _, application, _, _, check, verdict), n in c.pick(kind, "check"):
        apps[application][f"{check}:{verdict}"] += n
    for (_, _, _, application, _, _, value, _), n in c.pick(kind, "thumbs", active_only=False):
        apps[application][f"thumbs_{value}"] += n

    def summary(counts: Counter) -> dict:
        resolved = counts["pass"] + counts["fail"]
        return {
            "passed": counts["pass"],
            "failed": counts["fail"],
            "resolved": resolved,
            "quality": _ratio(counts["pass"], resolved),
            "unknown": counts["unknown"],
            "scored": resolved + counts["unknown"],
            "human_other": counts["human_other"],
            "not_scorable": counts["not_scorable"],
            "errors": counts["error"],
            **judged_share(graded=sum(counts[name] for name in GRADED), not_sampled=counts[NOT_SAMPLED]),
        }

    total = sum(apps.values(), Counter())
    asked = c.asked(kind).checks
    return {
        "criteria_version": c.active[kind].number if kind in c.active else None,
        "total": summary(total) | {"thumbs_up": total["thumbs_up"], "thumbs_down": total["thumbs_down"]},
        # Conversations of these weeks erased (grading/erasure): counted no more in any figure.
        "erased": c.total(kind, ERASED, active_only=False),
        "asked": [check_described(check) for check in asked],
        "checks": _answer_counts(asked, total),
        "by_week": [{"week": iso_week(week), **summary(counts)} for week, counts in weeks.items()],
        "by_application": [
            {
                "application": application,
                **summary(counts),
                "checks": _answer_counts(asked, counts),
                "thumbs_up": counts["thumbs_up"],
                "thumbs_down": counts["thumbs_down"],
            }
            for application, counts in sorted(apps.items())
        ],
        "earlier_versions": earlier_versions(c, kind),
    }


def check_described(check: CheckDefinition) -> dict:
    """What a reader needs beside a check's figures: its name and question, its kind and answers."""
    return {
        "key": check.key,
        "name": check.name,
        "question": check.question,
        "kind": check.kind,
        "required": check.required,
        "answers": list(check.answers),
    }


def _answer_counts(checks: Sequence[CheckDefinition], counts: Counter) -> dict:
    """Per check, how many reviews gave each answer it allows (`check` counters keyed check:answer)."""
    return {check.key: {answer: counts[f"{check.key}:{answer}"] for answer in check.answers} for check in checks}


def earlier_versions(c: Counters, kind: str) -> list[dict]:
    """The scope's weeks graded under a version that is no longer the active one, each read as that version asked
    (its own checks, with their answers counted; a draft version's mean scores), the newest version first."""
    routes = c.pick(kind, "route", active_only=False)
    active = c.active.get(kind)
    earlier = {key[2] for key, _ in routes} - {active.pk if active is not None else None}
    if not earlier:  # nearly always: nothing to count
        return []
    weeks: dict[int, set] = defaultdict(set)
    counts: dict[int, Counter] = defaultdict(Counter)
    for (_, _, criteria, _, week, _, route, _), n in routes:
        weeks[criteria].add(week)
        counts[criteria][route] += n
    for metric in ("check", "subscore_milli", "subscore_n"):
        for (_, _, criteria, _, _, _, check, answer), n in c.pick(kind, metric, active_only=False):
            counts[criteria][f"{metric}:{check}:{answer}"] += n
    out = []
    for version in sorted(CriteriaVersion.objects.filter(org=c.scope.org, kind=kind, pk__in=earlier), key=_newest):
        asked, mine = version.check_set().checks, counts[version.pk]
        read = {
            "criteria_version": version.number,
            "weeks": [iso_week(week) for week in sorted(weeks[version.pk])],
            "reviews": sum(mine[route] for route in Route.values),
            "asked": [check_described(check) for check in asked],
        }
        if kind == ItemKind.CONVERSATION:
            read["checks"] = {
                check.key: {answer: mine[f"check:{check.key}:{answer}"] for answer in check.answers} for check in asked
            }
        else:
            read["sub_scores"] = _means(asked, mine)
        out.append(read)
    return out


def _newest(version: CriteriaVersion) -> int:
    return -version.number


def _means(checks: Sequence[CheckDefinition], counts: Counter) -> dict:
    """A draft version's mean of each score check, from counters keyed subscore_milli:key: and subscore_n:key:."""
    out = {}
    for check in checks:
        if check.kind == AnswerKind.SCORE:
            n = counts[f"subscore_n:{check.key}:"]
            out[check.key] = {"mean": counts[f"subscore_milli:{check.key}:"] / 1000 / n if n else None, "n": n}
    return out


def gate_figures(c: Counters) -> dict:
    kind = ItemKind.DRAFT
    weeks = {week: Counter() for week in c.scope.weeks}
    for (_, _, _, _, week, _, route, _), n in c.pick(kind, "route"):
        weeks[week][route] += n
    for (_, _, _, _, week, _, _, _), n in c.pick(kind, "repaired_pass"):
        weeks[week]["repaired_pass"] += n
    findings = Counter()
    for (_, _, _, _, _, _, code, _), n in c.pick(kind, "finding"):
        findings[code] += n
    scores = Counter()
    for metric in ("subscore_milli", "subscore_n"):
        for (_, _, _, _, _, _, name, _), n in c.pick(kind, metric):
            scores[f"{metric}:{name}:"] += n
    decisions = Counter()
    for (_, _, _, _, _, _, outcome, _), n in c.pick(kind, "decision"):
        decisions[outcome] += n

    def waiting(metric: str) -> dict:
        histogram = Counter()
        for (_, _, _, _, _, _, bucket, _), n in c.pick(kind, metric):
            histogram[bucket] += n
        n = sum(histogram.values())
        seconds = c.total(kind, f"{metric}_s")
        return {"n": n, "mean_seconds": _ratio(seconds, n), "median_at_most_seconds": _median_bucket(histogram)}

    total = sum(weeks.values(), Counter())
    keys = ("pass", "fail", "human", "error", "repaired_pass")
    return {
        "criteria_version": c.active[kind].number if kind in c.active else None,
        "total": {key: total[key] for key in keys},
        "erased": c.total(kind, ERASED, active_only=False),  # drafts of these weeks erased: counted no more
        "by_week": [{"week": iso_week(week), **{key: counts[key] for key in keys}} for week, counts in weeks.items()],
        "findings": [{"code": code, "reviews": n} for code, n in sorted(findings.items(), key=lambda i: (-i[1], i[0]))],
        "asked": [check_described(check) for check in c.asked(kind).checks],
        "sub_scores": _means(c.asked(kind).checks, scores),
        "earlier_versions": earlier_versions(c, kind),
        "decisions": {outcome: decisions[outcome] for outcome in ("approve", "reject", "send_back")},
        "time_to_verdict": {"machine": waiting("verdict_wait"), "human": waiting("human_wait")},
    }


def staleness_figures(c: Counters) -> dict:
    """Whole-org figures (not limited to the weeks): stale per kind, as ReviewState defines it; the last pass."""
    stale = {kind: 0 for kind in ItemKind.values}
    for (kind, criteria, state), n in c.states.items():
        if c.state_now(kind, criteria, state) == ReviewState.STALE:
            stale[kind] += n
    # The grading passes, the rollup's check and the evaluation export are the deployment's and the org's workings,
    # counted over every application: a reader limited to some applications does not see them.
    whole_org = c.scope.reach is None or not c.scope.reach.limited
    rebuild = rollup_last_rebuild(c.scope.org) if whole_org else None
    last_pass = GradingRun.objects.order_by("-started_at").first() if whole_org else None
    errors: dict[str, Counter] = {kind: Counter() for kind in ItemKind.values}
    tokens = {week: Counter() for week in c.scope.weeks}
    for kind in ItemKind.values:
        for (_, _, _, _, _, _, reason, _), n in c.pick(kind, "error", active_only=False):
            errors[kind][reason] += n
        for metric in ("judged", "tokens"):
            for (_, _, _, _, week, _, key1, _), n in c.pick(kind, metric, active_only=False):
                tokens[week][key1 or metric] += n
    token_total = sum(tokens.values(), Counter())

    def per_review(counts: Counter) -> float | None:
        return _ratio(counts["prompt"] + counts["completion"], counts["judged"])

    now = timezone.now()
    regrades = (regrade_progress(version, c.states, now) for _, version in sorted(c.active.items()))
    return {
        "whole_org": whole_org,
        "stale": stale,
        "regrade": [progress.as_json() for progress in regrades if progress is not None],
        "mismatched": rebuild.mismatched if rebuild else None,
        "mismatched_checked_at": rebuild.rebuilt_at if rebuild else None,
        "last_pass": (
            {
                "at": last_pass.started_at,
                "needing": last_pass.needing,
                "enqueued": last_pass.enqueued,
                "in_flight": last_pass.in_flight,
                "backlog": last_pass.backlog,
                "spend_capped": last_pass.spend_capped,
            }
            if last_pass
            else None
        ),  # fmt: skip
        "judge_errors": {kind: dict(sorted(reasons.items())) for kind, reasons in errors.items()},
        "tokens": {
            "judged_reviews": token_total["judged"],
            "prompt": token_total["prompt"],
            "completion": token_total["completion"],
            "per_review": per_review(token_total),
            "by_week": [
                {
                    "week": iso_week(week),
                    "judged_reviews": t["judged"],
                    "prompt": t["prompt"],
                    "completion": t["completion"],
                    "per_review": per_review(t),
                }
                for week, t in tokens.items()
            ],  # fmt: skip
        },
        # Read only when the export is on: the page shows it then (two queries otherwise spent on nothing).
        "evaluation_export": (
            evaluation_export_status(c.scope.org.pk)
            if settings.OTLP_EVALUATIONS_ENDPOINT and whole_org
            else {"enabled": False}
        ),
        "rollup": {
            "last_write": c.last_write,
            "last_rebuild": rebuild.rebuilt_at if rebuild else None,
            "last_rebuild_drifted": rebuild.drifted if rebuild else None,
        },
    }


AGREEMENT_KINDS = (ItemKind.CONVERSATION, ItemKind.DRAFT)


# The two parts of the agreement figures: the judge against people in each sample, people against each other (the
# page's two statistics sections, each read alone: `STATISTICS_METRICS`).
JUDGE, PEOPLE = "samples", "people"


def agreement_figures(
    c: Counters,
    *,
    kinds: Sequence[str] = AGREEMENT_KINDS,
    samples: Sequence[str] = GROUPS,
    parts: Collection[str] = (JUDGE, PEOPLE),
    first_screen: bool = False,
) -> dict:
    """Per kind (under its active criteria version), per sample, per check the version asks: the confusion table
    over the check's answers and its figures (nominal kappa; for a score check, weighted kappa and ordinal alpha
    beside them), and people against each other; of `kinds`, `samples` and `parts` only when asked, and of people's
    agreement only how often they agree when `first_screen` (`agreement_headline`)."""
    out = {}
    for kind in kinds:
        asked = c.asked(kind).checks if kind == ItemKind.CONVERSATION else []
        answers = {check.key: check.answers for check in asked} | {PASS_FAIL: machine_categories(kind)}
        out[kind] = {
            "criteria_version": c.active[kind].number if kind in c.active else None,
            "asked": [check_described(check) for check in asked],
        }
        if JUDGE in parts:
            out[kind][JUDGE] = {group: _judge_in_sample(c, kind, group, asked, answers) for group in samples}
        if PEOPLE in parts:
            out[kind][PEOPLE] = people_figures(
                c, kind, answers, asked, samples=[s for s in PEOPLE_SAMPLES if s in samples], first_screen=first_screen
            )
    return out


def _judge_in_sample(
    c: Counters, kind: str, group: str, asked: Sequence[CheckDefinition], answers: dict[str, Sequence[str]]
) -> dict:
    """The judge against people in one sample, per check, with the verdict checks pooled for conversations."""
    pairs: dict[str, Counter] = defaultdict(Counter)
    for (_, _, _, _, _, _, check, pair), n in c.pick(kind, f"agree_{group}"):
        machine, _, human = pair.partition(">")
        pairs[check][(machine, human)] += n
    per_check = {}
    for check, categories in answers.items():
        if _people_answer_on(kind, group, check):
            per_check[check] = _judge_against_people(asked, check, categories, pairs[check])
    if kind == ItemKind.CONVERSATION:
        # Pooled over the verdict checks (pass, fail or unknown each): a category or a score pools with none.
        verdicts = [check.key for check in asked if check.kind == AnswerKind.VERDICT]
        pooled = sum((pairs[check] for check in verdicts), Counter())
        per_check["all_checks"] = agreement_of(VERDICTS, pooled).as_json()
    return {"label": GROUP_LABELS[group], "checks": per_check}


def agreement_headline(c: Counters) -> dict:
    """The agreement the page's first screen says in words: conversations on the audit sample, the judge against
    people and people with each other, as `agreement_figures` has them. The statistics of every sample are
    `agreement_figures`' whole, which the page reads only when their section is opened. People's figures hold how
    often they agree and no more (no judge against their verdict, no pairs): the first screen says that alone, and
    the page reads the counters it says (`PAGE_METRICS`)."""
    return agreement_figures(c, kinds=(ItemKind.CONVERSATION,), samples=("audit",), first_screen=True)


def _score_scale(asked: Sequence[CheckDefinition], check: str) -> int | None:
    """The scale of `check` when the version asks it as a score."""
    for definition in asked:
        if definition.key == check and definition.kind == AnswerKind.SCORE:
            return definition.scale
    return None


def _judge_against_people(
    asked: Sequence[CheckDefinition], check: str, categories: Sequence[str], pairs: Counter
) -> dict:
    """Exact agreement and Cohen's kappa over the check's answers; for a score, weighted kappa and ordinal alpha."""
    figures = agreement_of(categories, pairs).as_json()
    scale = _score_scale(asked, check)
    if scale is not None:
        figures["scores"] = score_agreement(scale, pairs).as_json()
    return figures


def _people_answer_on(kind: str, sample: str, check: str) -> bool:
    """Whether people give a verdict on `check` in `sample`: in the queue they decide conversations check by check;
    only labels judge them whole (pass_fail)."""
    return not (kind == ItemKind.CONVERSATION and check == PASS_FAIL and sample != "label")


@dataclass(frozen=True)
class PeopleCounters:
    """The counters of one people-vs-people sample (grading/figures/definitions.py)."""

    patterns: str  # per check, how many items had each pattern of verdicts ("2:1:0")
    split: str  # per check, the items whose verdicts differ (what the lists read; `patterns` holds their count)
    judge: str  # per check, the judge against the verdict people agreed on or an adjudicator gave
    pairs: str = ""  # per check, each two named people's verdicts on an item (answers in the queue only)


# Where several people's verdicts on one item come from: answers given in the queue (counted once every place on
# the item is answered), in its two samples, and imported labels from several labellers.
PEOPLE_SAMPLES = {
    "audit": PeopleCounters("people_audit", "people_split_audit", "agree_people_audit", "people_pair_audit"),
    "unsure": PeopleCounters("people_unsure", "people_split_unsure", "agree_people_unsure", "people_pair_unsure"),
    "label": PeopleCounters("people_label", "people_split", "agree_people"),
}
# The counters each part of `agreement_figures` reads: a request for those figures alone reads no other.
STATISTICS_METRICS = {
    JUDGE: frozenset(f"agree_{group}" for group in GROUPS),
    PEOPLE: frozenset(
        name for people in PEOPLE_SAMPLES.values() for name in (people.patterns, people.judge, people.pairs) if name
    ),
}
AGREEMENT_METRICS = STATISTICS_METRICS[JUDGE] | STATISTICS_METRICS[PEOPLE]
# The counters the page reads: every metric but those only the statistics sections it folds show (read when one is
# opened), the queue's sections' (loaded apart) and the split items' (read by the lists); of people's agreement, what
# `agreement_headline` says.
HEADLINE_METRICS = frozenset({"agree_audit", PEOPLE_SAMPLES["audit"].patterns})
_SPLIT_METRICS = frozenset(people.split for people in PEOPLE_SAMPLES.values())
# The counters of the queue's two sections, which the page loads apart: its health (what waits, from the states the
# page's staleness reads as well; the decisions and the time to them) and its service-level targets
# (reviewer/dashboards/service.py).
QUEUE_METRICS = frozenset({"decided_by", "decision_wait", "decision_wait_s", "state"})
SERVICE_METRICS = frozenset({"decided_by", "decided_due", "decided_due_s"})
# The counters of the draft gate's section, which the page loads apart (its first screen shows the totals): the
# drafts' figures' and, for the earlier versions, the checks answered.
GATE_METRICS = frozenset({
    "route", "repaired_pass", "finding", "subscore_milli", "subscore_n", "decision", "verdict_wait", "verdict_wait_s",
    "human_wait", "human_wait_s", "check", ERASED,
})  # fmt: skip
PAGE_METRICS = (
    (METRICS | {THUMBS, ERASED})
    - (AGREEMENT_METRICS - HEADLINE_METRICS)
    - _SPLIT_METRICS
    - ((QUEUE_METRICS | SERVICE_METRICS) - {"state"})
)
PEOPLE_LABELS = {
    "audit": "answers in the queue on the audit sample, several people per item",
    "unsure": "answers in the queue on items the machine was unsure about, several people per item",
    "label": "imported labels with two or more labellers on an item",
}


def people_figures(
    c: Counters,
    kind: str,
    answers: dict[str, Sequence[str]],
    asked: Sequence[CheckDefinition] = (),
    *,
    samples: Sequence[str] = tuple(PEOPLE_SAMPLES),
    first_screen: bool = False,
) -> dict:
    """How far people agree with each other, per sample and check (`answers`: each check with its answers), on the
    items several people answered (the ceiling the judge's agreement with people is read against;
    grading/figures/raters.py). A score check adds ordinal alpha over the answers that are scores. `first_screen`:
    how often they agree alone, without the judge against their verdict and the pairs of people."""
    out = {}
    for sample in samples:
        counters = PEOPLE_SAMPLES[sample]
        patterns: dict[str, Counter] = defaultdict(Counter)
        for (_, _, _, _, _, _, check, pattern), n in c.pick(kind, counters.patterns):
            patterns[check][pattern] += n
        judged = () if first_screen else c.pick(kind, counters.judge)
        paired = c.pick(kind, counters.pairs) if counters.pairs and not first_screen else ()
        agreed: dict[str, Counter] = defaultdict(Counter)
        for (_, _, _, _, _, _, check, pair), n in judged:
            machine, _, human = pair.partition(">")
            agreed[check][(machine, human)] += n
        by_pair: dict[str, dict[tuple[int, int], Counter]] = defaultdict(lambda: defaultdict(Counter))
        for (_, _, _, _, _, _, check, key), n in paired:
            first, second, first_said, second_said = key.split(":")
            by_pair[check][(int(first), int(second))][(first_said, second_said)] += n
        checks = {}
        for check, categories in answers.items():
            if not _people_answer_on(kind, sample, check):
                continue
            # People may call a whole draft unknown (a label), though the machine passes or fails it.
            said = VERDICTS if check == PASS_FAIL else categories
            histogram = _histogram(patterns[check], said)
            figures = people_agreement(said, histogram).as_json()
            if not first_screen:
                # The judge against the verdict people agreed on (or an adjudicator gave, for the queue's answers):
                # the figure to hold against theirs.
                figures["judge"] = _judge_against_people(asked, check, categories, agreed[check])
                figures["pairs"] = _pairs(categories, by_pair[check])
                scale = _score_scale(asked, check)
                if scale is not None:
                    figures["scores"] = _ordinal_people(scale, histogram)
            checks[check] = figures
        out[sample] = {"label": PEOPLE_LABELS[sample], "checks": checks}
    return out


def _histogram(patterns: Counter, categories: Sequence[str]) -> Counter:
    """The counters' patterns (`answers_pattern`) as raters.py reads them: per item, how many gave each of the
    check's answers in their order (an answer the check does not have is left out). In the patterns' order, so
    the sums over it come out the same whatever order the counters were read in."""
    histogram: Counter = Counter()
    for pattern, n in sorted(patterns.items()):
        counts = pattern_counts(pattern)
        histogram[tuple(counts[category] for category in categories)] += n
    return histogram


def _ordinal_people(scale: int, histogram: Counter) -> dict:
    """Krippendorff's alpha at the ordinal level over people's scores (their unknowns left out)."""
    scores: Counter = Counter()
    for pattern, n in histogram.items():
        scores[pattern[:scale]] += n  # the answers are 1..scale, then unknown
    alpha = krippendorff_alpha(scores, level="ordinal") if scores else None
    return {
        "scale": scale,
        "krippendorff_alpha": alpha,
        "krippendorff_alpha_level": "ordinal",
        "krippendorff_alpha_interval": _listed(
            jackknife_interval(scores, lambda h: krippendorff_alpha(h, level="ordinal")) if alpha is not None else None
        ),
        "interval_method": "jackknife standard error over items, normal 95%",
    }


def _listed(interval: tuple[float, float] | None) -> list[float] | None:
    return list(interval) if interval else None


PAIRS_SHOWN = 10  # the pairs of people who answered the same items most often


def _pairs(categories: Sequence[str], tables: dict[tuple[int, int], Counter]) -> list[dict]:
    """Cohen's kappa for each two named people on the items both answered (rows: the lower person id), the pairs
    with most items first."""
    ranked = sorted(tables.items(), key=lambda item: (-sum(item[1].values()), item[0]))[:PAIRS_SHOWN]
    return [{"people": list(people), **agreement_of(categories, table).as_json()} for people, table in ranked]


def queue_figures(c: Counters) -> dict:
    depth = {kind: 0 for kind in ItemKind.values}
    for (kind, criteria, state), n in c.states.items():
        if c.state_now(kind, criteria, state) == ReviewState.WAITING:
            depth[kind] += n
    oldest = _oldest_waiting(list(c.active.values()), c.scope.reach)
    per_operator: dict[tuple[date, str], int] = Counter()
    histograms = {week: Counter() for week in c.scope.weeks}
    waited = Counter()
    for kind in ItemKind.values:
        for (_, _, _, _, week, _, user_id, _), n in c.pick(kind, "decided_by", active_only=False):
            per_operator[(week, user_id)] += n
        for (_, _, _, _, week, _, bucket, _), n in c.pick(kind, "decision_wait", active_only=False):
            histograms[week][bucket] += n
        for (_, _, _, _, week, _, _, _), n in c.pick(kind, "decision_wait_s", active_only=False):
            waited[week] += n
    ids = {int(user_id) for _, user_id in per_operator if user_id.isdigit() and user_id != "0"}
    names = dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username")) if ids else {}
    now = timezone.now()
    return {
        "depth": depth,
        "waiting": sum(depth.values()),
        "oldest_waiting_since": oldest,
        "oldest_wait_seconds": int((now - oldest).total_seconds()) if oldest else None,
        "decisions_by_operator": [
            {
                "week": iso_week(week),
                "operator": names.get(int(user_id), "a former user"),
                "operator_id": int(user_id),
                "decisions": n,
            }
            for (week, user_id), n in sorted(per_operator.items(), key=lambda i: (i[0][0], -i[1], i[0][1]))
        ],
        "time_to_decision_by_week": [
            {
                "week": iso_week(week),
                "decisions": sum(histograms[week].values()),
                "mean_seconds": _ratio(waited[week], sum(histograms[week].values())),
                "median_at_most_seconds": _median_bucket(histograms[week]),
            }
            for week in c.scope.weeks
        ],
    }


def _oldest_waiting(versions: list[CriteriaVersion], reach: Reach | None) -> datetime | None:
    """The head of each active version's range of the queue index (`waiting_under`), within reach, in one
    statement."""
    ranges = [Review.objects.waiting_under(version) for version in versions]
    if reach is not None:
        ranges = [reviews.filter(reach.rows()) for reviews in ranges]
    heads = [reviews.order_by("finished_at", "pk").values_list("finished_at", flat=True)[:1] for reviews in ranges]
    if not heads:
        return None
    return min(heads[0].union(*heads[1:], all=True), default=None)


_BUILDERS = {
    "quality": quality_figures,
    "gate": gate_figures,
    "staleness": staleness_figures,
    "agreement": agreement_figures,
    "queue": queue_figures,
}


def dashboard_figures(
    scope: Scope, *, sections=SECTIONS, rows: dict[SlicedKey, int] | None = None, counters: Counters | None = None
) -> dict:
    """Every figure of the dashboard for `scope` (or only `sections`), JSON-ready; from `counters` when the caller
    read them already (the page reads its service-level figures from the same ones)."""
    counters = counters or counters_for(scope, rows)
    return {
        "org": scope.org.slug,
        "from": iso_week(scope.since),
        "to": iso_week(scope.until),
        "application": scope.application or None,
        "slice": scope.slice or None,
        "weeks": [iso_week(week) for week in scope.weeks],
        "criteria": {kind: version.number for kind, version in counters.active.items()},
        "generated_at": timezone.now(),
        **{section: _BUILDERS[section](counters) for section in sections},
    }
