"""A reader's page of one item, where every row of the dashboard's lists leads someone who does not decide it in the
queue (a stakeholder, a criteria admin, an operator outside the queue's part of it): the item page's one read
(reviewer/queue/item_reads.py, `reading`), in a frame with no decision form, claim, lease or assignment. Blind review
holds as on the queue's page: the read decides what is hidden.

Any role of the org may read it, within what their memberships reach; another org's item, or one outside their reach,
is a 404.
"""

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from grading.models import ItemKind, Review
from reviewer.access import EVERY_ROLE, reaches_of, role_required
from reviewer.queue import reads
from reviewer.queue.item_reads import item_page


def _review_for_reader(request: HttpRequest, pk: int) -> Review:
    review = reads.review_for_reader(reaches=list(reaches_of(request.user, *EVERY_ROLE).values()), review_id=pk)
    if review is None:
        raise Http404("No such item among those you may read.")
    return review


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_item(request: HttpRequest, pk: int) -> HttpResponse:
    """The item of review `pk` as that review read it; for htmx, the corrections part the page refreshes while the gate
    grades a corrected draft."""
    review = _review_for_reader(request, pk)
    page = item_page(review, user=request.user, now=timezone.now(), reading=True)
    template = page.template
    if request.htmx and request.htmx.target == "corrections" and review.kind == ItemKind.DRAFT:
        template = "reviewer/queue/_correction.html#corrections"
    return render(request, template, {"page": page, "nav_active": "dashboard"})
