"""Worked examples from people's verdicts (issue 23, Build 1): added to an unpublished version from an item's human
verdict on its present evidence, read by the judge in the stable prefix inside the data delimiters, in a fixed order,
and fingerprinted with the criteria that every review records."""

import re

import pytest
from django.utils import timezone

from grading.checks.definitions import CheckDefinition, CheckSet
from grading.conversations.grader import conversation_grade
from grading.criteria.trials import criteria_trial_start, trial_count, trial_item_grade
from grading.dashboard.labels import LabelIn, label_record
from grading.drafts.gate import draft_grade
from grading.models import AuditEvent, CriteriaExample, CriteriaVersion, ItemKind, Review
from grading.reviews.examples import (
    EXAMPLES_MAX,
    ExampleRefused,
    criteria_example_add,
    criteria_example_explain,
    criteria_example_remove,
    version_examples,
    version_fingerprint,
)
from grading.reviews.services import PersonVerdict, decision_record
from grading.reviews.versions import CriteriaConflict, CriteriaImmutable, criteria_new_version, criteria_publish
from tests.builders.conversations import PATH_IDS, llm_judge, message, support_conversation, upsert, verdicts_reply
from tests.builders.custom_checks import SUPPORT_CHECKS, custom_checks_item
from tests.builders.drafts import draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.prompts import marker_lines, split_blocks
from tests.builders.queue_items import conversation_item, draft_item
from tests.fakes.openai_server import tokenize

pytestmark = pytest.mark.django_db


def decided_conversation(org, person, external_id: str, *, note: str = "checked", **checks: str):
    """A conversation in the queue, decided: `checks` over every check passing."""
    review = conversation_item(org, external_id)
    given = {"grounded": "pass", "complete": "pass", "usable": "pass"} | checks
    decision_record(
        review_id=review.pk,
        decided_by=person,
        decided_at=timezone.now(),
        verdict=PersonVerdict(checks=given, note=note),
    )
    return review.conversation


def conversation_version(org):
    return criteria_new_version(org=org, kind=ItemKind.CONVERSATION)


def user_text(request) -> str:
    return request.body["messages"][-1]["content"]


def test_an_example_quotes_the_decided_evidence_with_both_verdicts_and_the_persons_note(org, operator, criteria_admin):
    conversation = decided_conversation(
        org, operator, "cv-a", note="The refund amount was never confirmed.", grounded="fail"
    )
    version = conversation_version(org)
    example = criteria_example_add(version=version, subject=conversation, check="grounded", actor=criteria_admin)
    assert (example.human_verdict, example.machine_verdict, example.source) == ("fail", "pass", "decision")
    assert example.note == "The refund amount was never confirmed."
    assert example.fingerprint == conversation.fingerprint
    assert [m["id"] for m in example.evidence["messages"]] == PATH_IDS  # the active path, not the abandoned m4b
    assert example.evidence["messages"][1]["tool_calls"][0].startswith('tool call id="call_1" function="refund"')
    version.refresh_from_db()
    assert version.revision == 2 and version.updated_by == criteria_admin
    event = AuditEvent.objects.get(action="criteria.example.add")
    assert (event.actor, event.detail["item"], event.detail["check"]) == (criteria_admin, "cv-a", "grounded")


def test_the_evidence_stays_as_the_person_decided_it_when_the_item_changes_later(org, operator):
    conversation = decided_conversation(org, operator, "cv-a", grounded="fail")
    version = conversation_version(org)
    criteria_example_add(version=version, subject=conversation, check="grounded")
    payload = support_conversation("cv-a")
    payload["messages"].append(message("m5", "user", "And the shipping fee?", "m4", 5))
    payload["active_message_id"] = "m5"
    upsert(org, payload)
    [example] = version_examples(version)
    assert [m.id for m in example.messages] == PATH_IDS


