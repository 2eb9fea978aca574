"""Queue items: reviews routed to humans, one draft or conversation at a time or hundreds in bulk, the new content
that makes them stale, and several people answering one. Shared by the queue, claim, decision, dashboard, criteria
and browser tests."""

from datetime import timedelta

from django.utils import timezone

from grading.core.evidence import draft_fingerprint
from grading.core.schemas import DraftIn
from grading.drafts.submit import draft_save
from grading.models import CriteriaVersion, Draft, ItemKind, Review, ReviewState, Route, SlotsFor
from grading.reviews.services import PersonVerdict
from grading.reviews.versions import criteria_active
from reviewer.queue.services import DecisionResult, claim_take, decision_create
from tests.builders.conversations import PATH_IDS, message, support_conversation, upsert, verdicts

JUDGE = {"backend": "openai", "model": "judge-test", "prompt_hash": "5be0c2d1", "temperature": 0.0}
DRAFT_BODY = """## How do you cut support costs?

Support teams drown in tickets. Acme Logistics cut handling time by 41% in one quarter.

<ArticleCallout>Route repeat questions to docs.</ArticleCallout>

## Final thoughts

We delve into the details. Read [deflecting tickets](/writing/deflecting-tickets).
"""


def draft_item(
    org,
    slug: str = "how-to-cut-support-costs",
    *,
    reason: str = "band",
    score: float = 6.7,
    body: str = DRAFT_BODY,
    title: str = "How do you cut support costs?",
    callback_url: str = "",
    minutes_ago: int = 60,
    **review_fields,
) -> Review:
    """A draft whose current review is routed to humans (by default: in the marginal band)."""
    criteria = criteria_active(org=org, kind=ItemKind.DRAFT)
    fingerprint = draft_fingerprint(title=title, body=body, source_urls=[])
    draft = Draft.objects.create(
        org=org, external_id=slug, title=title, slug=slug, body=body, fingerprint=fingerprint, callback_url=callback_url
    )
    finished = timezone.now() - timedelta(minutes=minutes_ago)
    fields = {
        "score": score,
        "judge_score": score,
        "spread": 0.6,
        "judge_passed": False,
        "sub_scores": {"aeo": 4, "writing": 3, "org_fit": 4},
        "judge_issues": [
            {"issue": "The opening warms up for a paragraph", "fix": "Answer in the first two sentences."}
        ],
        "findings": [],
        "memory_used": {
            "snapshot": "mem1:c83d",
            "learnings": [{"id": 1, "kind": "learning", "text": "Lead with the answer.", "similarity": 0.61}],
            "strategy": {"id": 2, "kind": "strategy", "text": "Write for support leads."},
            "facts": [
                {"id": 3, "kind": "fact", "text": "Acme cut handling time by 41%.", "proof_terms": ["Acme Logistics"]}
            ],
        },
    } | review_fields
    return Review.objects.create(
        org=org,
        kind=ItemKind.DRAFT,
        draft=draft,
        fingerprint=fingerprint,
        criteria_version=criteria,
        judge=JUDGE,
        judge_key="judge-test",
        memory_snapshot="mem1:c83d",
        started_at=finished - timedelta(seconds=5),
        finished_at=finished,
        routed_at=finished,
        stages=1,
        route=Route.HUMAN,
        reason=reason,
        state=ReviewState.WAITING,
        **fields,
    )


def passed_draft_item(org, slug: str = "passed-draft", **review_fields) -> Review:
    """A draft the machine passed alone: its current review waits for nobody (what a person may send to review)."""
    review = draft_item(org, slug, reason="", score=8.4, judge_passed=True, **review_fields)
    Review.objects.filter(pk=review.pk).update(route=Route.PASS, state=ReviewState.CURRENT, routed_at=None)
    review.refresh_from_db()
    return review


