"""Several people decide one item: places claimed atomically, answers blind and kept apart, declines, the agreed
verdict, adjudication by someone who gave no answer, and answers bound to the evidence they read."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.urls import reverse
from django.utils import timezone

from grading.checks.definitions import CONVERSATION_DEFAULTS
from grading.models import Answer, AuditEvent, Decision, ItemKind, Review, ReviewState, SlotsFor
from grading.reviews.services import PersonVerdict
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish
from reviewer.models import Claim, Membership, Role
from reviewer.queue.reads import slots_now
from reviewer.queue.services import Refused, claim_decline, claim_next, claim_take, decision_create
from tests.builders.api_calls import api_caller
from tests.builders.page_matrix import url_routes
from tests.builders.people import make_person
from tests.builders.queue_items import bulk_draft_items, continue_conversation, conversation_item, draft_item

CHECKS = CONVERSATION_DEFAULTS.keys  # what a version asks that names no checks of its own

ALL_PASS = dict.fromkeys(CHECKS, "pass")


def ask(org, kind: str, slots: int, slots_for: str = SlotsFor.PEOPLE) -> None:
    """The org's active criteria of `kind` ask `slots` people (a setting of the version, saved as the editor does)."""
    criteria_active(org=org, kind=kind).__class__.objects.filter(org=org, kind=kind, is_active=True).update(
        slots=slots, slots_for=slots_for
    )


def operators(org, *names: str) -> list:
    return [make_person(name, org, Role.OPERATOR) for name in names]


def answer(person, review: Review, *, outcome: str = "", checks: dict | None = None, note: str = "", now=None):
    claim_take(user=person, review_id=review.pk, now=now)
    verdict = PersonVerdict(outcome=outcome, checks=checks, note=note)
    return decision_create(user=person, review_id=review.pk, fingerprint=review.fingerprint, now=now, verdict=verdict)


def test_answers_that_agree_decide_the_item_by_no_one_person(org):
    ask(org, ItemKind.DRAFT, 2)
    review = draft_item(org)
    ann, bob = operators(org, "ann", "bob")
    first = answer(ann, review, outcome="approve")
    assert first.decision is None and first.answer.person == ann
    assert Review.objects.get(pk=review.pk).state == ReviewState.WAITING  # no human verdict yet
    second = answer(bob, review, outcome="approve", note="Reads well.")
    decision = second.decision
    assert (decision.basis, decision.outcome, decision.decided_by, decision.note) == (
        "agreed",
        "approve",
        None,
        "Reads well.",
    )
    assert Review.objects.get(pk=review.pk).state == ReviewState.DECIDED
    assert list(AuditEvent.objects.filter(action="answer.create").values_list("actor__username", flat=True)) == [
        "ann",
        "bob",
    ]
    assert AuditEvent.objects.get(action="decision.create").detail["basis"] == "agreed"


def test_answers_that_differ_wait_for_an_adjudicator_who_gave_none(org):
    ask(org, ItemKind.CONVERSATION, 2)
    review = conversation_item(org, "cv-split")
    ann, bob, cy = operators(org, "ann", "bob", "cy")
    answer(ann, review, checks=ALL_PASS, note="All supported.")
    result = answer(bob, review, checks=ALL_PASS | {"grounded": "fail"}, note="The refund amount is invented.")
    assert result.decision is None and not Decision.objects.exists()
    for person in (ann, bob):
        with pytest.raises(Refused, match="someone who gave no answer adjudicates"):
            claim_take(user=person, review_id=review.pk)
        assert claim_next(user=person) is None
    assert claim_next(user=cy).review_id == review.pk
    verdict = PersonVerdict(checks=ALL_PASS | {"grounded": "fail"}, note="The tool never returned that amount.")
    adjudicated = decision_create(
        user=cy, review_id=review.pk, fingerprint=review.fingerprint, verdict=verdict
    ).decision
    assert (adjudicated.basis, adjudicated.decided_by, adjudicated.outcome) == ("adjudicated", cy, "fail")
    assert Answer.objects.filter(review=review).count() == 2  # the answers stand beside the verdict


def test_an_adjudication_says_why_even_where_one_persons_decision_need_not(org):
    ask(org, ItemKind.DRAFT, 2, SlotsFor.AUDIT)
    review = draft_item(org, audit=True)
    ann, bob, cy = operators(org, "ann", "bob", "cy")
    answer(ann, review, outcome="approve")
    answer(bob, review, outcome="reject", note="Off brand.")
    with pytest.raises(Refused, match="Say why, in the note"):
        answer(cy, review, outcome="approve")
    assert answer(cy, review, outcome="approve", note="On brand: see the style guide.").decision.basis == "adjudicated"


def test_nobody_takes_two_places_and_a_full_item_takes_nobody_else(org):
    ask(org, ItemKind.DRAFT, 2)
    review = draft_item(org)
    ann, bob, cy = operators(org, "ann", "bob", "cy")
    assert claim_next(user=ann).review_id == review.pk
    assert claim_next(user=ann) is None  # her place is taken; the other is not hers to take
    assert claim_next(user=bob).review_id == review.pk
    with pytest.raises(Refused, match="All 2 places are taken"):
        claim_take(user=cy, review_id=review.pk)
    assert claim_next(user=cy) is None


