"""The webhook secret's rotation, as a receiver sees it: during the overlap every delivery verifies with the old
secret and with the new one (the documented recipe), after it only with the new one; a receiver that compares the
one header it always had keeps working once it holds the new secret."""

import hashlib
import hmac
from datetime import timedelta

import pytest
from django.utils import timezone

from grading.delivery.enqueue import MACHINE_VERDICT
from grading.delivery.signing import OverlapInvalid, webhook_secret_rotate
from grading.drafts.gate import draft_grade
from grading.judge.backends import HeuristicDraftJudge
from grading.models import AuditEvent, Org
from grading.tasks import deliver_webhook
from tests.builders.drafts import save_draft, setup_org_memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def allow_loopback(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]


def verify(secret: str, headers: dict, body: bytes) -> bool:
    """The recipe of docs/pipelines-and-api.md (headers as the receiver reads them, lower-cased here)."""
    expected = hmac.new(secret.encode(), headers["x-tollgate-timestamp"].encode() + b"." + body, hashlib.sha256)
    signatures = [headers.get("x-tollgate-signature", ""), headers.get("x-tollgate-signature-previous", "")]
    return any(hmac.compare_digest(signature, "sha256=" + expected.hexdigest()) for signature in signatures)


def verify_the_old_way(secret: str, headers: dict, body: bytes) -> bool:
    """The recipe of docs/pipelines-and-api.md before rotations: the one header, compared whole."""
    expected = hmac.new(secret.encode(), headers["x-tollgate-timestamp"].encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest(headers["x-tollgate-signature"], "sha256=" + expected.hexdigest())


def delivered(review, hook) -> tuple[dict, bytes]:
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is True
    return hook.received[-1]


def test_during_the_overlap_a_delivery_verifies_with_either_secret_and_after_it_only_with_the_new(
    org, receiver, allow_loopback
):
    old = org.webhook_secret
    new = webhook_secret_rotate(org=org, overlap=timedelta(hours=24)).secret
    hook = receiver([200, 200])
    setup_org_memory(org)
    review = draft_grade(draft_id=save_draft(org, callback_url=hook.url).pk, judge=HeuristicDraftJudge())
    headers, body = delivered(review, hook)
    assert verify(old, headers, body) and verify(new, headers, body)
    assert verify_the_old_way(new, headers, body)
    assert not verify("some other secret", headers, body)

    Org.objects.filter(pk=org.pk).update(webhook_secret_previous_until=timezone.now() - timedelta(seconds=1))
    headers, body = delivered(review, hook)
    assert verify(new, headers, body) and not verify(old, headers, body)
    assert "x-tollgate-signature-previous" not in headers


def test_rotating_during_an_overlap_ends_the_oldest_secret(org):
    first = org.webhook_secret
    second = webhook_secret_rotate(org=org, overlap=timedelta(hours=1)).secret
    webhook_secret_rotate(org=org, overlap=timedelta(hours=1))
    org.refresh_from_db()
    assert org.webhook_secret_previous == second != first
    assert AuditEvent.objects.filter(action="webhook_secret.rotate").last().detail["cut_short_an_overlap"] is True


@pytest.mark.parametrize("overlap", [timedelta(days=7, seconds=1), timedelta(seconds=-1)])
def test_an_overlap_out_of_bounds_is_refused_and_changes_nothing(org, overlap):
    secret = org.webhook_secret
    with pytest.raises(OverlapInvalid):
        webhook_secret_rotate(org=org, overlap=overlap)
    assert Org.objects.get(pk=org.pk).webhook_secret == secret
