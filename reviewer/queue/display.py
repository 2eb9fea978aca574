"""How the queue reads to a person: labels, ages, item links, and one page of rows built from the reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property

from django.urls import reverse
from django.utils import timezone
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from grading.checks.answers import answer_reads_as
from grading.checks.definitions import AnswerKind, CheckSet
from grading.checks.routing import METADATA, SAMPLE, THUMBS_DOWN
from grading.core.outcomes import (
    BAND,
    BELOW_CERTIFIED,
    CORRECTED,
    JUDGE_CONTRADICTION,
    SENT_BY_PERSON,
    SPREAD,
    UNKNOWN_CHECK,
)
from grading.models import CriteriaVersion, ItemKind, Review, ReviewState
from grading.models.criteria import answers_stand
from grading.models.reach import Reach
from grading.reviews.blind import blind_of
from grading.reviews.reads import review_slots
from reviewer.models import Claim
from reviewer.queue import reads
from reviewer.queue.assignments import Reservation, reservations_of
from reviewer.templatetags.untrusted import untrusted

# In words, on the rows and in the reason filter alike: an operator new to the queue reads them without a key.
REASON_LABELS = {
    BAND: "score in the marginal band",
    UNKNOWN_CHECK: "a check came back unknown",
    JUDGE_CONTRADICTION: "the judge contradicts itself",
    SPREAD: "the judge's spread straddles the threshold",
    BELOW_CERTIFIED: "the judge's confidence is under the certified threshold",
    CORRECTED: "a person's correction, and a hard check still fails",
}


# Who or which routing rule sent an item the machine had decided alone (`Review.sent`): what its row says instead of
# the machine's reason, which was no doubt.
SENT_LABELS = {
    SENT_BY_PERSON: "sent to review by a person",
    THUMBS_DOWN: "sent: a user's thumbs down",
    METADATA: "sent: its metadata matched a routing rule",
    SAMPLE: "sent: in a routing rule's sample",
}


def _reason_label(review: Review) -> str:
    if review.sent:
        return SENT_LABELS.get(review.sent, "sent to review")
    return REASON_LABELS.get(review.reason, review.reason or "human")


def stale_reason(review: Review) -> str:
    """Why a review no longer counts, in words for the operator. Reads the review as loaded with its item,
    its criteria version and its state (`Review.objects.with_state()`)."""
    if review.state_now == ReviewState.SUPERSEDED:
        return "A newer review of this item replaced this one."
    if not review.criteria_version.is_active:
        return (
            f"A new {review.kind} criteria version was published after this review (it was judged under "
            f"v{review.criteria_version.number}); the item will be graded again under the active one."
        )
    if review.subject.fingerprint != review.fingerprint:
        if review.kind == ItemKind.CONVERSATION:
            return (
                "The conversation changed since this review: its active path now has different messages "
                "(new, edited, or another branch chosen). The new path will be graded again."
            )
        corrected = review.corrections.select_related("author").order_by("pk").first()
        if corrected is not None:
            by = corrected.author.get_username() if corrected.author else "a former user"
            return f"{by} approved it as corrected: the corrected revision goes through the gate again."
        return "The pipeline resubmitted the draft since this review; the new content will be graded again."
    return "This review no longer counts."


def age(delta: timedelta) -> str:
    minutes = max(0, int(delta.total_seconds() // 60))
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def count_label(count: int) -> str:
    return f"{reads.COUNT_CAP:,}+" if count > reads.COUNT_CAP else f"{count:,}"


@dataclass(frozen=True)
class QueueRow:
    review_id: int
    url: str
    kind: str
    reason: str  # why the machine sent it to people; "" while that is hidden (blind)
    blind: bool  # an audit item not yet decided: nothing the machine said of it is shown
    title: str
    context: str
    reason_label: str
    summary: str
    checks: list[tuple[str, str, str]]  # the machine's answer to each check: (name, answer, what it reads as)
    criteria_label: str
    waiting: str
    mine: bool
    held_by: str
    places: str  # an item several people decide: how many answered, how many places are open, or its adjudication
    assigned: str  # who may claim it first ("you", "ann until 15:00", "pool billing"); "" when anyone may
    due: str  # "due in 25 min", "overdue 1 h 05 min"; "" when no service-level target names it
    overdue: bool
    not_claimable: str  # why claim next passes this row over for the reader; "" when it is theirs to claim


def queue_row(
    review: Review,
    *,
    claims: Sequence[Claim],
    answered: int,
    user,
    now: datetime,
    reservation: Reservation | None = None,
    slots: reads.Slots | None = None,
    declined: bool = False,
    check_set: CheckSet | None = None,
) -> QueueRow:
    """`check_set`: the review's criteria version's (`CriteriaVersion.check_set`), when the caller has read it for
    every row of the version."""
    checks: list[tuple[str, str, str]] = []
    asked = (check_set or review.criteria_version.check_set()).checks
    blind = blind_of(review, answered=answered).verdicts  # the row in hand is the item's live review
    if blind:  # the list must not show what the item page hides
        summary = "verdict hidden until you decide"
        title, context = (review.draft.slug, review.draft.title) if review.draft_id else (
            review.conversation.external_id, review.conversation.application)  # fmt: skip
    elif review.kind == ItemKind.DRAFT:
        summary = f"score {review.score:.1f} of 10" if review.score is not None else "no score"
        if review.reason == JUDGE_CONTRADICTION and review.judge_passed is not None:
            summary += f", but the judge said {'pass' if review.judge_passed else 'fail'}"
        for check in asked:
            if check.kind == AnswerKind.SCORE and review.sub_scores and check.key in review.sub_scores:
                checks.append((check.name, f"{review.sub_scores[check.key]} of {check.scale}", ""))
        title, context = review.draft.slug, review.draft.title
    else:
        for check in asked:
            answer = str((review.checks.get(check.key) or {}).get("verdict", "unknown"))
            checks.append((check.name, answer, answer_reads_as(check, answer)))
        summary, title, context = "", review.conversation.external_id, review.conversation.application
    mine = any(claim.holder_id == user.pk for claim in claims)
    held_by = ", ".join(
        f"{'you' if claim.holder_id == user.pk else claim.holder.get_username()} (until {claim.expires_at:%H:%M})"
        for claim in claims
    )
    return QueueRow(
        review_id=review.pk,
        url=reverse("review_detail", args=[review.pk]),
        kind=review.kind,
        reason="" if blind else review.reason,
        blind=blind,
        title=title,
        context=context,
        reason_label="audit sample" if blind else _reason_label(review),
        summary=summary,
        checks=checks,
        criteria_label=f"{review.kind} v{review.criteria_version.number}",
        waiting=age(now - review.finished_at),
        mine=mine,
        held_by=held_by,
        places=_places(review, answered=answered, held=len(claims)),
        assigned=_assigned(reservation, user),
        **due_of(review, now),
        not_claimable=not_claimable(user.pk, mine=mine, declined=declined, reservation=reservation, slots=slots),
    )


def not_claimable(
    user_id: int, *, mine: bool, declined: bool, reservation: Reservation | None, slots: reads.Slots | None
) -> str:
    """Why claim next passes the row over for this person, in words; "" when it would hand it to them. The rule the
    page states, in the form the page reads it (the rows in hand); claim next's scan is its SQL form
    (reads.queue_first_free), and tests/reviewer/queue/test_claim_next_order.py holds the two equal."""
    if mine:
        return "you hold it"
    if declined:
        return "you declined it"
    if reservation is not None and not reservation.allows(user_id):
        return f"reserved for {reservation.named}"
    refused = slots.place_for(user_id) if slots is not None else None
    return refused[1] if refused else ""


def due_of(review: Review, now: datetime) -> dict:
    """When people owe the item a decision, as the queue row and the item page say it: overdue from the moment its
    due time passes (a comparison with now: nothing has to run for it)."""
    if review.due_at is None:
        return {"due": "", "overdue": False}
    if review.due_at <= now:
        return {"due": f"overdue {age(now - review.due_at)}", "overdue": True}
    return {"due": f"due in {age(review.due_at - now)}", "overdue": False}


def _assigned(reservation: Reservation | None, user) -> str:
    if reservation is None:
        return ""
    who = "you" if reservation.person_ids == {user.pk} else reservation.named
    if reservation.allows(user.pk) and who != "you":
        who += " (you among them)"
    return who + (f" until {reservation.until:%H:%M}" if reservation.until else "")


def _places(review: Review, *, answered: int, held: int) -> str:
    slots = review_slots(review)
    if slots == 1:
        return ""
    if answers_stand(slots=slots, answered=answered):
        return "awaiting adjudication"
    return f"{answered} of {slots} answered · {max(0, slots - answered - held)} open"


def row_html(row: QueueRow) -> SafeString:
    """A queue row's `<tr>`, every value escaped (and titles and contexts shown as `untrusted` shows them). Written
    in Python rather than as the list template's loop: the template engine's nodes, a few hundred a row, cost more
    CPU than the rest of the page's rendering (bench/README.md, bench_queue)."""
    e = conditional_escape
    css = ' class="mine"' if row.mine else (' class="passed-over"' if row.not_claimable else "")
    pill = "" if row.blind else (" unknown" if row.reason == "unknown_check" else " human")
    why = f'<span class="pill{pill}">{e(row.reason_label)}</span>'
    if row.places:
        adjudication = " unknown" if row.places == "awaiting adjudication" else ""
        why += f' <span class="pill{adjudication}" data-places>{e(row.places)}</span>'
    if row.assigned:
        why += f' <span class="pill" data-assigned>for {e(row.assigned)}</span>'
    said = f"{e(row.summary)}{' · ' if row.checks else ''}" if row.summary else ""
    said += " · ".join(f'{e(name)} <b class="{e(reads_as)}">{e(answer)}</b>' for name, answer, reads_as in row.checks)
    waiting = e(row.waiting)
    if row.due:
        waiting += f'<br><span class="{"fail" if row.overdue else "sub"}" data-due>{e(row.due)}</span>'
    held = e(row.held_by)
    if row.not_claimable and not row.mine:
        held += f'{"<br>" if row.held_by else ""}<span class="note" data-passed-over>claim next passes it: '
        held += f"{e(row.not_claimable)}</span>"
    return mark_safe(  # noqa: S308 - every value is escaped above
        f'<tr data-row="{row.review_id}"{css}>\n'
        f'        <td><a href="{e(row.url)}" data-open>{untrusted(row.title)}</a>'
        f' <span class="sub">{untrusted(row.context)}</span></td>\n'
        f'        <td data-label="kind">{e(row.kind)}</td>\n'
        f'        <td data-label="why">{why}</td>\n'
        f'        <td data-label="the machine said" class="said">{said}</td>\n'
        f'        <td data-label="criteria">{e(row.criteria_label)}</td>\n'
        f'        <td data-label="waiting">{waiting}</td>\n'
        f'        <td data-label="held by">{held}</td>\n'
        "      </tr>"
    )


