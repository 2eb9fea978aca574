"""Trial runs: a fixed-rule sample graded under an unpublished version with the real judge, counted first; trial
reviews carry their whole identity and never count anywhere."""

import hashlib
import threading
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.conversations.grader import conversation_grade
from grading.criteria.trials import (
    TrialCountChanged,
    TrialRunning,
    TrialsPerHourReached,
    criteria_trial_start,
    trial_count,
    trial_item_grade,
    trial_sample,
)
from grading.drafts.gate import draft_grade
from grading.models import CriteriaTrial, Draft, ItemKind, Review, ReviewState, WebhookDelivery
from grading.passes.planner import grading_pass
from grading.reviews.reads import current_review, staleness_audit
from grading.reviews.versions import CriteriaImmutable, criteria_active, criteria_new_version, criteria_publish
from tests.builders.conversations import llm_judge, support_conversation, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.quality import conversation_quality

pytestmark = pytest.mark.django_db


def graded_drafts(org, fake_llm, count: int, *, callback_url=None) -> list[Draft]:
    setup_org_memory(org)
    drafts = []
    for n in range(count):
        body = CLEAN_BODY.replace("every month", f"every {n + 2} weeks")
        drafts.append(save_draft(org, body, external_id=f"draft-{n}", callback_url=callback_url))
    for n, draft in enumerate(drafts):
        fake_llm.script(draft_reply(8 if n % 2 else 3))  # passes and fails: the sample must not care
        draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    fake_llm.reset()
    return drafts


def run(trial: CriteriaTrial, fake_llm, *, kind: str = ItemKind.DRAFT) -> list[Review]:
    """What the trial's tasks do in the workers, one per item, in process."""
    judges = {"draft_judge": llm_draft_judge(fake_llm)} if kind == ItemKind.DRAFT else {
        "conversation_judge": llm_judge(fake_llm)
    }  # fmt: skip
    return [trial_item_grade(trial_id=trial.pk, index=index, **judges) for index in range(len(trial.sample))]


def test_the_sample_is_the_items_with_a_scored_review_and_the_smallest_salted_hashes(org, fake_llm):
    drafts = graded_drafts(org, fake_llm, 6)
    save_draft(org, CLEAN_BODY, external_id="never-graded")
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    salt = django_settings.SAMPLING_SALT
    expected = sorted(drafts, key=lambda d: hashlib.sha256((salt + d.external_id).encode()).hexdigest())[:3]
    assert trial_sample(version=version, size=3) == expected


def test_a_draft_trial_counts_its_judge_calls_first_and_makes_exactly_that_many(org, fake_llm, criteria_admin):
    drafts = graded_drafts(org, fake_llm, 4)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    count = trial_count(version=version, size=3)
    assert (len(count.items), count.judge_calls) == (3, 3)
    assert [item.current for item in count.items] == [current_review(item.subject) for item in count.items]
    assert fake_llm.chat_requests() == []  # counting calls no judge

    trial = criteria_trial_start(version=version, size=3, counted_calls=count.judge_calls, actor=criteria_admin)
    fake_llm.set_default(draft_reply(8))
    reviews = run(trial, fake_llm)
    assert len(fake_llm.chat_requests()) == 3
    trial.refresh_from_db()
    assert (trial.judge_calls, trial.judge_calls_made, trial.review_ids) == (3, 3, [r.pk for r in reviews])
    assert trial.finished_at is not None
    by_id = {d.pk: d for d in drafts}
    for review in reviews:
        draft = by_id[review.draft_id]
        assert (review.state, review.criteria_version, review.fingerprint) == ("trial", version, draft.fingerprint)
        assert review.judge["model"] == "judge-test" and review.judge_key and review.memory_snapshot
        assert (review.route, review.score, review.usage["total_tokens"] > 0) == ("pass", 8.0, True)


def test_a_conversation_trial_counts_one_call_per_stage(org, fake_llm):
    fake_llm.context_tokens = 3_200  # llama.cpp's /props says so: the long conversation takes several stages
    short = upsert(org, support_conversation("cv-short")).conversation
    long = support_conversation("cv-long")
    long["messages"][0]["content"] += " It was packed in a thin bag and the glass broke in transit." * 25
    long["messages"][4]["content"] += " The refund reaches the card in a few working days." * 25
    long = upsert(org, long).conversation
    for conversation in (short, long):
        fake_llm.set_default(verdicts_reply(conversation.active_path_ids))
        conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    stages = {c.pk: Review.objects.get(conversation=c).stages for c in (short, long)}
    assert stages[short.pk] == 1 and stages[long.pk] > 1
    fake_llm.script()  # forget the default reply, keep the context window
    fake_llm.set_default(verdicts_reply(short.active_path_ids))
    fake_llm.requests.clear()

    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    count = trial_count(version=version, size=5, judge=llm_judge(fake_llm))
    assert count.judge_calls == sum(stages.values())
    trial = criteria_trial_start(version=version, size=5, counted_calls=count.judge_calls, judge=llm_judge(fake_llm))
    run(trial, fake_llm, kind=ItemKind.CONVERSATION)
    trial.refresh_from_db()
    assert len(fake_llm.chat_requests()) == trial.judge_calls_made == count.judge_calls


