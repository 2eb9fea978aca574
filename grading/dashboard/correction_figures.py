"""How often people correct rather than approve or reject, and which repairs they make that Tollgate does not: for the
dashboard's corrections panel and `GET /api/v1/corrections/figures`.

Read from the decisions, corrections and reviews of the scope's weeks rather than from the rollup's counters: a
correction is written by the item pages' services, which book no counters, and people's decisions and corrections
are few beside the machine's reviews. So, as the quality rate against people (grading/dashboard/certified.py), the
page loads the panel apart. Each figure is a count over rows one function yields (`choice_rows`, `repair_rows`), and
the list behind each number filters those same rows, so a number and its list cannot differ.

1. Choices: each decision people made in the scope's weeks (by week of the decision) is one of `CHOICES`: corrected
   (a draft approved as corrected, the decision on its corrected revision; or a review decided with a correction of
   its own that the gate did not refuse, such as a conversation's expected reply), else approved, rejected, sent
   back or unknown by the decision's outcome.
   Each is counted per ISO week and per check that failed on the review the person was deciding (for a corrected
   draft, the review of the body they corrected; `failed_checks`), "" when none failed. A draft correction the gate
   refused is no decision: the item is back in the queue, and its next decision is counted by its outcome.
2. Repairs, per finding code: the gate's auto-repairs (each draft review whose `repairs.applied` names the code, by
   week it was graded), beside people's corrections of drafts whose review had the finding (by week of the
   correction) and, of those the gate graded again, how many no longer have it (fixed by people). A code people
   fix often and the gate never repairs is the next repair to automate.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

from django.db.models import Q
from django.db.models.fields.json import KeyTransform

from grading.core.weeks import in_weeks, iso_week, monday
from grading.dashboard.corrections import failed_checks
from grading.dashboard.figures import Scope
from grading.models import Correction, Decision, ItemKind, Review, ReviewState

CHUNK = 2000
CORRECTED, APPROVED, REJECTED, SENT_BACK, UNKNOWN = "corrected", "approved", "rejected", "sent_back", "unknown"
CHOICES = (CORRECTED, APPROVED, REJECTED, SENT_BACK, UNKNOWN)
_BY_OUTCOME = {
    Decision.Outcome.APPROVE: APPROVED,
    Decision.Outcome.PASS: APPROVED,
    Decision.Outcome.REJECT: REJECTED,
    Decision.Outcome.FAIL: REJECTED,
    Decision.Outcome.SEND_BACK: SENT_BACK,
    Decision.Outcome.UNKNOWN: UNKNOWN,
}
AUTO_REPAIRED, PEOPLE_CORRECTED, PEOPLE_FIXED = "auto_repaired", "people_corrected", "people_fixed"
REPAIR_COUNTS = (AUTO_REPAIRED, PEOPLE_CORRECTED, PEOPLE_FIXED)


@dataclass(frozen=True)
class Counted:
    """One row a figure counts: the review it leads to, its kind, week, what it counts as, and the checks (finding
    codes) it is counted under ("" alone: none)."""

    review_id: int
    kind: str
    week: date
    what: str  # a choice (CHOICES) or a repair count (REPAIR_COUNTS)
    checks: tuple[str, ...]


def _within(rows, scope: Scope, prefix: str):
    """Rows (related to a review through `prefix`) within the scope's reach and application."""
    if scope.reach is not None:
        rows = rows.filter(scope.reach.rows(prefix))
    if scope.application:
        rows = rows.filter(Q(**{f"{prefix}kind": ItemKind.DRAFT}) | Q(**{f"{prefix}application": scope.application}))
    return rows


def choice_rows(scope: Scope) -> Iterator[Counted]:
    """Each decision of the scope's weeks as a choice (the module's step 1), a chunk of decisions at a time with two
    more queries per chunk for the corrections that name their reviews."""
    decisions = _within(Decision.objects.filter(org=scope.org), scope, "review__")
    decisions = decisions.filter(in_weeks("decided_at", since=scope.since, until=scope.until))
    rows = (
        decisions.order_by("decided_at", "pk")
        .values_list("review_id", "review__kind", "outcome", "decided_at", "review__findings", "review__checks")
        .iterator(chunk_size=CHUNK)
    )
    while chunk := list(itertools.islice(rows, CHUNK)):
        review_ids = [row[0] for row in chunk]
        # A draft approved as corrected: the decision is its corrected revision's; the checks, the corrected review's.
        approved = dict(
            (regrade, (findings, checks))
            for regrade, findings, checks in Correction.objects.filter(
                regrade_id__in=review_ids, state=Correction.State.APPROVED
            ).values_list("regrade_id", "review__findings", "review__checks")
        )
        # A correction on the decided review itself: an expected reply, or a corrected body the gate did not refuse.
        corrected_on = set(
            Correction.objects.filter(review_id__in=review_ids)
            .exclude(state__in=(Correction.State.REFUSED, Correction.State.OVERTAKEN))
            .values_list("review_id", flat=True)
        )
        for review_id, kind, outcome, decided_at, findings, checks in chunk:
            if review_id in approved:
                findings, checks = approved[review_id]
            corrected = review_id in approved or review_id in corrected_on
            choice = CORRECTED if corrected else _BY_OUTCOME.get(outcome, UNKNOWN)
            failed = tuple(failed_checks(kind, findings=findings, checks=checks)) or ("",)
            yield Counted(review_id, kind, monday(decided_at), choice, failed)