@dataclass(frozen=True)
class ReasonCount:
    reason: str
    label: str
    count: int

    @property
    def count_label(self) -> str:
        return count_label(self.count)


@dataclass(frozen=True)
class QueuePage:
    rows: list[QueueRow]
    total: int
    total_label: str
    counts: list[ReasonCount]
    oldest: str
    held_by_others: int
    my_claims: list[Claim]
    next_cursor: int | None
    previous_cursor: int | None
    criteria_versions: list[CriteriaVersion]
    refreshed_at: datetime
    reaches: Sequence[Reach]

    @property
    def rows_html(self) -> list[SafeString]:
        """Each row's `<tr>`, as the list shows it (`row_html`)."""
        return [row_html(row) for row in self.rows]

    # What the filters offer, read when the page shows them: htmx's refresh of the list (every 15 s on every open
    # queue) shows none.
    @cached_property
    def applications(self) -> list[str]:
        return reads.queue_applications(self.reaches)

    @cached_property
    def slices(self) -> list[str]:
        """The dimension values reviews within reach were filed under ("release=2.4")."""
        return reads.queue_slices(self.reaches)


def queue_page(
    *,
    user,
    filters: reads.QueueFilters = reads.NO_FILTERS,
    after: int | None = None,
    before: int | None = None,
    now: datetime | None = None,
    page_size: int = reads.PAGE_SIZE,
    org_id: int | None = None,
    reaches: Sequence[Reach] | None = None,
) -> QueuePage:
    """One page of the queue, oldest first within priority, with counts per reason and who holds what.

    Only what the person's operator memberships reach. A cursor names a review (the last of the previous page, or
    the first of the next); one out of reach is ignored. The number of queries does not depend on the number of
    items. `org_id`: that org's alone (a personal token's, over the API). `reaches`: the person's operator reaches
    when the caller has read them already (`reads.operator_reaches`).
    """
    now = now or timezone.now()
    if reaches is None:
        reaches = reads.operator_reaches(user, org_id=org_id)
    key_after, key_before = reads.cursor_key(reaches, after), reads.cursor_key(reaches, before)
    if key_before is not None:
        key_after = None
    versions = reads.queue_versions(reaches)
    lanes = reads.queue_lanes(versions, reaches, filters, user_id=user.pk, now=now)
    reviews = reads.queue_rows(lanes=lanes, filters=filters, after=key_after, before=key_before, limit=page_size + 1)
    stats = reads.queue_stats(lanes=lanes)
    more = len(reviews) > page_size
    reviews = reviews[:page_size]
    if key_before is not None:
        reviews.reverse()
    has_more_after, has_more_before = (True, more) if key_before is not None else (more, key_after is not None)

    claims, declined = reads.claims_shown(reaches, now, user_id=user.pk, review_ids=[review.pk for review in reviews])
    claims_by_review: dict[int, list[Claim]] = {}
    for claim in claims:
        claims_by_review.setdefault(claim.review_id, []).append(claim)
    reservations = reservations_of(reviews, now)
    slots = reads.slots_on(reviews, now, live=claims)
    check_sets = {version.pk: version.check_set() for version in versions}
    rows = [
        queue_row(
            review,
            claims=claims_by_review.get(review.pk, []),
            answered=len(slots[review.pk].answered_by),
            user=user,
            now=now,
            reservation=reservations.get(review.pk),
            slots=slots[review.pk],
            declined=review.pk in declined,
            check_set=check_sets.get(review.criteria_version_id),
        )
        for review in reviews
    ]
    counts = [ReasonCount(reason, label, stats.counts[reason]) for reason, label in REASON_LABELS.items()]
    if stats.counts[""]:
        counts.append(ReasonCount("", "other", stats.counts[""]))
    capped = sum(min(n, reads.COUNT_CAP) for n in stats.counts.values())
    return QueuePage(
        rows=rows,
        total=stats.total,
        total_label=f"{capped:,}+" if stats.capped else f"{stats.total:,}",
        counts=counts,
        oldest=age(now - stats.oldest) if stats.oldest else "",
        held_by_others=sum(1 for claim in claims if claim.holder_id != user.pk),
        my_claims=[claim for claim in claims if claim.holder_id == user.pk],
        next_cursor=rows[-1].review_id if rows and has_more_after else None,
        previous_cursor=rows[0].review_id if rows and has_more_before else None,
        criteria_versions=versions,
        refreshed_at=now,
        reaches=reaches,
    )
