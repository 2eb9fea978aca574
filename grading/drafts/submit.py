"""A draft in: saved by external id with the fingerprint of its content, and owed a grading when submitted."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from grading.core.errors import LimitExceeded
from grading.core.evidence import draft_fingerprint
from grading.core.schemas import DraftIn
from grading.delivery import enqueue
from grading.models import Correction, Draft, ItemKind, Org
from grading.models.audit import audit_record
from grading.reviews.services import review_state_refresh


def draft_save(*, org: Org, payload: DraftIn) -> Draft:
    """Create or replace a draft by external id; its fingerprint names the content."""
    max_bytes = settings.MAX_DRAFT_BYTES
    size = len(payload.body.encode())
    if size > max_bytes:
        raise LimitExceeded("MAX_DRAFT_BYTES", max_bytes, f"the draft's body is {size} bytes; the limit is {max_bytes}")
    fields = {
        "title": payload.title,
        "slug": payload.slug,
        "body": payload.body,
        "source_urls": [str(url) for url in payload.source_urls],
        "callback_url": str(payload.callback_url) if payload.callback_url else "",
        "run_id": payload.run_id or "",
        **({"end_user": payload.end_user} if payload.end_user is not None else {}),
        **({"metadata": payload.metadata} if payload.metadata is not None else {}),
    }
    fields["fingerprint"] = draft_fingerprint(
        title=fields["title"], body=fields["body"], source_urls=fields["source_urls"]
    )
    with transaction.atomic():
        draft, created = Draft.objects.update_or_create(org=org, external_id=payload.external_id, defaults=fields)
        if not created:  # a draft this transaction inserted has no review: nothing grades it before it commits
            review_state_refresh(subject=draft)
        _corrections_overtaken(draft)
    return draft


def _corrections_overtaken(draft: Draft) -> None:
    """A person's corrected revision the draft no longer holds can never be graded: its correction is overtaken
    (grading/drafts/corrections.py), so it does not wait for the gate for ever."""
    waiting = Correction.objects.filter(
        draft_id=draft.pk, kind=Correction.Kind.DRAFT_BODY, state=Correction.State.GRADING
    ).exclude(corrected_fingerprint=draft.fingerprint)
    for correction in waiting.select_for_update():
        correction.state, correction.settled_at = Correction.State.OVERTAKEN, timezone.now()
        correction.save(update_fields=["state", "settled_at"])
        audit_record(action="correction.overtaken", org=draft.org, actor=None, target=correction,
                     detail={"correction": correction.pk, "fingerprint": draft.fingerprint}, item=draft)  # fmt: skip


def draft_submit(*, org: Org, payload: DraftIn) -> Draft:
    """Save a draft and owe it a grading in the same transaction; a worker is asked right after commit.

    The ticket committed with the draft is its outbox row (grading/reviews/inflight.py): when the broker cannot take the
    task at that moment, the draft is still owed its grading, and the recovery run sends it within a minute or two
    of the broker answering again. So the pipeline's 202 is true either way: what it sent is stored and will be
    graded. The send tries once: a pipeline is waiting on this request.
    """
    with transaction.atomic():
        draft = draft_save(org=org, payload=payload)
        ticket = enqueue.Ticket(kind=ItemKind.DRAFT, item_id=draft.pk, task_id=enqueue.new_task_id())
        Draft.objects.filter(pk=draft.pk).update(queued_at=timezone.now(), grading_task_id=ticket.task_id)
        transaction.on_commit(lambda: enqueue.grading_send([ticket], patient=False))
    return draft