def test_a_lease_that_runs_out_frees_its_place(org):
    ask(org, ItemKind.DRAFT, 2)
    review = draft_item(org)
    ann, bob, cy = operators(org, "ann", "bob", "cy")
    long_ago = timezone.now() - timedelta(hours=2)
    for person in (ann, bob):
        claim_take(user=person, review_id=review.pk, now=long_ago)
    assert claim_next(user=cy).review_id == review.pk
    expired = Claim.objects.filter(end=Claim.End.EXPIRED).order_by("pk")  # in the order they were taken
    assert list(expired.values_list("holder__username", flat=True)) == [
        "ann",
        "bob",
    ]


def test_a_decline_gives_the_place_back_at_once_and_is_never_an_answer(org):
    review = draft_item(org)  # one person decides: declining works the same
    ann, bob = operators(org, "ann", "bob")
    claim_take(user=ann, review_id=review.pk)
    with pytest.raises(Refused, match="Say why"):
        claim_decline(user=ann, review_id=review.pk, reason="  ")
    claim_decline(user=ann, review_id=review.pk, reason="I wrote this article.")
    claim = Claim.objects.get(holder=ann)
    assert (claim.end, claim.reason) == (Claim.End.DECLINED, "I wrote this article.")
    assert AuditEvent.objects.get(action="claim.decline").detail == {
        "review": review.pk,
        "reason": "I wrote this article.",
    }
    assert not Answer.objects.exists() and not Decision.objects.exists()
    assert claim_next(user=ann) is None  # passed over for her from now on
    assert claim_next(user=bob).review_id == review.pk


def test_answering_again_replaces_only_your_own_answer_and_the_trail_keeps_the_old(org):
    ask(org, ItemKind.DRAFT, 3)
    review = draft_item(org)
    ann, bob = operators(org, "ann", "bob")
    answer(ann, review, outcome="approve")
    answer(bob, review, outcome="approve")
    answer(ann, review, outcome="send_back", note="The second section is off topic.")
    answers = {a.person.username: a.outcome for a in Answer.objects.select_related("person")}
    assert answers == {"ann": "send_back", "bob": "approve"}
    replaced = AuditEvent.objects.get(action="answer.replace")
    assert (replaced.actor, replaced.detail["replaced"]["outcome"], replaced.detail["outcome"]) == (
        ann,
        "approve",
        "send_back",
    )


def test_answers_stay_bound_to_the_evidence_they_read_when_it_moves_on(client_for, org):
    ask(org, ItemKind.CONVERSATION, 2)
    review = conversation_item(org, "cv-moves")
    ann, bob = operators(org, "ann", "bob")
    answer(ann, review, checks=ALL_PASS, note="Fine so far.")
    claim_take(user=bob, review_id=review.pk)
    continue_conversation(review)
    with pytest.raises(Refused, match="changed since you opened it"):
        verdict = PersonVerdict(checks=ALL_PASS, note="Fine.")
        decision_create(user=bob, review_id=review.pk, fingerprint=review.fingerprint, verdict=verdict)
    kept = Answer.objects.get()
    assert (kept.review_id, kept.fingerprint) == (review.pk, review.fingerprint)
    assert Review.objects.with_state().get(pk=review.pk).state_now == ReviewState.STALE
    assert not Decision.objects.exists()


def test_new_criteria_leave_the_answers_with_the_review_they_were_given_on(org):
    ask(org, ItemKind.DRAFT, 2)
    review = draft_item(org)
    ann, bob = operators(org, "ann", "bob")
    answer(ann, review, outcome="approve")
    claim_take(user=bob, review_id=review.pk)
    criteria_publish(version=criteria_new_version(org=org, kind=ItemKind.DRAFT))  # cloned: it asks two people too
    with pytest.raises(Refused, match="changed since you opened it"):
        approve = PersonVerdict(outcome="approve")
        decision_create(user=bob, review_id=review.pk, fingerprint=review.fingerprint, verdict=approve)
    assert Answer.objects.get().review_id == review.pk and not Decision.objects.exists()


