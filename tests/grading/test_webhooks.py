"""Webhooks: signed with the documented recipe, retried on failure, every try logged."""

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from grading.gate import draft_grade
from grading.judge.backends import HeuristicDraftJudge
from grading.models import WebhookDelivery
from grading.tasks import deliver_webhook
from grading.webhooks import MACHINE_VERDICT
from tests.grading.drafts import save_draft, setup_org_memory

pytestmark = pytest.mark.django_db


class Receiver:
    """A pipeline's webhook endpoint on loopback: answers with the scripted statuses, records every request."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.received: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(receiver.statuses.pop(0) if receiver.statuses else 200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/tollgate"

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def receiver():
    receivers = []

    def make(statuses):
        receivers.append(Receiver(statuses))
        return receivers[-1]

    yield make
    for r in receivers:
        r.close()


def graded_review(org, callback_url: str):
    setup_org_memory(org)
    draft = save_draft(org, callback_url=callback_url)
    return draft_grade(draft_id=draft.pk, judge=HeuristicDraftJudge())


def test_the_signature_verifies_with_the_documented_recipe(org, receiver, settings):
    hook = receiver([200])
    review = graded_review(org, hook.url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is True
    [(headers, body)] = hook.received
    expected = hmac.new(
        org.webhook_secret.encode(), headers["x-tollgate-timestamp"].encode() + b"." + body, hashlib.sha256
    )
    assert headers["x-tollgate-signature"] == "sha256=" + expected.hexdigest()
    payload = json.loads(body)
    assert payload["event"] == "machine_verdict"
    assert payload["draft"]["route"] == review.route
    assert payload["draft"]["identity"]["fingerprint"] == review.fingerprint


def test_a_500_from_the_receiver_is_retried_and_every_try_is_logged(org, receiver, settings):
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0
    hook = receiver([500, 500, 200])
    review = graded_review(org, hook.url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is True
    tries = list(
        WebhookDelivery.objects.filter(review=review)
        .order_by("attempt")
        .values_list("attempt", "status_code", "delivered")
    )
    assert tries == [(1, 500, False), (2, 500, False), (3, 200, True)]
    assert len(hook.received) == 3


def test_it_gives_up_after_the_last_attempt_and_logs_an_unreachable_receiver(org, settings):
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0
    settings.WEBHOOK_MAX_ATTEMPTS = 2
    review = graded_review(org, "http://127.0.0.1:9/nothing-listens-here")
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False
    tries = list(WebhookDelivery.objects.filter(review=review).values_list("status_code", "delivered"))
    assert tries == [(None, False), (None, False)]
    assert WebhookDelivery.objects.filter(review=review).first().error