def test_a_draft_example_quotes_its_title_and_body_and_reads_pass_or_fail(org, operator):
    review = draft_item(org)
    decision_record(
        review_id=review.pk,
        decided_by=operator,
        decided_at=timezone.now(),
        verdict=PersonVerdict(outcome="reject", note="Too salesy."),
    )
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    example = criteria_example_add(version=version, subject=review.draft, check="pass_fail")
    assert (example.human_verdict, example.machine_verdict) == ("fail", "fail")  # the judge leaned to fail
    assert example.evidence == {"title": review.draft.title, "body": review.draft.body}
    with pytest.raises(ExampleRefused, match="not a check of drafts"):
        criteria_example_add(version=version, subject=review.draft, check="grounded")


def test_a_label_is_a_human_verdict_too(org):
    conversation = upsert(org, support_conversation("cv-l")).conversation
    label_record(org=org, label=LabelIn(item="cv-l", check="usable", verdict="fail", labeller="ann"), source="api")
    example = criteria_example_add(version=conversation_version(org), subject=conversation, check="usable")
    assert (example.source, example.human_verdict, example.machine_verdict, example.note) == ("label", "fail", "", "")


def test_it_refuses_an_item_without_a_verdict_on_the_check_for_its_present_evidence_and_writes_nothing(org, operator):
    graded_only = upsert(org, support_conversation("cv-none")).conversation
    moved_on = decided_conversation(org, operator, "cv-moved", grounded="fail")
    payload = support_conversation("cv-moved")
    payload["messages"].append(message("m5", "user", "And the shipping fee?", "m4", 5))
    payload["active_message_id"] = "m5"
    upsert(org, payload)  # the decision is about evidence the item no longer holds
    labelled = upsert(org, support_conversation("cv-l")).conversation
    label_record(org=org, label=LabelIn(item="cv-l", check="usable", verdict="fail", labeller="ann"), source="api")
    version = conversation_version(org)
    for subject in (graded_only, moved_on, labelled):
        subject.refresh_from_db()
        with pytest.raises(ExampleRefused, match="no human verdict on grounded for its present evidence"):
            criteria_example_add(version=version, subject=subject, check="grounded")
    version.refresh_from_db()
    assert version.revision == 1 and not CriteriaExample.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="criteria.example").exists()


def test_it_refuses_a_published_version_another_orgs_item_and_the_same_item_twice(org, other_org, operator):
    conversation = decided_conversation(org, operator, "cv-a", grounded="fail")
    foreign = decided_conversation(other_org, operator, "cv-x", grounded="fail")
    version = conversation_version(org)
    with pytest.raises(ExampleRefused, match="not a conversation of this version's org"):
        criteria_example_add(version=version, subject=foreign, check="grounded")
    example = criteria_example_add(version=version, subject=conversation, check="grounded")
    with pytest.raises(ExampleRefused, match="already an example of grounded"):
        criteria_example_add(version=version, subject=conversation, check="grounded")
    criteria_example_add(version=version, subject=conversation, check="usable")  # another check is another example
    with pytest.raises(CriteriaConflict):
        criteria_example_explain(example=example, explanation="stale form", revision=1)
    criteria_publish(version=version)
    with pytest.raises(CriteriaImmutable):
        criteria_example_add(version=version, subject=conversation, check="complete")
    with pytest.raises(CriteriaImmutable):
        criteria_example_explain(example=example, explanation="A later thought.")
    with pytest.raises(CriteriaImmutable):
        criteria_example_remove(example=example)
    assert CriteriaExample.objects.filter(criteria_version=version).count() == 2


