"""Claims: claim next and claim this, the lease and its heartbeat, release, expiry, and many claimers at once."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone

from grading.models import AuditEvent
from reviewer.models import Claim, Membership, Role
from reviewer.queue.reads import SCAN_BATCH
from reviewer.queue.services import Refused, claim_extend, claim_next, claim_release, claim_take
from tests.builders.people import make_person
from tests.builders.queue_items import bulk_draft_items, conversation_item, draft_item, resubmit

HTMX_ACTIONS = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "actions"}


def test_claim_next_takes_the_oldest_free_item_and_records_it(operator, org):
    draft_item(org, "newer", minutes_ago=5)
    oldest = draft_item(org, "oldest", minutes_ago=90)
    claim = claim_next(user=operator)
    assert claim.review_id == oldest.pk and claim.holder == operator
    assert claim.expires_at - claim.claimed_at == timedelta(minutes=15)
    event = AuditEvent.objects.get(action="claim.create")
    assert event.actor == operator and event.detail["review"] == oldest.pk and event.detail["via"] == "next"


def test_claim_next_passes_over_held_items_and_finds_nothing_when_all_are_held(operator, org):
    first, second = draft_item(org, "first", minutes_ago=50), draft_item(org, "second", minutes_ago=40)
    colleague = make_person("sam-op", org, Role.OPERATOR)
    assert claim_next(user=colleague).review_id == first.pk
    assert claim_next(user=operator).review_id == second.pk
    assert claim_next(user=operator) is None


def test_claim_next_finds_the_free_item_behind_more_held_ones_than_it_reads_at_a_time(operator, org):
    """Claim next decides places for the rows in hand, a batch at a time: items held ahead of the free one, more than
    a batch of them, are passed over."""
    held = [draft_item(org, f"held-{n}", minutes_ago=100 - n) for n in range(SCAN_BATCH + 3)]
    free = draft_item(org, "free", minutes_ago=10)
    colleague = make_person("sam-op", org, Role.OPERATOR)
    for review in held:
        claim_take(user=colleague, review_id=review.pk)
    assert claim_next(user=operator).review_id == free.pk
    assert claim_next(user=operator) is None


def test_claim_next_never_hands_out_a_changed_or_decided_item(operator, org):
    changed = draft_item(org, "changed", minutes_ago=90)
    resubmit(changed)
    waiting = conversation_item(org, "cv-waiting")
    assert claim_next(user=operator).review_id == waiting.pk
    assert claim_next(user=operator) is None


def test_an_expired_lease_frees_the_item_by_itself_and_the_takeover_records_the_expiry(operator, org):
    review = draft_item(org)
    colleague = make_person("sam-op", org, Role.OPERATOR)
    long_ago = timezone.now() - timedelta(minutes=20)
    stale = claim_take(user=colleague, review_id=review.pk, now=long_ago)
    claim = claim_next(user=operator)  # no job ran: the lease simply ended at expires_at
    assert claim.review_id == review.pk
    stale.refresh_from_db()
    assert stale.end == Claim.End.EXPIRED and stale.ended_at == claim.claimed_at
    expiry = AuditEvent.objects.get(action="claim.expire")
    assert expiry.detail["holder"] == "sam-op" and expiry.detail["noticed_by"] == operator.username


def test_claim_this_on_an_item_someone_holds_is_refused_with_who_holds_it(client_for, operator, org):
    review = draft_item(org)
    claim_take(user=make_person("sam-op", org, Role.OPERATOR), review_id=review.pk)
    response = client_for(operator).post(reverse("review_claim", args=[review.pk]), **HTMX_ACTIONS)
    assert response.status_code == 409
    assert "sam-op holds this item" in response.content.decode()
    assert Claim.objects.count() == 1


def test_claim_this_on_a_changed_item_is_refused_and_says_why(client_for, operator, org):
    review = draft_item(org)
    resubmit(review)
    response = client_for(operator).post(reverse("review_claim", args=[review.pk]))
    assert response.status_code == 409
    assert "resubmitted the draft" in response.content.decode()
    assert not Claim.objects.exists()


def test_claim_this_without_javascript_redirects_to_the_item_and_with_htmx_answers_the_actions(
    client_for, operator, org
):
    first, second = draft_item(org, "first"), draft_item(org, "second")
    client = client_for(operator)
    response = client.post(reverse("review_claim", args=[first.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("review_detail", args=[first.pk])
    partial = client.post(reverse("review_claim", args=[second.pk]), **HTMX_ACTIONS)
    html = partial.content.decode()
    assert partial.status_code == 200 and html.lstrip().startswith('<div id="actions"')
    assert "Approve" in html and "lease: 15 min left" in html


def test_the_heartbeat_extends_a_live_lease(client_for, operator, org):
    review = draft_item(org)
    claim = claim_take(user=operator, review_id=review.pk, now=timezone.now() - timedelta(minutes=10))
    response = client_for(operator).post(
        reverse("review_heartbeat", args=[review.pk]), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="lease"
    )
    assert response.status_code == 200 and "15 min left" in response.content.decode()
    before = claim.expires_at
    claim.refresh_from_db()
    assert claim.expires_at > before + timedelta(minutes=9)


def test_the_heartbeat_never_revives_an_expired_lease(client_for, operator, org):
    review = draft_item(org)
    claim = claim_take(user=operator, review_id=review.pk, now=timezone.now() - timedelta(minutes=16))
    response = client_for(operator).post(reverse("review_heartbeat", args=[review.pk]), HTTP_HX_REQUEST="true")
    assert "Your lease expired" in response.content.decode()
    assert 'hx-trigger="every 60s"' not in response.content.decode()  # the heartbeat stops
    before = claim.expires_at
    claim.refresh_from_db()
    assert claim.expires_at == before
    with pytest.raises(Refused, match="expired"):
        claim_extend(user=operator, review_id=review.pk)


def test_release_gives_the_item_back_and_is_recorded(client_for, operator, org):
    review = draft_item(org)
    claim_take(user=operator, review_id=review.pk)
    response = client_for(operator).post(reverse("review_release", args=[review.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("queue")
    claim = Claim.objects.get()
    assert claim.end == Claim.End.RELEASED and claim.ended_at is not None
    assert AuditEvent.objects.filter(action="claim.release", actor=operator).count() == 1
    colleague = make_person("sam-op", org, Role.OPERATOR)
    assert claim_next(user=colleague).review_id == review.pk


def test_only_the_holder_can_release(operator, org):
    review = draft_item(org)
    claim_take(user=make_person("sam-op", org, Role.OPERATOR), review_id=review.pk)
    with pytest.raises(Refused, match="Taken by someone else"):
        claim_release(user=operator, review_id=review.pk)
    assert Claim.objects.get().ended_at is None


def test_claim_next_from_the_page_opens_the_item_or_says_nothing_is_left(client_for, operator, org):
    review = draft_item(org)
    client = client_for(operator)
    assert client.post(reverse("queue_claim_next"))["Location"] == reverse("review_detail", args=[review.pk])
    response = client.post(reverse("queue_claim_next"), follow=True)
    assert "Nothing left to claim" in response.content.decode()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_claimers_take_every_item_exactly_once(org):
    """20 threads, each with its own database connection, claim until nothing is left over 300 items.

    A watcher samples open claims the whole time: no item is ever held twice. Every item is claimed exactly
    once, nobody gets an error.
    """
    reviews = bulk_draft_items(org, 300)
    user_model = get_user_model()
    people = user_model.objects.bulk_create([user_model(username=f"claimer-{n}") for n in range(20)])
    Membership.objects.bulk_create([Membership(user=p, org=org, role=Role.OPERATOR) for p in people])
    start = threading.Barrier(len(people) + 1)
    taken: dict[int, list[int]] = {p.pk: [] for p in people}
    errors: list[BaseException] = []
    doubles: list[list] = []
    running = threading.Event()
    running.set()

    def claimer(person) -> None:
        try:
            start.wait()
            while (claim := claim_next(user=person)) is not None:
                taken[person.pk].append(claim.review_id)
                connections.close_all()  # a claim is one request: its connection goes back to the pool
        except BaseException as exc:  # noqa: BLE001 - any error fails the test below
            errors.append(exc)
        finally:
            connections.close_all()

    def watcher() -> None:
        try:
            start.wait()
            while running.is_set():
                held = Claim.objects.filter(ended_at__isnull=True).values("review_id").annotate(n=Count("pk"))
                doubles.extend(held.filter(n__gt=1))
                connections.close_all()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer, args=(p,)) for p in people]
    watch = threading.Thread(target=watcher)
    for thread in [*threads, watch]:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    running.clear()
    watch.join(timeout=30)

    assert errors == []
    assert doubles == []
    claimed = [review_id for ids in taken.values() for review_id in ids]
    assert len(claimed) == 300
    assert sorted(claimed) == sorted(r.pk for r in reviews)
    assert Claim.objects.count() == 300
    assert sum(1 for ids in taken.values() if ids) > 1  # the work was actually shared
    for person in people:
        assert set(Claim.objects.filter(holder=person).values_list("review_id", flat=True)) == set(taken[person.pk])


def test_the_heartbeat_tells_the_holder_when_the_item_changed(client_for, operator, org):
    review = draft_item(org)
    claim_take(user=operator, review_id=review.pk)
    resubmit(review)
    html = client_for(operator).post(reverse("review_heartbeat", args=[review.pk]), HTTP_HX_REQUEST="true").content
    assert "The item changed since this review" in html.decode()
    assert 'hx-trigger="every 60s"' not in html.decode()