def test_trial_reviews_never_count_nor_reach_the_queue_the_dashboard_the_api_or_a_webhook(
    org, fake_llm, client, operator, django_capture_on_commit_callbacks
):
    drafts = graded_drafts(org, fake_llm, 2, callback_url="https://pipeline.example.com/hook")
    conversation = upsert(org, support_conversation("cv-1")).conversation
    fake_llm.script(verdicts_reply(conversation.active_path_ids))
    conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    counting = list(Review.objects.counting().order_by("pk").values_list("pk", flat=True))
    key = api_key_create(org=org, name="pipeline").plaintext

    def figures() -> dict:
        shown = client.get("/api/v1/dashboard", HTTP_AUTHORIZATION=f"Bearer {key}").json()
        return {name: value for name, value in shown.items() if name != "generated_at"}

    before = figures()
    quality, audit = conversation_quality(org), staleness_audit(org)

    # Trials whose judge sends everything to people: a self-contradicting draft judge, an unknown check.
    draft_version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    conversation_version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        draft_trial = criteria_trial_start(version=draft_version, size=2, counted_calls=2)
        conversation_trial = criteria_trial_start(version=conversation_version, size=1, counted_calls=1)
    assert len(callbacks) == 2  # the two trials' task sends, and nothing else
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        fake_llm.set_default(draft_reply(7, passed=False))
        trial_reviews = run(draft_trial, fake_llm)
        fake_llm.set_default(verdicts_reply(conversation.active_path_ids, complete="unknown"))
        trial_reviews += run(conversation_trial, fake_llm, kind=ItemKind.CONVERSATION)
    assert callbacks == []  # no webhook, no evaluation export
    assert {(r.state, r.route) for r in trial_reviews} == {(ReviewState.TRIAL, "human")}
    assert not WebhookDelivery.objects.exists()

    assert list(Review.objects.counting().order_by("pk").values_list("pk", flat=True)) == counting
    assert not Review.objects.waiting().filter(pk__in=[r.pk for r in trial_reviews]).exists()
    client.force_login(operator)
    queue = client.get("/queue/").content.decode()
    assert "Nothing is waiting for a human." in queue and not any(f'data-row="{r.pk}"' in queue for r in trial_reviews)
    assert figures() == before
    assert (conversation_quality(org), staleness_audit(org)) == (quality, audit)
    for draft in drafts:
        answer = client.get(f"/api/v1/drafts/{draft.pk}", HTTP_AUTHORIZATION=f"Bearer {key}").json()
        assert answer["identity"]["criteria_version"] == 1 and answer["route"] == current_review(draft).route
    answer = client.get(f"/api/v1/conversations/{conversation.external_id}", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert answer.json()["review"]["identity"]["criteria_version"] == 1
    assert grading_pass().enqueued_draft_ids == []  # nothing needs grading: the trials changed nothing


def test_a_trial_under_a_version_later_published_does_not_stand_in_for_the_real_grading(org, fake_llm):
    [draft] = graded_drafts(org, fake_llm, 1)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    trial = criteria_trial_start(version=version, size=1, counted_calls=1)
    fake_llm.set_default(draft_reply(8))
    [trial_review] = run(trial, fake_llm)
    criteria_publish(version=version)
    assert grading_pass().enqueued_draft_ids == [draft.pk]
    review = draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    assert len(fake_llm.chat_requests()) == 2  # the trial's call, and the real grading's: nothing was reused
    assert review.pk != trial_review.pk and review.criteria_version == version
    assert (review.state, Review.objects.get(pk=trial_review.pk).state) == ("current", "trial")
    assert current_review(draft) == review


def test_a_trial_task_delivered_twice_calls_the_judge_once(org, fake_llm):
    graded_drafts(org, fake_llm, 1)
    trial = criteria_trial_start(version=criteria_new_version(org=org, kind=ItemKind.DRAFT), size=1, counted_calls=1)
    fake_llm.set_default(draft_reply(8))
    first, again = run(trial, fake_llm), run(trial, fake_llm)
    assert first == again and len(fake_llm.chat_requests()) == 1
    trial.refresh_from_db()
    assert trial.judge_calls_made == 1


def test_a_count_that_no_longer_holds_is_refused_and_nothing_starts(org, fake_llm):
    graded_drafts(org, fake_llm, 2)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    with pytest.raises(TrialCountChanged):
        criteria_trial_start(version=version, size=2, counted_calls=1)
    assert not CriteriaTrial.objects.exists()


def test_a_published_version_has_no_trial(org, fake_llm):
    graded_drafts(org, fake_llm, 1)
    with pytest.raises(CriteriaImmutable):
        criteria_trial_start(version=criteria_active(org=org, kind=ItemKind.DRAFT), size=1, counted_calls=1)
    assert not CriteriaTrial.objects.exists()


def test_an_item_gone_since_the_count_is_skipped(org, fake_llm):
    [draft] = graded_drafts(org, fake_llm, 1)
    trial = criteria_trial_start(version=criteria_new_version(org=org, kind=ItemKind.DRAFT), size=1, counted_calls=1)
    Draft.objects.filter(pk=draft.pk).delete()  # its reviews go with it
    assert run(trial, fake_llm) == [None]
    trial.refresh_from_db()
    assert (trial.review_ids, trial.judge_calls_made, trial.finished_at is not None) == ([0], 0, True)
    assert fake_llm.chat_requests() == []


def test_it_refuses_a_second_trial_of_a_version_while_the_first_runs(org, fake_llm):
    graded_drafts(org, fake_llm, 2)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    first = criteria_trial_start(version=version, size=2, counted_calls=2)
    with pytest.raises(TrialRunning) as refused:
        criteria_trial_start(version=version, size=2, counted_calls=2)
    assert refused.value.trial == first and "is still running" in str(refused.value)
    assert list(CriteriaTrial.objects.values_list("pk", flat=True)) == [first.pk]

    fake_llm.set_default(draft_reply(8))
    run(first, fake_llm)
    assert criteria_trial_start(version=version, size=2, counted_calls=2).pk != first.pk  # done: the next may run


def test_it_keeps_two_running_trials_of_one_version_out_of_the_database(org, fake_llm):
    graded_drafts(org, fake_llm, 1)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    running = criteria_trial_start(version=version, size=1, counted_calls=1)
    second = CriteriaTrial(org=org, criteria_version=version, sample=running.sample, judge_calls=1, review_ids=[None])
    with pytest.raises(IntegrityError), transaction.atomic():
        second.save()


@pytest.mark.django_db(transaction=True)
def test_it_lets_one_of_two_simultaneous_starts_of_a_version_win(org, fake_llm):
    graded_drafts(org, fake_llm, 1)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def begin() -> None:
        try:
            start.wait()
            criteria_trial_start(version=version, size=1, counted_calls=1)
            outcomes.append("started")
        except TrialRunning:
            outcomes.append("refused")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=begin) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["refused", "started"]
    assert CriteriaTrial.objects.count() == 1


