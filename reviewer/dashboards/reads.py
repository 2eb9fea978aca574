"""Reads behind the dashboard's numbers: which org a stakeholder may look at, and the reviews behind one number
(a filtered, paged list, and the export). The figures themselves are grading's (grading/dashboard/figures.py).

What a number counted is grading's to say (grading/figures/definitions.py: `counted_in`, `machine_said`, from the one
table the counters are kept by), so a number's link lists exactly the reviews it counted; here the link's
parameters only pick the counter and its cell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, fields

from django.db.models import Q, QuerySet
from django.http import QueryDict
from django.utils import timezone

from grading.core.errors import FieldInvalid
from grading.core.schemas import identifier_checked
from grading.core.weeks import in_weeks
from grading.dashboard.figures import PEOPLE_SAMPLES, Scope, scope_for
from grading.figures.definitions import LATE, ON_TIME, PASS_FAIL, counted_in, machine_said
from grading.figures.expressions import ANSWER_SHAPE
from grading.models import CriteriaVersion, Decision, ItemKind, Org, Review, ReviewState, Route
from grading.models.criteria import default_checks
from grading.models.reach import Reach
from grading.reviews.blind import reviews_blind
from reviewer.access import org_asked, reaches_from
from reviewer.models import Membership
from reviewer.queue.reads import queue_applications

PAGE_SIZE = 50
SETS = ("counting", "stale", "errors")
DUE = ("overdue", LATE, ON_TIME)
SAMPLES = ("audit", "unsure", "label")
# The people-vs-people lists (`people`), per sample: the value naming the items several people answered, and the
# one naming those they split on. The labels' values came first, and links already carry them.
PEOPLE_LISTS = {"audit": ("audit", "audit_split"), "unsure": ("unsure", "unsure_split"), "label": ("labelled", "split")}
PEOPLE = {
    value: metric
    for sample, values in PEOPLE_LISTS.items()
    for value, metric in zip(values, (PEOPLE_SAMPLES[sample].patterns, PEOPLE_SAMPLES[sample].split), strict=True)
}


def dashboard_orgs(memberships: Iterable[Membership]) -> list[Org]:
    """The orgs whose figures this person may read: any role in the org (from their memberships in hand,
    `memberships_of`)."""
    return list(Org.objects.filter(pk__in={membership.org_id for membership in memberships}).order_by("slug"))


def dashboard_org(memberships: Iterable[Membership], slug: str | None, *, orgs: list[Org] | None = None) -> Org | None:
    """The org asked for (the first of theirs when none is named); None when it is not one of theirs."""
    return org_asked(dashboard_orgs(memberships) if orgs is None else orgs, slug)


@dataclass(frozen=True)
class ReviewFilter:
    """What one number counted, as query parameters the page's links carry."""

    kind: str = ItemKind.CONVERSATION
    set: str = "counting"  # counting | stale (whole org) | errors (judge errors, by week of the attempt)
    route: str = ""
    reason: str = ""
    check: str = ""  # with verdict: a conversation check's machine verdict
    verdict: str = ""
    finding: str = ""
    repaired: bool = False
    decision: str = ""
    sample: str = ""  # with check, machine, human: one cell of an agreement table
    machine: str = ""
    human: str = ""
    people: str = ""  # with check: the items several people answered in a sample, or split on (PEOPLE_LISTS)
    operator: int | None = None  # decisions by this person, by week of the decision
    decided: bool = False  # by week of the decision rather than the item's week
    due: str = ""  # service-level targets: overdue now, or decided late / on time by week of the decision (DUE)

    @property
    def reads_machine(self) -> bool:
        """Whether it picks reviews by what the machine said of them: an item people decide blind that it listed
        would say what blind review hides (grading/reviews/blind.py)."""
        return bool(self.route or self.reason or (self.check and self.verdict) or self.finding or self.repaired
                    or self.machine)  # fmt: skip

    @property
    def counts_by_week(self) -> bool:
        """The counting reviews of the scope's weeks (rather than stale ones, judge errors, or decisions)."""
        return self.set == "counting" and self.operator is None and not self.decided and not self.due

    def as_query(self) -> dict[str, str]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value not in ("", None, False) and not (f.name == "set" and value == "counting"):
                out[f.name] = "1" if value is True else str(value)
        return out


class InvalidFilter(FieldInvalid):
    pass


def _choice(params: QueryDict, name: str, allowed) -> str:
    value = params.get(name, "").strip()
    if value and value not in allowed:
        raise InvalidFilter(name, f"must be one of {', '.join(allowed)}")
    return value


