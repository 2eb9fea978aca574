"""Conversations with people's verdicts, and a judge scripted per item, for trials scored against people."""

import json
from collections.abc import Callable, Mapping

from django.utils import timezone

from grading.conversations.grader import conversation_grade
from grading.criteria.trials import criteria_trial_start, trial_count, trial_item_grade
from grading.dashboard.labels import LabelIn, label_record
from grading.models import Conversation, CriteriaTrial, CriteriaVersion, Org, Review
from grading.reviews.services import PersonVerdict, decision_record, review_audit_mark
from tests.builders.conversations import PATH_IDS, llm_judge, support_conversation, upsert, verdicts_reply
from tests.fakes.openai_server import FakeLLM, Reply

ORDER = 7000  # conversation n asks about order ORDER + n: the judge's reply is picked by it


def refund_conversation(org: Org, n: int) -> Conversation:
    payload = support_conversation(f"cv-{n}")
    payload["messages"][0]["content"] = f"Please refund order {ORDER + n}, it arrived broken."
    return upsert(org, payload).conversation


def judge_per_item(verdicts: Mapping[int, Mapping[str, str]]) -> Callable[[dict], Reply]:
    """A reply for each conversation n in `verdicts` ({check: verdict}), found by its order number in the prompt."""

    def reply(body: dict) -> Reply:
        prompt = json.dumps(body)
        for n, given in verdicts.items():
            if f"order {ORDER + n}," in prompt:
                return verdicts_reply(PATH_IDS, **given)
        raise AssertionError("a judge call for a conversation the script does not know")

    return reply


def graded_conversations(
    org: Org, fake_llm: FakeLLM, verdicts: Mapping[int, Mapping[str, str]]
) -> dict[int, Conversation]:
    """Conversation n graded under the active version with `verdicts[n]`, and sent to people as an audit item."""
    conversations = {n: refund_conversation(org, n) for n in verdicts}
    fake_llm.set_default(judge_per_item(verdicts))
    for conversation in conversations.values():
        conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    review_audit_mark(review_ids=list(Review.objects.counting().filter(org=org).values_list("pk", flat=True)))
    fake_llm.reset()
    return conversations


def decide(conversation: Conversation, person, checks: Mapping[str, str], note: str = "") -> None:
    review = Review.objects.counting().get(conversation=conversation)
    decision_record(
        review_id=review.pk,
        decided_by=person,
        decided_at=timezone.now(),
        verdict=PersonVerdict(checks=dict(checks), note=note or "checked"),
    )


def label(org: Org, conversation: Conversation, labeller: str, **checks: str) -> None:
    for check, verdict in checks.items():
        label_record(
            org=org,
            label=LabelIn(item=conversation.external_id, check=check, verdict=verdict, labeller=labeller),
            source="api",
        )


def scored_trial(
    version: CriteriaVersion, fake_llm: FakeLLM, source: str, actor, verdicts: Mapping[int, Mapping[str, str]]
) -> CriteriaTrial:
    """A finished trial of `version` from `source`, conversation n judged `verdicts[n]` by the trial's judge."""
    judge = llm_judge(fake_llm)
    count = trial_count(version=version, size=200, judge=judge, source=source)
    trial = criteria_trial_start(
        version=version, size=200, counted_calls=count.judge_calls, judge=judge, source=source, actor=actor
    )
    fake_llm.set_default(judge_per_item(verdicts))
    for index in range(len(trial.sample)):
        trial_item_grade(trial_id=trial.pk, index=index, conversation_judge=judge)
    trial.refresh_from_db()
    return trial