def test_it_refuses_a_start_beyond_the_orgs_trials_per_hour_and_counts_only_that_hour(
    org, other_org, fake_llm, settings
):
    settings.CRITERIA_TRIALS_PER_ORG_PER_HOUR = 2
    graded_drafts(org, fake_llm, 1)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    fake_llm.set_default(draft_reply(8))
    trials = []
    for _ in range(2):
        trials.append(criteria_trial_start(version=version, size=1, counted_calls=1))
        run(trials[-1], fake_llm)
    CriteriaTrial.objects.create(  # another org's trials are its own
        org=other_org, criteria_version=criteria_active(org=other_org, kind=ItemKind.DRAFT), sample=[],
        judge_calls=0, review_ids=[], finished_at=timezone.now(),
    )  # fmt: skip
    with pytest.raises(TrialsPerHourReached) as refused:
        criteria_trial_start(version=version, size=1, counted_calls=1)
    assert "CRITERIA_TRIALS_PER_ORG_PER_HOUR" in str(refused.value) and "2 trials" in str(refused.value)
    assert CriteriaTrial.objects.filter(org=org).count() == 2

    an_hour_ago = timezone.now() - timedelta(hours=1, seconds=1)
    CriteriaTrial.objects.filter(pk=trials[0].pk).update(requested_at=an_hour_ago)
    assert criteria_trial_start(version=version, size=1, counted_calls=1).org_id == org.pk


def test_it_lets_a_new_trial_replace_one_left_unfinished_for_an_hour(org, fake_llm):
    graded_drafts(org, fake_llm, 1)
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    lost = criteria_trial_start(version=version, size=1, counted_calls=1)  # its task never ran
    CriteriaTrial.objects.filter(pk=lost.pk).update(requested_at=timezone.now() - timedelta(hours=1, seconds=1))
    replacement = criteria_trial_start(version=version, size=1, counted_calls=1)
    lost.refresh_from_db()
    assert lost.finished_at is not None and replacement.finished_at is None