def _name(params: QueryDict, name: str) -> str:
    """A reason's or a finding's code, as the page's links write it (at most 64 characters)."""
    try:
        return identifier_checked(params.get(name, "").strip()[:64])
    except ValueError as refused:
        raise InvalidFilter(name, str(refused)) from None


def _routes(params: QueryDict) -> str:
    routes = [r for r in params.get("route", "").split(",") if r.strip()]
    for route in routes:
        if route.strip() not in Route.values:
            raise InvalidFilter("route", f"must be one or more of {', '.join(Route.values)}, comma-separated")
    return ",".join(r.strip() for r in routes)


def _shaped(params: QueryDict, name: str, shape: re.Pattern, what: str) -> str:
    """An answer, as the page's links write it: any of any version's checks (a version defines its own), so
    checked for its shape; an answer the check does not have lists no review."""
    value = params.get(name, "").strip()
    if value and not shape.fullmatch(value):
        raise InvalidFilter(name, f"must be {what}")
    return value


_ANSWER = re.compile(ANSWER_SHAPE, re.ASCII)
_ANSWER_IS = "an answer: pass, fail, unknown, a category key or a score"


def checks_asked(org: Org, kind: str) -> tuple[str, ...]:
    """The checks the org's versions of `kind` (or "any") ask, which a link may name and an export has a column for
    (a row fills those of the version it was graded under): the active version's first in its order, then those
    of earlier versions, newest first. A conversation check holds its answer; a draft's score check, the score."""
    kinds = ItemKind.values if kind == "any" else [kind]
    versions = CriteriaVersion.objects.filter(org=org, kind__in=kinds).order_by("-is_active", "-number")
    by_kind = {kind: [] for kind in kinds}
    for version in versions:
        by_kind[version.kind].append(version)
    keys: dict[str, None] = {}
    for kind in kinds:
        for version in by_kind[kind] or [None]:
            check_set = version.check_set() if version is not None else default_checks(kind)
            keys |= dict.fromkeys(check_set.keys)
    return tuple(keys)


def filter_from(params: QueryDict, org: Org) -> ReviewFilter:
    """The filter from a link's query string; a value that is not one we write is an error naming it (a check
    must be one the org's versions ask, or the whole item's pass_fail)."""
    kind = _choice(params, "kind", (*ItemKind.values, "any")) or ItemKind.CONVERSATION
    operator = params.get("operator", "").strip()
    if operator and not operator.isdigit():
        raise InvalidFilter("operator", "must be a user id")
    return ReviewFilter(
        kind=kind,
        set=_choice(params, "set", SETS) or "counting",
        route=_routes(params),
        reason=_name(params, "reason"),
        check=_choice(params, "check", (*checks_asked(org, kind), PASS_FAIL)),
        verdict=_shaped(params, "verdict", _ANSWER, _ANSWER_IS),
        finding=_name(params, "finding"),
        repaired=params.get("repaired") == "1",
        decision=_choice(params, "decision", Decision.Outcome.values),
        sample=_choice(params, "sample", SAMPLES),
        machine=_shaped(params, "machine", _ANSWER, _ANSWER_IS),
        human=_shaped(params, "human", _ANSWER, _ANSWER_IS),
        people=_choice(params, "people", tuple(PEOPLE)),
        operator=int(operator) if operator else None,
        decided=params.get("decided") == "1",
        due=_choice(params, "due", DUE),
    )


def reader_reach(memberships: Iterable[Membership], org: Org) -> Reach:
    """What the person may read of `org`: the union of what their memberships (any role) there cover, from their
    memberships in hand (`memberships_of`, read once a request)."""
    return reaches_from(memberships)[org.pk]


def org_applications(org: Org, reach: Reach | None) -> list[str]:
    """The applications of the org's conversations the reader's reach covers: what the application filter offers."""
    return queue_applications([reach or Reach(org.pk)])  # the queue's loose index scan: a probe per application


def scope_from(org: Org, params: QueryDict, reach: Reach) -> Scope:
    application = params.get("application")
    return scope_for(
        org,
        since=params.get("from"),
        until=params.get("to"),
        application=application,
        reach=reach,
        slices=params.getlist("slice"),
    )


