"""Who may send an item to review from a list, and which rows a list offers it on: leads (within their reach),
criteria admins and org admins (their reach is the whole org). The page is reviewer/queue/views/send.py."""

from django.http import Http404, HttpRequest

from grading.models import Review
from grading.models.reach import Reach, within
from reviewer.access import reaches_of
from reviewer.models import Role

SENDER_ROLES = (Role.LEAD, Role.CRITERIA_ADMIN, Role.ORG_ADMIN)


def sendable(review: Review, *, send_reach: Reach | None) -> bool:
    """Whether a list offers to send this row's item to review: it may be sent (`Review.sendable`) and the reader's
    sender roles reach it (the page checks it all again)."""
    return send_reach is not None and review.sendable and send_reach.covers(review.kind, review.application)


def review_for_sender(request: HttpRequest, pk: int) -> Review:
    """The review within the reach of the person's sender roles (a criteria or org admin's is the whole org); 404
    otherwise, as another org's."""
    reaches = list(reaches_of(request.user, *SENDER_ROLES).values())
    review = (
        Review.objects.with_state()
        .filter(within(reaches), pk=pk)
        .select_related("org", "criteria_version", "conversation", "draft")
        .first()
    )
    if review is None:
        raise Http404("No such item within your reach.")
    return review
