"""A finished scored trial's figures are counted once and read back while what they were counted from stands: a
verdict from any source, an item's evidence or the version changing after the count shows on the next read, and the
figures read back equal a recount on the page and over the API. What moves the key for the items' rows is the count
of writes the database keeps per trial item (TrialItem), for any writer."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.criteria.scoring import trial_figures, trial_score
from grading.dashboard.labels import LabelIn, label_record
from grading.drafts.gate import draft_grade
from grading.models import (
    Conversation,
    CriteriaTrial,
    Decision,
    Draft,
    ItemKind,
    Label,
    Review,
    TrialFigures,
    TrialItem,
    TrialSource,
)
from grading.reviews.examples import criteria_example_add
from grading.reviews.versions import criteria_new_version
from reviewer.criteria.display import percent
from tests.builders.conversations import support_conversation, upsert
from tests.builders.drafts import CLEAN_BODY, draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.scored_trials import ORDER, decide, graded_conversations, label, scored_trial

pytestmark = pytest.mark.django_db

PASS = {"grounded": "pass", "complete": "pass", "usable": "pass"}
ACTIVE = {0: PASS, 1: PASS, 2: {**PASS, "complete": "fail"}, 3: PASS}
TRIAL = {0: PASS, 1: {**PASS, "grounded": "fail"}, 2: PASS, 3: {**PASS, "complete": "fail"}}


def read(trial: CriteriaTrial) -> dict:
    """The figures as a reader gets them, and every item as scored, asserted equal to a recount from the rows: read
    twice, so the second read is of what the first stored if it counted them again."""
    trial = CriteriaTrial.objects.select_related("criteria_version").get(pk=trial.pk)
    recount = trial_score(trial)
    for _ in range(2):
        stored = trial_figures(trial, items=range(len(trial.sample)))
        assert (stored.as_json(), stored.items) == (recount.as_json(), recount.items)
    return stored.as_json()


def shown_percent(client, trial: CriteriaTrial, check: str) -> str:
    page = client.get(reverse("criteria_trial_detail", args=[trial.pk])).content.decode()
    row = re.search(rf'<tr data-check="{check}" data-side="trial">(.*?)</tr>', page, re.S).group(1)
    return dict(re.findall(r'data-figure="(\w+)">([^<]*)<', row))["percent"]


def test_it_counts_a_labelled_trials_figures_once_and_shows_a_label_evidence_or_example_changed_since_on_the_next_read(
    org, fake_llm, criteria_admin, client, client_for
):
    conversations = graded_conversations(org, fake_llm, ACTIVE)
    for conversation in conversations.values():
        label(org, conversation, "ann", **PASS)
    version = criteria_new_version(org=org, kind="conversation", author=criteria_admin)
    trial = scored_trial(version, fake_llm, TrialSource.LABELS, criteria_admin, TRIAL)

    first = read(trial)
    assert TrialFigures.objects.filter(trial=trial).exists()
    assert (first["compared"], first["checks"]["grounded"]["trial"]["agreed"]) == (4, 3)
    key = api_key_create(org=org, name="pipeline").plaintext
    assert client.get(f"/api/v1/criteria/trials/{trial.pk}", HTTP_AUTHORIZATION=f"Bearer {key}").json() == first
    assert shown_percent(client_for(criteria_admin), trial, "grounded") == percent(0.75)

    label(org, conversations[1], "ann", grounded="fail")  # a person changed her verdict after the count
    relabelled = read(trial)
    assert relabelled["checks"]["grounded"]["trial"]["agreed"] == 4
    assert client.get(f"/api/v1/criteria/trials/{trial.pk}", HTTP_AUTHORIZATION=f"Bearer {key}").json() == relabelled
    assert shown_percent(client_for(criteria_admin), trial, "grounded") == percent(1.0)

    moved = support_conversation("cv-2")  # its evidence moved on: ann's labels no longer speak about it
    moved["messages"][0]["content"] = f"Please refund order {ORDER + 2}, it arrived broken. And the other one."
    upsert(org, moved)
    assert read(trial)["compared"] == 3
    # An item's evidence corrected in the database, by no service: its row alone moved.
    Conversation.objects.filter(pk=conversations[3].pk).update(fingerprint="corrected")
    assert read(trial)["compared"] == 2

    criteria_example_add(version=version, subject=conversations[0], check="grounded")  # the version changed
    assert read(trial)["examples_left_out"] == 1


def test_a_trial_from_labels_nobody_gave_is_done_at_once_and_reads_its_empty_figures(org, fake_llm, criteria_admin):
    version = criteria_new_version(org=org, kind="conversation", author=criteria_admin)
    trial = scored_trial(version, fake_llm, TrialSource.LABELS, criteria_admin, {})
    assert trial.sample == [] and trial.finished_at is not None
    assert read(trial)["compared"] == 0
    assert read(trial)["compared"] == 0  # from the stored figures


@pytest.mark.parametrize("source", [TrialSource.DECISIONS, TrialSource.AUDIT])
def test_it_shows_a_decision_or_audit_mark_changed_after_the_count_on_the_next_read(
    org, fake_llm, criteria_admin, client_for, source
):
    conversations = graded_conversations(org, fake_llm, ACTIVE)
    for conversation in conversations.values():
        decide(conversation, criteria_admin, PASS)
    version = criteria_new_version(org=org, kind="conversation", author=criteria_admin)
    trial = scored_trial(version, fake_llm, source, criteria_admin, TRIAL)
    assert read(trial)["checks"]["grounded"]["trial"]["agreed"] == 3
    assert shown_percent(client_for(criteria_admin), trial, "grounded") == percent(0.75)
    decided = Review.objects.counting().get(conversation=conversations[1])

    # Written by no service of the grading path (a correction made in the database): the key reads the rows, not
    # the writers, so whoever changes a decision's answers or a review's audit mark moves it.
    Decision.objects.filter(review=decided).update(checks={**PASS, "grounded": "fail"})
    assert read(trial)["checks"]["grounded"]["trial"]["agreed"] == 4
    assert shown_percent(client_for(criteria_admin), trial, "grounded") == percent(1.0)

    Review.objects.filter(pk=decided.pk).update(audit=False)
    assert read(trial)["compared"] == (4 if source == TrialSource.DECISIONS else 3)


def test_it_counts_up_a_trial_item_for_any_write_to_its_draft_review_decision_or_label_and_for_no_other_item(
    org, fake_llm, criteria_admin
):
    setup_org_memory(org)
    inside, outside = (
        save_draft(org, CLEAN_BODY.replace("every month", f"every {n + 2} weeks"), external_id=f"draft-{n}")
        for n in range(2)
    )
    fake_llm.set_default(draft_reply(8))
    for draft in (inside, outside):
        draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT, author=criteria_admin)
    # Inserted as any writer would: the database lists its items, whoever starts it.
    trial = CriteriaTrial.objects.create(
        org=org, criteria_version=version, sample=[inside.pk], judge_calls=1, review_ids=[None]
    )
    item = TrialItem.objects.get(trial=trial)
    assert (item.kind, item.item_id, item.written) == (ItemKind.DRAFT, inside.pk, 0)

    def writes_counted(write) -> int:
        before = TrialItem.objects.get(pk=item.pk).written
        write()
        return TrialItem.objects.get(pk=item.pk).written - before

    review = Review.objects.get(draft=inside)
    assert writes_counted(lambda: Draft.objects.filter(pk=inside.pk).update(title="Corrected")) == 1
    assert writes_counted(lambda: Review.objects.filter(pk=review.pk).update(audit=True)) == 1
    decision = Decision(org=org, review=review, outcome="approve", decided_at=timezone.now(), decided_by=criteria_admin)
    assert writes_counted(decision.save) == 1
    assert writes_counted(lambda: Decision.objects.filter(pk=decision.pk).update(note="corrected")) == 1
    assert writes_counted(lambda: Decision.objects.filter(pk=decision.pk).delete()) == 1
    label = LabelIn(item=inside.external_id, check="pass_fail", verdict="pass", labeller="ann")
    assert writes_counted(lambda: label_record(org=org, label=label, source="api")) == 1
    assert writes_counted(lambda: Label.objects.filter(draft=inside).delete()) == 1

    elsewhere = Review.objects.get(draft=outside)
    assert writes_counted(lambda: Draft.objects.filter(pk=outside.pk).update(title="Corrected")) == 0
    assert writes_counted(lambda: Review.objects.filter(pk=elsewhere.pk).update(audit=True)) == 0
    assert not TrialItem.objects.filter(item_id=outside.pk).exists()