def reviews_behind(org: Org, scope: Scope, f: ReviewFilter) -> QuerySet[Review]:
    """The reviews one number counted: the same reviews, by the same rules, as its counter."""
    reviews = Review.objects.filter(org=org).exclude(state=ReviewState.TRIAL)
    decided_in_scope = in_weeks("decision__decided_at", since=scope.since, until=scope.until)
    if scope.reach is not None:
        reviews = reviews.filter(scope.reach.rows())
    if f.kind != "any":
        reviews = reviews.filter(kind=f.kind)
    if f.kind != ItemKind.DRAFT and scope.application:
        reviews = reviews.filter(Q(kind=ItemKind.DRAFT) | Q(application=scope.application))
    if scope.slice:  # filed under the dimension value when graded, as its counters were booked
        reviews = reviews.filter(slice__contains=scope.slice_filter)
    if f.set == "stale":
        reviews = reviews.in_state(ReviewState.STALE)
    elif f.set == "errors":
        reviews = reviews.filter(in_weeks("finished_at", since=scope.since, until=scope.until), route=Route.ERROR)
    elif f.due == "overdue":  # whatever the weeks: overdue now
        reviews = reviews.overdue(timezone.now())
    elif f.due:  # decided on time or late, by week of the decision: the `decided_due` counters' reviews
        reviews = reviews.filter(decided_in_scope, counted_in("decided_due", f.due))
    elif f.operator is not None or f.decided:
        reviews = reviews.filter(decided_in_scope)
        if f.operator is not None:
            reviews = reviews.filter(counted_in("decided_by", str(f.operator)))
    else:  # what counts: reviews under the active version of their kind (of each kind, for "any")
        kinds = ItemKind.values if f.kind == "any" else [f.kind]
        # The ids as values, not a subquery: one kind's is then `= id`, the plan the counting index was made for.
        active = list(
            CriteriaVersion.objects.filter(org=org, kind__in=kinds, is_active=True).values_list("pk", flat=True)
        )
        reviews = reviews.counting().filter(criteria_version__in=active, week__gte=scope.since, week__lte=scope.until)
    if f.route:
        reviews = reviews.filter(route__in=f.route.split(","))
    if f.reason:
        reviews = (
            reviews.filter(reason__startswith=f.reason) if len(f.reason) == 64 else reviews.filter(reason=f.reason)
        )
    if f.check and f.verdict:
        reviews = reviews.filter(machine_said(f.check, f.verdict))
    if f.finding:
        reviews = reviews.filter(counted_in("finding", f.finding))
    if f.repaired:
        reviews = reviews.filter(counted_in("repaired_pass"))
    if f.decision:
        reviews = reviews.filter(decision__outcome=f.decision)
    if f.sample:
        check = f.check or (PASS_FAIL if f.kind == ItemKind.DRAFT else None)
        reviews = reviews.filter(counted_in(f"agree_{f.sample}", check, pair=(f.machine or None, f.human or None)))
    if f.people:
        reviews = reviews.filter(counted_in(PEOPLE[f.people], f.check or PASS_FAIL))
    return reviews


@dataclass(frozen=True)
class ReviewPage:
    rows: list[Review]  # each with `verdicts_hidden`: its item is one people decide blind
    next_after: int | None
    withheld: int  # reviews of this page left out: the filter read what the machine said of items people decide blind


def review_page(
    reviews: QuerySet[Review], *, f: ReviewFilter, after: int | None, page_size: int = PAGE_SIZE
) -> ReviewPage:
    """Newest first, a page at a time (a keyset, so page 500 costs what page 1 does). Counting reviews go by
    (week, id), the order of their index (`review_counting_cell`); the other sets are small, and go by id.

    Blind review (grading/reviews/blind.py) is applied to the rows in hand: a review of an item people decide blind
    is listed without what the machine said, or withheld when the filter picked it by what the machine said."""
    by_week = f.counts_by_week
    order = ("-week", "-pk") if by_week else ("-pk",)
    if after:
        if by_week:
            week = Review.objects.filter(pk=after).values_list("week", flat=True).first()
            reviews = reviews.filter(Q(week__lt=week) | Q(week=week, pk__lt=after)) if week else reviews.none()
        else:
            reviews = reviews.filter(pk__lt=after)
    rows = list(
        reviews.with_state()
        .select_related("criteria_version", "conversation", "draft", "decision__decided_by")
        .order_by(*order)[: page_size + 1]
    )
    more = len(rows) > page_size
    rows = rows[:page_size]
    next_after = rows[-1].pk if more and rows else None
    blind = reviews_blind(rows)
    for review in rows:
        review.verdicts_hidden = blind[review.pk].verdicts
    shown = [review for review in rows if not (review.verdicts_hidden and f.reads_machine)]
    return ReviewPage(shown, next_after, withheld=len(rows) - len(shown))
