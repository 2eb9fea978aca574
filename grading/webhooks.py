"""Webhooks to a draft's callback URL: on the machine verdict and on a later human decision.

Signed with the org's secret so the pipeline can trust them: `X-Tollgate-Signature: sha256=<hex>` where
<hex> is HMAC-SHA256(secret, f"{timestamp}.".encode() + body) and `X-Tollgate-Timestamp` carries the
timestamp (reject old ones to stop replays). Every try is logged as a WebhookDelivery; failures are
retried with exponential backoff and jitter.
"""

import hashlib
import hmac
import json
import random
import time
import urllib.error
import urllib.request

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder

from grading import enqueue
from grading.models import Review, WebhookDelivery
from grading.selectors import draft_status

MACHINE_VERDICT = "machine_verdict"
HUMAN_DECISION = "human_decision"
_TIMEOUT_SECONDS = 10


def signature(*, secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def notify_pipeline(*, review_id: int, event: str) -> None:
    """Send the verdict of a draft review to its pipeline, from a worker. Call it after commit."""
    enqueue.webhook_delivery(review_id=review_id, event=event)


def webhook_deliver(*, review: Review, event: str, attempt: int) -> WebhookDelivery:
    """POST the draft's status to its callback URL once, and log the try."""
    draft = review.draft
    body = json.dumps({"event": event, "draft": draft_status(draft)}, cls=DjangoJSONEncoder).encode()
    timestamp = str(int(time.time()))
    request = urllib.request.Request(  # noqa: S310 - the URL is an http(s) URL validated on submission
        draft.callback_url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "Tollgate-Webhook/1",
            "X-Tollgate-Event": event,
            "X-Tollgate-Timestamp": timestamp,
            "X-Tollgate-Signature": signature(secret=draft.org.webhook_secret, timestamp=timestamp, body=body),
        },
    )
    status, error = None, ""
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as response:  # noqa: S310
            status = response.status
    except urllib.error.HTTPError as exc:
        status, error = exc.code, f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    return WebhookDelivery.objects.create(
        draft=draft,
        review=review,
        event=event,
        url=draft.callback_url,
        attempt=attempt,
        status_code=status,
        error=error,
        delivered=status is not None and 200 <= status < 300,
    )


def retry_delay(attempt: int) -> float:
    """Exponential backoff with full jitter, capped."""
    ceiling = min(settings.WEBHOOK_RETRY_CAP_SECONDS, settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** (attempt - 1))
    return random.uniform(0, ceiling)
