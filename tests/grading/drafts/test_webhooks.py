"""Webhooks: signed with the documented recipe, sent only where they may go, retried only when a retry can
succeed, every try logged.

The receivers listen on loopback, which webhooks may not reach: tests that mean to deliver name it in
OUTBOUND_ALLOWED_NETWORKS (the `allow_loopback` fixture), and the refusal tests prove with a listening receiver
that nothing arrived.
"""

import email.utils
import hashlib
import hmac
import json
import time

import pytest

from grading.api.keys import api_key_create
from grading.delivery.enqueue import MACHINE_VERDICT
from grading.drafts.gate import draft_grade
from grading.drafts.webhooks import webhook_deliver
from grading.erasure.runs import erasure_request, erasure_run
from grading.judge.backends import HeuristicDraftJudge
from grading.models import Draft, WebhookDelivery
from grading.tasks import deliver_webhook
from tests.builders.database import foreign_keys_checked_now
from tests.builders.drafts import CLEAN_BODY, SOURCE, save_draft, setup_org_memory
from tests.builders.processes import wait_until
from tests.fakes.webhook_receivers import DribblingReceiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def allow_loopback(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]


@pytest.fixture
def quick_retries(settings):
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0
    settings.WEBHOOK_MAX_ATTEMPTS = 3


def graded_review(org, callback_url: str):
    setup_org_memory(org)
    draft = save_draft(org, callback_url=callback_url)
    return draft_grade(draft_id=draft.pk, judge=HeuristicDraftJudge())


def review_calling_back_to(org, url: str):
    """A graded draft whose stored callback URL is `url` exactly as written: stored before submissions were
    checked, or spelt in a form submission would have normalised (pydantic rewrites `2130706433` to
    `127.0.0.1`). What is sent must be guarded at send time whatever the row holds."""
    review = graded_review(org, "https://hooks.example.com/placeholder")
    Draft.objects.filter(pk=review.draft_id).update(callback_url=url)
    review.draft.refresh_from_db()
    return review


def tries(review) -> list[tuple]:
    return list(
        WebhookDelivery.objects.filter(review=review)
        .order_by("attempt")
        .values_list("attempt", "status_code", "delivered")
    )


def the_error(review) -> str:
    return WebhookDelivery.objects.filter(review=review).order_by("-attempt").first().error


# --- delivering -----------------------------------------------------------------------------------------------


