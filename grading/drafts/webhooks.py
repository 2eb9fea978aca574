"""Webhooks to a draft's callback URL: on the machine verdict (sent by the gate) and on a later human decision (sent
by grading/reviews/services.py, where every decision is written), each after its commit, through the webhooks queue.

Signed with the org's secret so the pipeline can trust them (grading/delivery/signing.py: `X-Tollgate-Signature`,
and `X-Tollgate-Signature-Previous` during a rotation's overlap); `X-Tollgate-Timestamp` carries the timestamp
(reject old ones to stop replays). Sent through the guarded outbound client (grading/core/outbound.py),
each try within WEBHOOK_TIMEOUT_SECONDS in all. Every try is logged as a WebhookDelivery. A try that may
succeed later (a network error, the deadline, 408, 425, 429, 5xx) is retried with exponential backoff and
jitter, or after the receiver's Retry-After within the cap; a refused address, a redirect and any other 4xx
are final, and the log says why.
"""

import email.utils
import json
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction

from grading.core import outbound
from grading.delivery.signing import signature_headers
from grading.models import Review, WebhookDelivery
from grading.reviews.draft_reads import draft_status

# Statuses that say "not now" rather than "never": timeout, too early, too many requests.
_RETRIED_4XX = {408, 425, 429}


@dataclass(frozen=True)
class WebhookTry:
    delivery: WebhookDelivery | None  # None: the draft was erased during the try
    retry_in: float | None  # seconds until the next try; None: this try was final (delivered, or cannot succeed)


def webhook_deliver(*, review: Review, event: str, attempt: int) -> WebhookTry:
    """POST the draft's status to its callback URL once, log the try, and say whether and when to try again."""
    draft = review.draft
    body = json.dumps({"event": event, "draft": draft_status(draft)}, cls=DjangoJSONEncoder).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Tollgate-Webhook/1",
        "X-Tollgate-Event": event,
        "X-Tollgate-Timestamp": timestamp,
        **signature_headers(org=draft.org, timestamp=timestamp, body=body),
    }
    status, error, retry_in = None, "", None
    try:
        response = outbound.outbound_request(
            method="POST",
            url=draft.callback_url,
            headers=headers,
            body=body,
            deadline_seconds=settings.WEBHOOK_TIMEOUT_SECONDS,
        )
    except outbound.OutboundError as exc:
        status = getattr(exc, "status", None)
        error = f"{exc}; not retried" if exc.permanent else str(exc)
        retry_in = None if exc.permanent else retry_delay(attempt)
    else:
        status = response.status
        error, retry_in = _judge_answer(response, attempt)
    try:
        with transaction.atomic():
            delivery = WebhookDelivery.objects.create(
                draft=draft,
                review=review,
                event=event,
                url=draft.callback_url,
                attempt=attempt,
                status_code=status,
                error=error,
                delivered=status is not None and 200 <= status < 300 and not error,
            )
    except IntegrityError:  # the draft was erased while its webhook was on the way: no log of it is kept
        return WebhookTry(None, None)
    return WebhookTry(delivery, retry_in)


def _judge_answer(response: outbound.OutboundResponse, attempt: int) -> tuple[str, float | None]:
    """(error, seconds until the next try) for an answer from the receiver."""
    status = response.status
    if 200 <= status < 300:
        return "", None
    if 300 <= status < 400:
        where = response.headers.get("location", "nowhere")
        return f"HTTP {status}: redirects (this one to {where}) are not followed; not retried", None
    if status in _RETRIED_4XX or 500 <= status < 600:
        waited = _retry_after(response.headers.get("retry-after", ""))
        if waited is not None:
            return f"HTTP {status}", min(waited, settings.WEBHOOK_RETRY_CAP_SECONDS)
        return f"HTTP {status}", retry_delay(attempt)
    return f"HTTP {status}: the receiver refuses this request; not retried", None


def _retry_after(value: str) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None when absent or unreadable."""
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def retry_delay(attempt: int) -> float:
    """Exponential backoff with full jitter, capped."""
    ceiling = min(settings.WEBHOOK_RETRY_CAP_SECONDS, settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempt - 1))
    return random.uniform(0, ceiling)