def conversation_item(
    org,
    external_id: str = "cv-1",
    *,
    application: str = "billing",
    minutes_ago: int = 30,
    checks=None,
    extra=(),
    active_message_id: str = "m4",
) -> Review:
    """A closed support conversation with an abandoned reply, whose review has an unknown check. `extra`
    messages are added to the tree; they are on the active path only if `active_message_id` says so."""
    payload = support_conversation(external_id, application=application)
    payload["messages"] += list(extra)
    payload["active_message_id"] = active_message_id
    conversation = upsert(org, payload).conversation
    finished = timezone.now() - timedelta(minutes=minutes_ago)
    return Review.objects.create(
        org=org,
        kind=ItemKind.CONVERSATION,
        conversation=conversation,
        application=conversation.application,  # filed where review_record files it
        fingerprint=conversation.fingerprint,
        criteria_version=criteria_active(org=org, kind=ItemKind.CONVERSATION),
        judge=JUDGE,
        judge_key="judge-test",
        started_at=finished - timedelta(seconds=5),
        finished_at=finished,
        routed_at=finished,
        stages=1,
        route=Route.HUMAN,
        reason="unknown_check",
        checks=checks or verdicts(PATH_IDS, complete="unknown"),
        usage={"prompt_tokens": 3912, "completion_tokens": 286, "total_tokens": 4198},
        state=ReviewState.WAITING,
    )


def bulk_draft_items(org, count: int) -> list[Review]:
    """`count` queue items in two bulk inserts, for the tests that need hundreds."""
    criteria = criteria_active(org=org, kind=ItemKind.DRAFT)
    now = timezone.now()
    drafts = Draft.objects.bulk_create(
        [
            Draft(
                org=org,
                external_id=f"bulk-{n}",
                title=f"Draft {n}",
                slug=f"draft-{n}",
                body=f"body {n}",
                fingerprint=draft_fingerprint(title=f"Draft {n}", body=f"body {n}", source_urls=[]),
            )
            for n in range(count)
        ]
    )
    return Review.objects.bulk_create(
        [
            Review(
                org=org,
                kind=ItemKind.DRAFT,
                draft=draft,
                fingerprint=draft.fingerprint,
                criteria_version=criteria,
                judge=JUDGE,
                judge_key="judge-test",
                started_at=now - timedelta(minutes=n + 1),
                finished_at=now - timedelta(minutes=n),
                routed_at=now - timedelta(minutes=n),
                stages=1,
                route=Route.HUMAN,
                reason="band",
                score=6.8,
                sub_scores={"aeo": 4, "writing": 4, "org_fit": 3},
                state=ReviewState.WAITING,
            )
            for n, draft in enumerate(drafts)
        ]
    )


def resubmit(review: Review, body: str = "A different body.") -> None:
    """The pipeline sends new content for the draft: its fingerprint moves on, the review stops counting."""
    draft = review.draft
    payload = {"external_id": draft.external_id, "title": draft.title, "slug": draft.slug, "body": body}
    draft_save(org=review.org, payload=DraftIn.model_validate(payload | {"source_urls": draft.source_urls}))


def continue_conversation(review: Review) -> None:
    """The user came back: a new message on the active branch changes the conversation's fingerprint."""
    upsert(
        review.org,
        support_conversation(review.conversation.external_id, application=review.conversation.application)
        | {"active_message_id": "m5", "messages": [message("m5", "user", "And the other order?", "m4", 9)]},
    )


def slots_ask(org, kind: str, slots: int, slots_for: str = SlotsFor.PEOPLE) -> None:
    """The org's active criteria of `kind` (v1, seeded if need be) ask `slots` people to decide each item, as the
    version's editor sets it."""
    criteria_active(org=org, kind=kind)
    CriteriaVersion.objects.filter(org=org, kind=kind, is_active=True).update(slots=slots, slots_for=slots_for)


def item_answer(
    person, review: Review, *, outcome: str = "", checks: dict | None = None, note: str = ""
) -> DecisionResult:
    """`person` claims a place on the item and answers it (or adjudicates it, once every place is answered)."""
    claim_take(user=person, review_id=review.pk)
    return decision_create(
        user=person,
        review_id=review.pk,
        fingerprint=review.fingerprint,
        verdict=PersonVerdict(outcome=outcome, checks=checks, note=note),
    )
