"""The org's webhook signing secret: the headers that sign what Tollgate sends, and rotating the secret with an
overlap in which the old one signs too.

Every signed request carries `X-Tollgate-Signature: sha256=<hex>`, where <hex> is HMAC-SHA256(current secret,
f"{timestamp}.".encode() + body), as it always has. During the overlap after a rotation it also carries
`X-Tollgate-Signature-Previous: sha256=<hex>` made with the old secret. A second header rather than two signatures
in one: a receiver that compares X-Tollgate-Signature whole (docs/pipelines-and-api.md's recipe before rotations) keeps
verifying as soon as it holds the new secret, and one that checks both headers verifies with either secret.
"""

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from grading.models import Org, new_webhook_secret
from grading.models.audit import audit_record

SIGNATURE_HEADER = "X-Tollgate-Signature"
PREVIOUS_SIGNATURE_HEADER = "X-Tollgate-Signature-Previous"
OVERLAP_DEFAULT = timedelta(hours=24)
# Long enough for a receiver's operator to roll out the new secret over a weekend; short enough that a secret
# thought leaked stops signing within days.
OVERLAP_MAX = timedelta(days=7)


def signature(*, secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def signature_headers(*, org: Org, timestamp: str, body: bytes, now: datetime | None = None) -> dict[str, str]:
    """The headers that sign `body` for `org` now: the current secret's signature, and the previous secret's while
    its overlap lasts."""
    now = now or timezone.now()
    headers = {SIGNATURE_HEADER: signature(secret=org.webhook_secret, timestamp=timestamp, body=body)}
    if previous_secret_signs(org, now):
        headers[PREVIOUS_SIGNATURE_HEADER] = signature(
            secret=org.webhook_secret_previous, timestamp=timestamp, body=body
        )
    return headers


def previous_secret_signs(org: Org, now: datetime) -> bool:
    until = org.webhook_secret_previous_until
    return bool(org.webhook_secret_previous) and until is not None and now < until


class OverlapInvalid(Exception):
    """An overlap out of bounds; nothing was changed."""


@dataclass(frozen=True)
class RotatedSecret:
    secret: str  # shown once to whoever rotated it
    previous_until: datetime | None  # when the old secret stops signing; None: it already has


def webhook_secret_rotate(
    *, org: Org, overlap: timedelta, actor: AbstractBaseUser | None = None, now: datetime | None = None
) -> RotatedSecret:
    """Give the org a new signing secret, the current one signing beside it for `overlap` (zero: never again).
    Only two secrets sign at once: rotating during an overlap ends the oldest at once. Audited without either
    secret."""
    if not timedelta(0) <= overlap <= OVERLAP_MAX:
        raise OverlapInvalid(f"The overlap is between 0 and {OVERLAP_MAX.days * 24} hours.")
    now = now or timezone.now()
    secret = new_webhook_secret()
    until = now + overlap if overlap else None
    with transaction.atomic():
        locked = Org.objects.select_for_update().get(pk=org.pk)
        cut_short = previous_secret_signs(locked, now)
        locked.webhook_secret_previous = locked.webhook_secret if until else ""
        locked.webhook_secret_previous_until = until
        locked.webhook_secret = secret
        locked.save(update_fields=["webhook_secret", "webhook_secret_previous", "webhook_secret_previous_until"])
        audit_record(
            action="webhook_secret.rotate",
            org=locked,
            actor=actor,
            target=locked,
            detail={
                "overlap_hours": overlap.total_seconds() / 3600,
                "previous_until": until.isoformat() if until else None,
                "cut_short_an_overlap": cut_short,
            },
        )
    org.refresh_from_db(fields=["webhook_secret", "webhook_secret_previous", "webhook_secret_previous_until"])
    return RotatedSecret(secret=secret, previous_until=until)