def test_it_refuses_an_example_too_large_to_quote_whole_and_one_too_many(org, operator):
    version = conversation_version(org)
    huge = decided_conversation(org, operator, "cv-huge", note="word " * 4_000, grounded="fail")
    with pytest.raises(ExampleRefused, match="Nothing is cut to fit"):
        criteria_example_add(version=version, subject=huge, check="grounded")
    for n in range(EXAMPLES_MAX):
        criteria_example_add(
            version=version, subject=decided_conversation(org, operator, f"cv-{n}", grounded="fail"), check="grounded"
        )
    one_more = decided_conversation(org, operator, "cv-more", grounded="fail")
    with pytest.raises(ExampleRefused, match=f"the most a version may have \\({EXAMPLES_MAX}\\)"):
        criteria_example_add(version=version, subject=one_more, check="grounded")
    assert version.examples.count() == EXAMPLES_MAX


def test_the_fingerprint_changes_when_an_example_is_added_explained_or_removed_and_back(org, operator):
    conversation = decided_conversation(org, operator, "cv-a", grounded="fail")
    version = conversation_version(org)
    bare = version_fingerprint(version)
    assert bare.startswith("cf1:")
    example = criteria_example_add(version=version, subject=conversation, check="grounded")
    added = version_fingerprint(version)
    criteria_example_explain(example=example, explanation="A figure no tool returned is ungrounded.")
    explained = version_fingerprint(version)
    criteria_example_remove(example=example)
    assert len({bare, added, explained}) == 3
    assert version_fingerprint(version) == bare  # what the judge reads is what it read before
    assert AuditEvent.objects.filter(action__startswith="criteria.example").count() == 3


def test_a_new_version_starts_with_its_sources_examples(org, operator):
    version = conversation_version(org)
    for name in ("cv-b", "cv-a"):
        criteria_example_add(
            version=version, subject=decided_conversation(org, operator, name, grounded="fail"), check="grounded"
        )
    clone = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, source=version)
    assert version_examples(clone) == version_examples(version)
    assert [e.external_id for e in version_examples(clone)] == ["cv-b", "cv-a"]  # the order they were added in
    assert version_fingerprint(clone) == version_fingerprint(version)


def test_the_judge_reads_examples_in_order_inside_the_delimiters_and_reviews_record_the_fingerprint(
    org, operator, fake_llm
):
    version = conversation_version(org)
    first = criteria_example_add(
        version=version, subject=decided_conversation(org, operator, "cv-b", note="note B", grounded="fail"),
        check="grounded",
    )  # fmt: skip
    criteria_example_add(
        version=version, subject=decided_conversation(org, operator, "cv-a", note="note A", usable="fail"),
        check="usable",
    )  # fmt: skip
    criteria_example_explain(example=first, explanation="explained B")
    criteria_publish(version=version)
    graded = upsert(org, support_conversation("cv-graded")).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    review = conversation_grade(conversation_id=graded.pk, judge=llm_judge(fake_llm))
    [request] = fake_llm.chat_requests()
    text = user_text(request)
    nonce = re.search(r"<<<END EVIDENCE ([0-9a-f]{24})>>>", text).group(1)
    assert marker_lines(text) == [
        "<<<EXAMPLES>>>", f"<<<END EXAMPLES {nonce}>>>", f"<<<EVIDENCE {nonce}>>>", f"<<<END EVIDENCE {nonce}>>>"
    ]  # fmt: skip
    assert text.index(version.rubric) < text.index("<<<EXAMPLES>>>") < text.index("STAGE 1 of 1")
    blocks, outside = split_blocks(text)
    examples = blocks["EXAMPLES"]
    assert examples.index('EXAMPLE 1: check "grounded"') < examples.index("note B") < examples.index("explained B")
    assert examples.index("explained B") < examples.index('EXAMPLE 2: check "usable"') < examples.index("note A")
    assert "note A" not in outside and "note A" not in blocks["EVIDENCE"]
    assert review.criteria_version == version
    assert review.criteria_fingerprint == version_fingerprint(version)
    review.refresh_from_db()
    assert review.criteria_fingerprint == version_fingerprint(version)