def repair_rows(scope: Scope) -> Iterator[Counted]:
    """The gate's repairs and people's corrections of drafts in the scope's weeks (the module's step 2)."""
    if scope.reach is not None and not scope.reach.covers(ItemKind.DRAFT, ""):
        return
    graded = Review.objects.filter(org=scope.org, kind=ItemKind.DRAFT, repairs__isnull=False).exclude(
        state=ReviewState.TRIAL
    )
    graded = graded.filter(in_weeks("finished_at", since=scope.since, until=scope.until))
    applied = graded.annotate(applied=KeyTransform("applied", "repairs")).order_by("finished_at", "pk")
    for review_id, finished_at, repairs in applied.values_list("pk", "finished_at", "applied").iterator(CHUNK):
        codes = {r.get("code") for r in repairs if isinstance(r, dict)} if isinstance(repairs, list) else set()
        codes = tuple(sorted(code for code in codes if isinstance(code, str)))
        if codes:
            yield Counted(review_id, ItemKind.DRAFT, monday(finished_at), AUTO_REPAIRED, codes)
    corrections = Correction.objects.filter(org=scope.org, kind=Correction.Kind.DRAFT_BODY)
    corrections = corrections.filter(in_weeks("created_at", since=scope.since, until=scope.until))
    fields = ("review_id", "created_at", "review__findings", "regrade_id", "regrade__findings")
    for review_id, created_at, findings, regrade_id, regraded in (
        corrections.order_by("created_at", "pk").values_list(*fields).iterator(CHUNK)
    ):
        codes = tuple(failed_checks(ItemKind.DRAFT, findings=findings, checks=None))
        if not codes:
            continue
        week = monday(created_at)
        yield Counted(review_id, ItemKind.DRAFT, week, PEOPLE_CORRECTED, codes)
        if regrade_id is not None:
            left = set(failed_checks(ItemKind.DRAFT, findings=regraded, checks=None))
            if fixed := tuple(code for code in codes if code not in left):
                yield Counted(review_id, ItemKind.DRAFT, week, PEOPLE_FIXED, fixed)


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _most_corrected(item: tuple[str, Counter]) -> tuple:
    code, counts = item
    return (-counts[PEOPLE_CORRECTED], -counts[PEOPLE_FIXED], code)


def correction_figures(scope: Scope) -> dict:
    """Per kind, the choices in total, per ISO week and per check that failed, each with the share corrected; and
    per finding code, the gate's repairs beside people's (most corrected first)."""
    choices = {kind: {"total": Counter(), "weeks": {}, "checks": {}} for kind in ItemKind.values}
    for row in choice_rows(scope):
        counts = choices[row.kind]
        counts["total"][row.what] += 1
        counts["weeks"].setdefault(row.week, Counter())[row.what] += 1
        for check in row.checks:
            counts["checks"].setdefault(check, Counter())[row.what] += 1
    repairs: dict[str, Counter] = {}
    for row in repair_rows(scope):
        for code in row.checks:
            repairs.setdefault(code, Counter())[row.what] += 1

    def counted(counts: Counter) -> dict:
        decided = sum(counts[choice] for choice in CHOICES)
        return {**{choice: counts[choice] for choice in CHOICES}, "decided": decided,
                "corrected_share": _share(counts[CORRECTED], decided)}  # fmt: skip

    return {
        "choices": {
            kind: {
                "total": counted(c["total"]),
                "by_week": [
                    {"week": iso_week(week), **counted(c["weeks"].get(week, Counter()))} for week in scope.weeks
                ],
                "by_check": [
                    {"check": check, **counted(counts)}
                    for check, counts in sorted(c["checks"].items(), key=lambda i: (-i[1][CORRECTED], i[0]))
                ],
            }
            for kind, c in choices.items()
        },
        "repairs": [
            {"code": code, **{name: counts[name] for name in REPAIR_COUNTS}}
            for code, counts in sorted(
                repairs.items(), key=lambda i: (-i[1][PEOPLE_CORRECTED], -i[1][PEOPLE_FIXED], i[0])
            )
        ],
    }