def test_the_signature_verifies_with_the_documented_recipe(org, receiver, allow_loopback):
    hook = receiver([200])
    review = graded_review(org, hook.url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is True
    [(headers, body)] = hook.received
    expected = hmac.new(
        org.webhook_secret.encode(), headers["x-tollgate-timestamp"].encode() + b"." + body, hashlib.sha256
    )
    assert headers["x-tollgate-signature"] == "sha256=" + expected.hexdigest()
    assert headers["host"] == f"127.0.0.1:{hook.port}"
    payload = json.loads(body)
    assert payload["event"] == "machine_verdict"
    assert payload["draft"]["route"] == review.route
    assert payload["draft"]["identity"]["fingerprint"] == review.fingerprint


def test_a_500_from_the_receiver_is_retried_and_every_try_is_logged(org, receiver, allow_loopback, quick_retries):
    hook = receiver([500, 500, 200])
    review = graded_review(org, hook.url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is True
    assert tries(review) == [(1, 500, False), (2, 500, False), (3, 200, True)]
    assert len(hook.received) == 3


def test_it_gives_up_after_the_last_attempt_and_logs_an_unreachable_receiver(org, settings, allow_loopback):
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0
    settings.WEBHOOK_MAX_ATTEMPTS = 2
    review = graded_review(org, "http://127.0.0.1:9/nothing-listens-here")
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False
    assert tries(review) == [(1, None, False), (2, None, False)]
    assert "Connection" in the_error(review)


# --- the retry policy -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 410, 422])
def test_a_permanent_4xx_is_not_retried_and_the_log_says_why(org, receiver, allow_loopback, quick_retries, status):
    hook = receiver([status, 200])
    review = graded_review(org, hook.url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False
    assert tries(review) == [(1, status, False)]
    assert len(hook.received) == 1
    assert "not retried" in the_error(review)


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
def test_a_5xx_or_a_not_now_4xx_is_retried(org, receiver, allow_loopback, quick_retries, status):
    hook = receiver([status, 200])
    review = graded_review(org, hook.url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is True
    assert tries(review) == [(1, status, False), (2, 200, True)]


def test_a_retry_after_is_honoured_within_the_cap(org, receiver, allow_loopback, settings):
    settings.WEBHOOK_RETRY_CAP_SECONDS = 600
    in_five_minutes = email.utils.formatdate(time.time() + 300, usegmt=True)
    hook = receiver(
        [(429, {"Retry-After": "120"}), (503, {"Retry-After": in_five_minutes}), (429, {"Retry-After": "7200"})]
    )
    review = graded_review(org, hook.url)
    assert webhook_deliver(review=review, event=MACHINE_VERDICT, attempt=1).retry_in == 120
    assert 290 <= webhook_deliver(review=review, event=MACHINE_VERDICT, attempt=2).retry_in <= 300
    assert webhook_deliver(review=review, event=MACHINE_VERDICT, attempt=3).retry_in == 600


def test_a_receiver_dribbling_its_headers_is_cut_at_the_total_deadline(org, allow_loopback, settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = 1
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    slow = DribblingReceiver(interval=0.2, lines=50)  # 10 s of headers, each line well inside any read timeout
    try:
        review = graded_review(org, slow.url)
        assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False
        assert tries(review) == [(1, None, False)]
        assert "deadline" in the_error(review)
        wait_until(lambda: slow.cut == 1, timeout=10, message="the receiver to see its connection cut")
        assert slow.finished == 0
    finally:
        slow.close()


# --- where webhooks may go ------------------------------------------------------------------------------------

LOOPBACK_FORMS = [
    ("decimal", "http://2130706433:{port}/hook", "loopback"),
    ("hex", "http://0x7f000001:{port}/hook", "loopback"),
    ("octal", "http://0177.0.0.1:{port}/hook", "loopback"),
    ("short", "http://127.1:{port}/hook", "loopback"),
    ("dotted hex", "http://0x7f.0x0.0x0.0x1:{port}/hook", "loopback"),
    ("unspecified", "http://0.0.0.0:{port}/hook", "unspecified"),
    ("mapped", "http://[::ffff:127.0.0.1]:{port}/hook", "loopback"),
    ("mapped hex", "http://[::ffff:7f00:1]:{port}/hook", "loopback"),
    ("name", "http://localhost:{port}/hook", "loopback"),
    ("ipv6", "http://[::1]:{port6}/hook", "loopback"),
]


@pytest.mark.parametrize(("form", "url", "reason"), LOOPBACK_FORMS, ids=[form for form, _, _ in LOOPBACK_FORMS])
def test_loopback_in_any_spelling_is_refused_and_nothing_is_sent(org, receiver, quick_retries, form, url, reason):
    v4, v6 = receiver([200]), receiver([200], host="::1")
    review = review_calling_back_to(org, url.format(port=v4.port, port6=v6.port))
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False
    assert v4.received == v6.received == []
    assert tries(review) == [(1, None, False)]  # refused for good: no retry
    assert reason in the_error(review)
    assert "not retried" in the_error(review)


INTERNAL_ADDRESSES = [
    ("http://10.0.0.1/hook", "private"),
    ("http://172.16.5.4/hook", "private"),
    ("http://192.168.1.1/hook", "private"),
    ("http://169.254.169.254/latest/meta-data", "link-local"),
    ("http://100.64.0.1/hook", "CGNAT"),
    ("http://224.0.0.1/hook", "multicast"),
    ("http://240.0.0.1/hook", "reserved"),
    ("http://192.0.2.10/hook", "documentation"),
    ("http://[fe80::1]/hook", "link-local"),
    ("http://[fd12:3456::1]/hook", "unique local"),
    ("http://[2001:db8::1]/hook", "documentation"),
    ("http://[ff02::1]/hook", "multicast"),
    ("http://[64:ff9b::a00:1]/hook", "10.0.0.1, private"),  # NAT64 of a private address
    ("http://[2002:c0a8:101::1]/hook", "192.168.1.1, private"),  # 6to4 of a private address
    ("http://[::ffff:169.254.169.254]/hook", "169.254.169.254, link-local"),
]


@pytest.mark.parametrize(("url", "reason"), INTERNAL_ADDRESSES)
def test_private_link_local_and_reserved_addresses_are_refused_without_a_try(org, quick_retries, url, reason):
    review = review_calling_back_to(org, url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False
    assert tries(review) == [(1, None, False)]
    assert reason in the_error(review)
    assert "nothing sent" in the_error(review)


def test_a_redirect_is_not_followed_even_where_it_could_go(org, receiver, allow_loopback, quick_retries):
    elsewhere = receiver([200], host="127.0.0.2")  # loopback outside the allowlist
    hook = receiver([(302, {"Location": elsewhere.url}), (307, {"Location": elsewhere.url})])
    review = graded_review(org, hook.url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False
    assert elsewhere.received == []
    assert tries(review) == [(1, 302, False)]  # the receiver must fix its URL: trying again changes nothing
    assert "redirect" in the_error(review)


def test_a_url_with_credentials_is_refused_and_nothing_is_sent(org, receiver, allow_loopback, quick_retries):
    hook = receiver([200])
    review = review_calling_back_to(org, hook.url.replace("http://", "http://pipeline:s3cret@"))
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False
    assert hook.received == []
    assert tries(review) == [(1, None, False)]
    assert "credentials" in the_error(review)


def test_the_allowlist_lets_the_test_receiver_through_and_nothing_else(org, receiver, settings, quick_retries):
    hook, other = receiver([200]), receiver([200], host="127.0.0.2")
    review = graded_review(org, "https://hooks.example.com/placeholder")
    Draft.objects.filter(pk=review.draft_id).update(callback_url=hook.url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False  # no allowlist: refused
    assert hook.received == []

    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is True
    assert len(hook.received) == 1

    Draft.objects.filter(pk=review.draft_id).update(callback_url=other.url)
    assert deliver_webhook.apply(args=(review.pk, MACHINE_VERDICT)).get() is False
    assert other.received == []


# --- submission -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("callback_url", "reason"),
    [
        ("https://pipeline:s3cret@hooks.example.com/tollgate", "credentials"),
        ("https://token@hooks.example.com/tollgate", "credentials"),
        ("ftp://hooks.example.com/tollgate", "scheme"),
        ("http://127.0.0.1:8000/api/v1/health", "loopback"),
        ("http://2130706433/", "loopback"),
        ("http://0x7f000001/", "loopback"),
        ("http://0177.0.0.1:6379/", "loopback"),
        ("http://127.1/", "loopback"),
        ("http://[::1]:6379/", "loopback"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://0.0.0.0:8000/", "unspecified"),
        ("http://10.1.2.3/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[fd00::1]/", "private"),
    ],
)
def test_a_submission_with_a_callback_url_that_can_never_be_delivered_is_refused(client, org, callback_url, reason):
    response = client.post(
        "/api/v1/drafts",
        json.dumps(submission(callback_url=callback_url)),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='writer').plaintext}",
    )
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["field"] == "callback_url"
    assert reason in error["message"]
    assert not Draft.objects.exists()


@pytest.mark.parametrize(
    "callback_url", ["https://hooks.example.com/tollgate", "http://localhost:9000/hook", "http://93.184.215.14/"]
)
def test_a_host_name_or_public_address_is_accepted_and_checked_when_sending(client, org, callback_url):
    response = client.post(
        "/api/v1/drafts",
        json.dumps(submission(callback_url=callback_url)),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='writer').plaintext}",
    )
    assert response.status_code == 202, response.json()


def test_an_allowlisted_address_is_accepted_on_submission(client, org, allow_loopback):
    response = client.post(
        "/api/v1/drafts",
        json.dumps(submission(callback_url="http://127.0.0.1:9000/hook")),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='writer').plaintext}",
    )
    assert response.status_code == 202, response.json()


def submission(**overrides) -> dict:
    return {
        "external_id": "run-7/article-1",
        "title": "Cutting support costs with self-service",
        "slug": "cutting-support-costs",
        "body": CLEAN_BODY,
        "source_urls": [SOURCE],
        **overrides,
    }


def test_a_draft_erased_while_its_webhook_was_on_the_way_leaves_no_log_and_no_error(org, receiver, allow_loopback):
    hook = receiver([200])
    review = graded_review(org, hook.url)
    erasure = erasure_request(org=org, scope="draft", target=review.draft.external_id)
    erasure_run(erasure_id=erasure.pk)  # the try below holds the review read before the erasure
    foreign_keys_checked_now()  # as the try's own transaction would on commit in a worker

    tried = webhook_deliver(review=review, event=MACHINE_VERDICT, attempt=1)

    assert (tried.delivery, tried.retry_in) == (None, None)
    assert not WebhookDelivery.objects.filter(review_id=review.pk).exists()