def test_a_draft_prompt_reads_the_examples_after_the_rules_and_before_the_memory(org, operator, fake_llm):
    setup_org_memory(org)
    decided = draft_item(org, body="## Why?\n\nA body a person rejected.\n")
    decision_record(
        review_id=decided.pk,
        decided_by=operator,
        decided_at=timezone.now(),
        verdict=PersonVerdict(outcome="reject", note="No answer."),
    )
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    criteria_example_add(version=version, subject=decided.draft, check="pass_fail")
    criteria_publish(version=version)
    draft = save_draft(org, external_id="fresh")
    fake_llm.set_default(draft_reply(8))
    review = draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    text = user_text(fake_llm.chat_requests()[0])
    assert text.index("RULES THE WRITER WAS GIVEN") < text.index("<<<EXAMPLES>>>") < text.index("<<<MEMORY>>>")
    blocks, _ = split_blocks(text)
    assert "A body a person rejected." in blocks["EXAMPLES"] and "No answer." in blocks["EXAMPLES"]
    assert review.criteria_fingerprint == version_fingerprint(version)


def test_a_trial_reads_its_versions_examples_and_its_reviews_record_the_fingerprint(org, operator, fake_llm):
    graded = upsert(org, support_conversation("cv-graded")).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    conversation_grade(conversation_id=graded.pk, judge=llm_judge(fake_llm))
    version = conversation_version(org)
    criteria_example_add(
        version=version, subject=decided_conversation(org, operator, "cv-a", note="note A", grounded="fail"),
        check="grounded",
    )  # fmt: skip
    fake_llm.reset()
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    judge = llm_judge(fake_llm)
    count = trial_count(version=version, size=5, judge=judge)
    trial = criteria_trial_start(version=version, size=5, counted_calls=count.judge_calls, judge=judge)
    reviews = [trial_item_grade(trial_id=trial.pk, index=i, conversation_judge=judge) for i in range(len(trial.sample))]
    assert reviews and all(r.criteria_fingerprint == version_fingerprint(version) for r in reviews if r)
    judged = [r for r in reviews if r and r.stages]
    assert judged and all("note A" in split_blocks(user_text(q))[0]["EXAMPLES"] for q in fake_llm.chat_requests())


def test_a_trial_item_s_fingerprint_names_the_examples_its_prompt_held_when_they_change_meanwhile(
    org, operator, fake_llm, monkeypatch
):
    """An admin edits the examples while the trial runs: the version's examples are read once per item, so its
    review's fingerprint names exactly those its judge call read, whatever lands in between."""
    import grading.reviews.examples as examples_module

    graded = upsert(org, support_conversation("cv-graded")).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    conversation_grade(conversation_id=graded.pk, judge=llm_judge(fake_llm))
    version = conversation_version(org)
    judge = llm_judge(fake_llm)
    count = trial_count(version=version, size=1, judge=judge)
    trial = criteria_trial_start(version=version, size=1, counted_calls=count.judge_calls, judge=judge)
    read, landed = examples_module._examples, []

    def read_then_an_example_lands(version_id):
        found = read(version_id)
        if not landed:  # the admin adds one right after the first read
            landed.append(True)
            criteria_example_add(
                version=version, subject=decided_conversation(org, operator, "cv-a", note="note A"), check="grounded"
            )
        return found

    monkeypatch.setattr(examples_module, "_examples", read_then_an_example_lands)
    fake_llm.reset()
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    review = trial_item_grade(trial_id=trial.pk, index=0, conversation_judge=judge)
    (prompt,) = fake_llm.chat_requests()
    assert "<<<EXAMPLES>>>" not in user_text(prompt)  # the judge read the examples as they were: none
    version.refresh_from_db()
    assert review.criteria_fingerprint == version_fingerprint(version, ())
    assert review.criteria_fingerprint != version_fingerprint(version)  # not the examples that landed after


CONTEXT = 5_000


