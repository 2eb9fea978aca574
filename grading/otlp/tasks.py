"""The export task: thin, takes ids, one try per run, retried later with backoff and jitter; and the writing of
the calls a logs request made whole beyond what it writes."""

from celery import shared_task

from grading.delivery import enqueue
from grading.delivery.evaluations import evaluations_send, exports_enabled, retry_delay
from grading.models import Review
from grading.otlp.pending import whole_calls_write


@shared_task(name=enqueue.EXPORT_EVALUATIONS, bind=True, max_retries=None)
def export_evaluations(self, review_id: int, event: str, attempt: int = 1) -> bool:
    review = Review.objects.select_related("criteria_version", "conversation", "draft").filter(pk=review_id).first()
    if review is None or not exports_enabled():
        return False
    export = evaluations_send(review=review, event=event, attempt=attempt)
    if export is None or export.final:
        return export is not None and export.delivered
    raise self.retry(args=(review_id, event, attempt + 1), countdown=retry_delay(attempt))


@shared_task(name=enqueue.WRITE_WHOLE_CALLS)
def write_whole_calls(org_id: int) -> int:
    return whole_calls_write(org_id=org_id)
