"""A conversation version that asks checks of its own (issue 39): a verdict of its own beside grounded, a category
and a score; reviews answering them, and labels on them, as the figures, exports and evaluation records read them."""

from collections.abc import Mapping

from django.utils import timezone

from grading.checks.answers import item_outcome
from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.core.weeks import monday
from grading.models import CriteriaVersion, Decision, ItemKind, Label, Review, ReviewState, Route
from tests.builders.conversations import PATH_IDS
from tests.builders.queue_items import conversation_item

OWN_CHECKS = CheckSet(
    checks=[
        CheckDefinition(key="grounded", name="Grounded", question="Is every claim supported?"),
        CheckDefinition(key="cites_policy", name="Cites the policy", question="Does the reply cite the refund policy?"),
        CheckDefinition(
            key="intent",
            name="Intent",
            question="What did the user want?",
            kind=AnswerKind.CATEGORY,
            categories=["billing", "refund", "other"],
            required=False,
        ),
        CheckDefinition(
            key="helpful", name="Helpful", question="How helpful, 1 to 5?", kind=AnswerKind.SCORE, required=False
        ),
    ]
)


def asking(version: CriteriaVersion, check_set: CheckSet = OWN_CHECKS) -> CriteriaVersion:
    """`version` asking `check_set` (written past the published version's lock: what a version asks is set here,
    not edited)."""
    CriteriaVersion.objects.filter(pk=version.pk).update(checks=check_set.model_dump(mode="json"))
    version.refresh_from_db()
    return version


def answered(org, external_id: str, answers: Mapping[str, str]) -> Review:
    """A counting review (waiting for people) of a new conversation, whose judge gave these answers."""
    checks = {
        key: {"verdict": answer, "message_ids": PATH_IDS, "rationale": f"{key}: {answer}"}
        for key, answer in answers.items()
    }
    review = conversation_item(org, external_id, checks=checks)
    review.week = monday(review.conversation.started_at)  # filed as review_record files it
    review.save(update_fields=["week"])
    return review


def labelled(review: Review, labeller: str, **answers: str) -> None:
    """`labeller`'s labels on the review's item, about the evidence it read."""
    for check, answer in answers.items():
        Label.objects.create(
            org_id=review.org_id,
            kind=ItemKind.CONVERSATION,
            conversation_id=review.conversation_id,
            fingerprint=review.fingerprint,
            check_name=check,
            verdict=answer,
            labeller=labeller,
            source="test",
            labelled_at=timezone.now(),
        )


def trial_review(version: CriteriaVersion, item: Review, answers: Mapping[str, str]) -> Review:
    """A trial's review of `item`'s conversation under `version` (an unpublished version), on the same evidence."""
    checks = {key: {"verdict": answer, "message_ids": PATH_IDS, "rationale": ""} for key, answer in answers.items()}
    return Review.objects.create(
        org_id=item.org_id,
        kind=ItemKind.CONVERSATION,
        conversation_id=item.conversation_id,
        fingerprint=item.fingerprint,
        criteria_version=version,
        judge=item.judge,
        judge_key=item.judge_key,
        started_at=item.started_at,
        finished_at=item.finished_at,
        stages=1,
        route=Route.HUMAN,
        reason="unknown_check",
        checks=checks,
        usage={"prompt_tokens": 10, "completion_tokens": 2},
        state=ReviewState.TRIAL,
    )


def decided(review: Review, person, answers: Mapping[str, str], *, audit: bool = True) -> None:
    """A person's decision on the review's item, answering the version's checks (an audit item: the unbiased sample),
    its outcome what they come to under the version's checks, as `decision_record` stores it."""
    Decision.objects.create(
        org_id=review.org_id,
        review=review,
        outcome=item_outcome(review.criteria_version.check_set(), answers).value,
        checks=dict(answers),
        note="checked",
        decided_by=person,
        decided_at=timezone.now(),
    )
    Review.objects.filter(pk=review.pk).update(state=ReviewState.DECIDED, audit=audit)
