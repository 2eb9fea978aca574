"""The people side's Celery tasks: the escalation sweep (beat, every minute) and its deliveries, which run on the
`webhooks` queue so that a slow or failing SMTP server or receiver holds neither grading nor the queue."""

import logging
import smtplib
import time

from celery import shared_task
from django.conf import settings

from grading.core import outbound
from grading.delivery.signing import signature_headers
from grading.drafts.webhooks import retry_delay
from grading.models import Org
from reviewer.models import Escalation
from reviewer.queue.escalation import Swept, digest_mail, escalations_sweep, webhook_body

logger = logging.getLogger(__name__)


@shared_task(name="reviewer.tasks.escalations_sweep")
def sweep_escalations() -> int:
    """Record and hand out the notices of items newly due soon or overdue; the number of orgs swept."""
    return len(escalations_sweep(deliver))


def deliver(swept: Swept, webhook_url: str) -> None:
    """A sweep's mails (one per person) and webhook (one per org), each a task of the `webhooks` queue."""
    for person_id, items in swept.digests.items():
        escalation_mail.delay(swept.org_id, person_id, items)
    if webhook_url and any(swept.notices.values()):
        escalation_webhook.delay(swept.org_id, swept.notices)


@shared_task(name="reviewer.tasks.escalation_mail", bind=True, max_retries=None)
def escalation_mail(self, org_id: int, person_id: int, items: dict[str, list[int]], attempt: int = 1) -> bool:
    """One digest mail; an SMTP server that fails or does not answer within EMAIL_TIMEOUT is tried again later."""
    message = digest_mail(org_id, person_id, items)
    if message is None:
        logger.warning(
            "escalation: nothing sent to person %s of org %s (no e-mail address, or none of the items still waits "
            "within their reach)",
            person_id,
            org_id,
        )
        return False
    try:
        message.send()
    except (smtplib.SMTPException, OSError) as exc:
        if attempt >= settings.WEBHOOK_MAX_ATTEMPTS:
            logger.error("escalation mail to person %s given up after %s tries: %s", person_id, attempt, exc)
            return False
        raise self.retry(args=(org_id, person_id, items, attempt + 1), countdown=retry_delay(attempt)) from exc
    return True


@shared_task(name="reviewer.tasks.escalation_webhook", bind=True, max_retries=None)
def escalation_webhook(self, org_id: int, notices: dict[str, list[int]], attempt: int = 1) -> bool:
    """One signed POST of the sweep's items to the org's escalation webhook, through the guarded outbound client."""
    org = Org.objects.get(pk=org_id)
    url = Escalation.objects.filter(org_id=org_id).values_list("webhook_url", flat=True).first() or ""
    if not url:
        return False
    body = webhook_body(org_id, notices)
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Tollgate-Webhook/1",
        "X-Tollgate-Event": "queue_escalation",
        "X-Tollgate-Timestamp": timestamp,
        **signature_headers(org=org, timestamp=timestamp, body=body),
    }
    try:
        response = outbound.outbound_request(
            method="POST", url=url, headers=headers, body=body, deadline_seconds=settings.WEBHOOK_TIMEOUT_SECONDS
        )
        failed = None if 200 <= response.status < 300 else f"answered {response.status}"
    except outbound.Refused as exc:  # an address we never send to: trying again cannot help
        logger.error("escalation webhook of org %s refused: %s", org_id, exc)
        return False
    except outbound.OutboundError as exc:
        failed = str(exc)
    if failed is None:
        return True
    if attempt >= settings.WEBHOOK_MAX_ATTEMPTS:
        logger.error("escalation webhook of org %s given up after %s tries: %s", org_id, attempt, failed)
        return False
    raise self.retry(args=(org_id, notices, attempt + 1), countdown=retry_delay(attempt))