def test_answers_about_earlier_evidence_are_marked_and_stay_blind_to_others(client_for, org):
    ask(org, ItemKind.CONVERSATION, 2)
    old = conversation_item(org, "cv-grows")
    ann, bob = operators(org, "ann", "bob")
    answer(ann, old, checks=ALL_PASS, note="ANN-ON-THE-FIRST-PATH")
    continue_conversation(old)
    conversation = old.conversation.__class__.objects.get(pk=old.conversation_id)
    # The conversation graded again: its new review (of the grown path) waits for two people.
    fields = {f.attname: getattr(old, f.attname) for f in Review._meta.concrete_fields if f.attname != "id"}
    Review.objects.filter(pk=old.pk).update(state=ReviewState.SUPERSEDED)
    new = Review.objects.create(**fields | {"fingerprint": conversation.fingerprint, "judge_key": "judge-again",
                                            "state": ReviewState.WAITING})  # fmt: skip
    mine = client_for(ann).get(reverse("review_detail", args=[new.pk])).content.decode()
    assert "ANN-ON-THE-FIRST-PATH" in mine and "earlier evidence" in mine and "0 of 2 answered" in mine
    theirs = client_for(bob).get(reverse("review_detail", args=[new.pk])).content.decode()
    assert "ANN-ON-THE-FIRST-PATH" not in theirs  # another person's answer, earlier evidence or not, stays hidden


@pytest.mark.django_db(transaction=True)
def test_twenty_operators_claiming_at_once_never_overfill_an_item_nor_answer_twice(org):
    """20 threads, each with its own connection, claim and answer until nothing is left: 24 items, 3 places each."""
    ask(org, ItemKind.DRAFT, 3)
    reviews = bulk_draft_items(org, 24)
    user_model = get_user_model()
    people = user_model.objects.bulk_create([user_model(username=f"answerer-{n}") for n in range(20)])
    Membership.objects.bulk_create([Membership(user=p, org=org, role=Role.OPERATOR) for p in people])
    start = threading.Barrier(len(people))
    errors: list[BaseException] = []

    def answerer(person) -> None:
        try:
            start.wait()
            while True:
                claim = claim_next(user=person)
                if claim is None:
                    # Claim next skips rows another claim or answer holds locked for a moment: "nothing now" while
                    # a place is still open for this person is asked again, as an operator would press n again.
                    if not any(_place_for(person, review) for review in reviews):
                        break
                    continue
                review = Review.objects.get(pk=claim.review_id)
                approve = PersonVerdict(outcome="approve")
                decision_create(user=person, review_id=review.pk, fingerprint=review.fingerprint, verdict=approve)
                connections.close_all()  # a claim and an answer are requests: the connection goes back to the pool
        except BaseException as exc:  # noqa: BLE001 - any error fails the test below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=answerer, args=(p,)) for p in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    for review in reviews:
        answered_by = list(Answer.objects.filter(review=review).values_list("person_id", flat=True))
        assert len(answered_by) == 3 and len(set(answered_by)) == 3, review.pk
    assert Decision.objects.filter(basis="agreed").count() == 24
    assert len({a.person_id for a in Answer.objects.all()}) > 3  # the work was actually shared


def _place_for(person, review: Review) -> bool:
    """Whether the item still has a place this person has not taken (read as the claim reads it, under no lock)."""
    review = Review.objects.select_related("criteria_version").get(pk=review.pk)
    slots = slots_now(review, timezone.now())
    waiting = Review.objects.waiting().filter(pk=review.pk).exists()
    return waiting and person.pk not in slots.answered_by and slots.place_for(person.pk) is None


def test_no_url_shows_another_persons_answer_while_places_are_open(client, org, stakeholder):
    """Every GET URL of the app (pages, their htmx partials, the JSON API, the export), as a reviewer of the
    item who also holds every other role: the first answer's note is nowhere until the last place is answered."""
    ask(org, ItemKind.DRAFT, 2)
    review = draft_item(org)
    ann, bob = operators(org, "ann", "bob")
    for role in (Role.STAKEHOLDER, Role.CRITERIA_ADMIN):
        Membership.objects.create(user=bob, org=org, role=role)
    secret = "ANN-SAYS-SEND-IT-BACK"
    answer(ann, review, outcome="send_back", note=secret)
    claim_take(user=bob, review_id=review.pk)
    client.force_login(bob)
    api = api_caller(client, org)
    ids = {"pk": review.pk, "draft_id": review.draft_id, "external_id": "none", "section": "agreement",
           "kind": ItemKind.DRAFT}  # fmt: skip
    seen = []
    for route in url_routes():
        if not route.name or route.name.startswith("admin") or not set(route.parameters) <= set(ids):
            continue
        path = reverse(route.name, kwargs={name: ids[name] for name in route.parameters})
        if route.name.startswith("api:"):
            responses = [api("get", path.removeprefix("/api/v1"))]
        else:
            partials = (client.get(path, HTTP_HX_REQUEST="true", HTTP_HX_TARGET=t) for t in ("actions", "queue-list"))
            responses = [client.get(path), *partials]
        for response in responses:
            body = b"".join(response.streaming_content) if response.streaming else response.content
            seen.append(path)
            assert secret.encode() not in body, f"{path} shows another person's answer"
    assert reverse("review_detail", args=[review.pk]) in seen and reverse("dashboard_export") in seen
    decision_create(
        user=bob, review_id=review.pk, fingerprint=review.fingerprint, verdict=PersonVerdict(outcome="approve")
    )
    page = client.get(reverse("review_detail", args=[review.pk])).content.decode()
    assert secret in page and "awaiting adjudication" in page  # every place answered: the answers side by side