def test_examples_shrink_the_stages_so_no_prompt_passes_the_context(org, operator, fake_llm):
    """A conversation that fits one stage without examples still never sends a prompt over the context with them:
    the stage budget counts the examples, so the evidence is cut into more stages instead."""
    fake_llm.context_tokens = CONTEXT
    payload = support_conversation("cv-long")
    payload["messages"][0]["content"] = "Please refund order 1182. " + "It arrived broken, the box was crushed. " * 45
    payload["messages"][4]["content"] += " Refunds of broken items reach the card in three days. " * 35
    long = upsert(org, payload).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    before = conversation_grade(conversation_id=long.pk, judge=llm_judge(fake_llm))
    assert before.stages == 1
    version = conversation_version(org)
    for n in range(3):
        decided = decided_conversation(
            org, operator, f"cv-{n}", note="A long note on the evidence. " * 40, grounded="fail"
        )
        criteria_example_add(version=version, subject=decided, check="grounded")
    criteria_publish(version=version)
    fake_llm.reset()
    fake_llm.context_tokens = CONTEXT
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    after = conversation_grade(conversation_id=long.pk, judge=llm_judge(fake_llm))
    requests = fake_llm.chat_requests()
    assert after.route != "error" and after.stages == len(requests) > 1
    assert all(sum(len(tokenize(m["content"])) for m in r.body["messages"]) <= CONTEXT for r in requests)
    assert all("<<<EXAMPLES>>>" in user_text(r) for r in requests)


def test_reviews_without_examples_record_the_fingerprint_of_rubric_and_rules(org, fake_llm):
    conversation = upsert(org, support_conversation("cv-1")).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    review = conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    assert review.criteria_fingerprint == version_fingerprint(review.criteria_version)
    assert "<<<EXAMPLES>>>" not in user_text(fake_llm.chat_requests()[0])
    assert Review.objects.get(pk=review.pk).criteria_fingerprint.startswith("cf1:")


def version_asking(org, check_set):
    """An unpublished conversation version that asks `check_set`, as the editor saves it."""
    version = conversation_version(org)
    CriteriaVersion.objects.filter(pk=version.pk).update(checks=check_set.model_dump(mode="json"))
    version.refresh_from_db()
    return version


def test_an_example_shows_how_a_category_check_of_the_versions_own_is_read(org, operator):
    review = custom_checks_item(org)
    answers = {"cites_policy": "fail", "intent": "shipping", "helpful": "2"}
    decision_record(
        review_id=review.pk,
        decided_by=operator,
        decided_at=timezone.now(),
        verdict=PersonVerdict(checks=answers, note="n"),
    )
    version = version_asking(org, SUPPORT_CHECKS)
    example = criteria_example_add(version=version, subject=review.conversation, check="intent")
    assert (example.check_name, example.human_verdict, example.machine_verdict) == ("intent", "shipping", "refund")
    score = criteria_example_add(version=version, subject=review.conversation, check="helpful")
    assert (score.human_verdict, score.machine_verdict) == ("2", "4")


def test_it_refuses_a_check_the_version_does_not_ask_or_a_verdict_its_check_does_not_allow(org, operator):
    review = custom_checks_item(org)
    answers = {"cites_policy": "fail", "intent": "shipping", "helpful": "2"}
    decision_record(
        review_id=review.pk,
        decided_by=operator,
        decided_at=timezone.now(),
        verdict=PersonVerdict(checks=answers, note="n"),
    )
    # The next version asks intent as a verdict: the person's "shipping" cannot show how it reads that.
    intent_as_verdict = CheckDefinition(key="intent", name="Intent", question="Was the intent met?")
    version = version_asking(org, CheckSet(checks=[SUPPORT_CHECKS["cites_policy"], intent_as_verdict]))
    with pytest.raises(ExampleRefused, match="'helpful' is not a check of conversations in conversation v2"):
        criteria_example_add(version=version, subject=review.conversation, check="helpful")
    with pytest.raises(ExampleRefused, match="'shipping' is not an answer of 'intent': one of pass, fail, unknown"):
        criteria_example_add(version=version, subject=review.conversation, check="intent")
    assert not CriteriaExample.objects.exists()
