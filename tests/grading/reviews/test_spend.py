"""Spend caps: every review books the judge's reported usage into the ledger with it; a cap reached stops judge
calls from starting (the items wait with the reason `spend_cap`, not errors, nothing lost), and grading resumes
when the cap is raised or the period rolls over."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.conversations.grader import conversation_grade
from grading.core.weeks import monday
from grading.criteria.scoring import trial_score
from grading.criteria.trials import (
    HELD_BY_SPEND_CAP,
    criteria_trial_start,
    trial_count,
    trial_item_grade,
    trial_results,
)
from grading.models import AuditEvent, Conversation, CriteriaTrial, ItemKind, JudgeSpend, Review, SpendCap
from grading.passes.planner import grading_pass
from grading.reviews.inflight import grade_each, lock_session_close
from grading.reviews.spend import (
    SpendCapInvalid,
    SpendCapPassed,
    spend_blocked,
    spend_cap_set,
    spend_estimate,
    utc_day,
)
from grading.reviews.sql import conversation_messages, spend_caps_spent, subject_to_grade
from grading.reviews.versions import criteria_active, criteria_new_version
from tests.builders.conversations import PATH_IDS, llm_judge, support_conversation, upsert, verdicts_reply

pytestmark = pytest.mark.django_db

PER_CALL = 120  # verdicts_reply reports 100 prompt and 20 completion tokens


@pytest.fixture(autouse=True)
def _lock_session():
    yield
    lock_session_close()


def conversations(org, count: int, prefix: str = "cv") -> list[int]:
    return [upsert(org, support_conversation(f"{prefix}-{n}")).conversation.pk for n in range(count)]


def run_tasks(fake_llm, item_ids: list[int]) -> list[Review | None]:
    """What the pass's grading tasks do in the workers, one after another, each under its own ticket."""
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    judge = llm_judge(fake_llm)
    tickets = dict(Conversation.objects.filter(pk__in=item_ids).values_list("pk", "grading_task_id"))
    graded = []
    for item_id in item_ids:

        def grade(pk: int, task=tickets[item_id]) -> Review | None:
            return conversation_grade(conversation_id=pk, judge=judge, ticket=task)

        graded += grade_each(ItemKind.CONVERSATION, [item_id], grade, task_id=tickets[item_id])
    return graded


def ledger_tokens(org) -> int:
    return sum(row.prompt_tokens + row.completion_tokens for row in JudgeSpend.objects.filter(org=org))


def reviews_tokens(org) -> int:
    return sum(r.usage["prompt_tokens"] + r.usage["completion_tokens"] for r in Review.objects.filter(org=org))


def test_a_pass_stops_at_the_cap_exactly_and_resumes_when_the_cap_is_raised(
    org, fake_llm, criteria_admin, client, django_capture_on_commit_callbacks
):
    ids = conversations(org, 5)
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    spend_cap_set(org=org, version=None, period="day", tokens=250, cost_micros=None, actor=criteria_admin)

    enqueued = grading_pass().enqueued_ids
    assert sorted(enqueued) == sorted(ids)
    graded = run_tasks(fake_llm, enqueued)

    # Calls start while spent < 250: 0, 120, 240; the fourth would start at 360.
    assert len(fake_llm.chat_requests()) == 3
    assert [review is not None for review in graded] == [True, True, True, False, False]
    assert ledger_tokens(org) == reviews_tokens(org) == 3 * PER_CALL
    waiting = [pk for pk, review in zip(enqueued, graded, strict=True) if review is None]
    # Nothing lost: no error review, no ticket kept, each waiting item says why.
    assert not Review.objects.filter(route="error").exists()
    assert set(Conversation.objects.filter(pk__in=waiting).values_list("grading_task_id", flat=True)) == {""}
    blocked = spend_blocked(org.pk, version)
    assert (blocked.measure, blocked.spent, blocked.limit, blocked.cap.period) == ("tokens", 360, 250, "day")

    key = api_key_create(org=org, name="pipeline").plaintext
    answer = client.get(
        f"/api/v1/conversations/{Conversation.objects.get(pk=waiting[0]).external_id}",
        headers={"authorization": f"Bearer {key}"},
    ).json()
    assert answer["review"] is None
    assert answer["waiting"]["reason"] == "spend_cap"
    assert answer["waiting"]["cap"] == {"scope": "org", "criteria_version": None, "period": "day", "measure": "tokens"}

    run = grading_pass().run
    assert (run.needing, run.enqueued, run.spend_capped, run.backlog) == (2, 0, 2, 0)

    with django_capture_on_commit_callbacks() as sent:
        spend_cap_set(org=org, version=None, period="day", tokens=1000, cost_micros=None, actor=criteria_admin)
    assert len(sent) == 1  # a grading pass, at once (sent to the broker: the workers are not running here)
    event = AuditEvent.objects.get(action="spend.cap_set", detail__new__tokens=1000)
    assert (event.detail["old"]["tokens"], event.actor) == (250, criteria_admin)

    resumed = grading_pass().enqueued_ids
    assert sorted(resumed) == sorted(waiting)
    run_tasks(fake_llm, resumed)
    assert Review.objects.counting().filter(org=org).count() == 5
    assert ledger_tokens(org) == reviews_tokens(org) == 5 * PER_CALL
    assert JudgeSpend.objects.get(org=org).calls == 5


def the_day_rolls_over() -> None:
    """What was spent becomes the previous day's, as if the UTC day had turned (oldest first: one row per day)."""
    for row in JudgeSpend.objects.order_by("day"):
        JudgeSpend.objects.filter(pk=row.pk).update(day=F("day") - timedelta(days=1))


def test_grading_resumes_when_the_day_rolls_over(org, fake_llm, criteria_admin):
    ids = conversations(org, 3)
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    spend_cap_set(org=org, version=version, period="day", tokens=100, cost_micros=None, actor=criteria_admin)
    run_tasks(fake_llm, grading_pass().enqueued_ids)
    assert Review.objects.filter(org=org).count() == 1
    assert grading_pass().run.spend_capped == 2
    tomorrow = spend_blocked(org.pk, version).resumes_at + timedelta(hours=1)
    assert spend_blocked(org.pk, version, now=tomorrow) is None

    the_day_rolls_over()
    resumed = grading_pass().enqueued_ids
    assert len(resumed) == 2
    run_tasks(fake_llm, resumed)
    # The new day's first call reaches the cap again: one more graded, the last waits for the next day.
    assert Review.objects.counting().filter(org=org).count() == 2
    assert not Review.objects.filter(route="error").exists()
    assert grading_pass().run.spend_capped == 1
    the_day_rolls_over()
    run_tasks(fake_llm, grading_pass().enqueued_ids)
    assert set(ids) == set(Review.objects.counting().values_list("conversation_id", flat=True))


def test_a_week_cap_counts_the_days_since_monday_and_a_version_cap_only_its_version(org, fake_llm, criteria_admin):
    conversations(org, 1)
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    run_tasks(fake_llm, grading_pass().enqueued_ids)
    other = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    spend_cap_set(org=org, version=other, period="week", tokens=PER_CALL, cost_micros=None, actor=criteria_admin)
    assert spend_blocked(org.pk, version) is None  # the new version has spent nothing
    spend_cap_set(org=org, version=version, period="week", tokens=PER_CALL, cost_micros=None, actor=criteria_admin)
    assert spend_blocked(org.pk, version).cap.criteria_version == version


def test_what_holds_a_judge_call_back_counts_what_the_spend_page_shows(org, criteria_admin):
    """The check before every judge call (one SQL statement) and the page's figures (the ORM) count the same spend,
    for each scope and period: the days of this week, not last week's, and a version cap only its version's."""
    from django.utils import timezone

    from grading.reviews.spend import cap_spent, utc_day

    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    other = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    today = utc_day(timezone.now())
    for criteria, day, tokens in [(version, today, 100), (other, today, 30), (version, today - timedelta(days=8), 7)]:
        JudgeSpend.objects.create(
            org=org, criteria_version=criteria, judge="default", day=day, calls=1, prompt_tokens=tokens - 1,
            completion_tokens=1, cost_micros=tokens * 10,
        )  # fmt: skip
    for scope in (None, version):
        for period in ("day", "week"):
            SpendCap.objects.all().delete()
            spend_cap_set(org=org, version=scope, period=period, tokens=1, cost_micros=None, actor=criteria_admin)
            blocked = spend_blocked(org.pk, version)
            assert blocked.spent == cap_spent(SpendCap.objects.get(), timezone.now()).tokens
            assert blocked.spent == (130 if scope is None else 100)


def test_cost_is_booked_at_the_configured_prices_and_a_cost_cap_stops_grading(org, fake_llm, criteria_admin, settings):
    settings.JUDGES = {"default": {"price_input_per_million": 2.0, "price_output_per_million": 10.0}}
    conversations(org, 2)
    spend_cap_set(org=org, version=None, period="week", tokens=None, cost_micros=300, actor=criteria_admin)
    run_tasks(fake_llm, grading_pass().enqueued_ids)
    # 100 prompt tokens at 2.0 and 20 completion tokens at 10.0 per million: 400 micros, past the cap at once.
    assert JudgeSpend.objects.get(org=org).cost_micros == 400
    assert len(fake_llm.chat_requests()) == 1
    assert spend_blocked(org.pk, None).measure == "cost"


def test_a_review_books_its_spend_in_its_counters_statement_into_the_days_one_row(org, fake_llm, settings):
    settings.JUDGES = {"default": {"price_input_per_million": 2.0, "price_output_per_million": 10.0}}
    conversations(org, 3)

    with CaptureQueriesContext(connection) as queries:
        run_tasks(fake_llm, grading_pass().enqueued_ids)

    ledger = JudgeSpend.objects.get(org=org)
    assert (ledger.calls, ledger.prompt_tokens + ledger.completion_tokens) == (3, 3 * PER_CALL)
    assert ledger.cost_micros == 3 * 400  # 100 prompt tokens at 2.0 and 20 completion tokens at 10.0 per million
    assert ledger_tokens(org) == reviews_tokens(org)
    booked = [query["sql"] for query in queries.captured_queries if "INSERT INTO grading_judgespend" in query["sql"]]
    assert len(booked) == 3
    assert all("INSERT INTO grading_rollup" in sql for sql in booked)  # one statement: the counters, then the ledger


def test_bad_caps_are_refused_and_change_nothing(org, criteria_admin, other_org):
    for tokens, field in ((-1, "tokens"), (10**16, "tokens"), (None, "tokens")):
        with pytest.raises(SpendCapInvalid) as refused:
            spend_cap_set(org=org, version=None, period="day", tokens=tokens, cost_micros=None, actor=criteria_admin)
        assert refused.value.field == field
    with pytest.raises(SpendCapInvalid):
        spend_cap_set(org=org, version=None, period="month", tokens=5, cost_micros=None, actor=criteria_admin)
    foreign = criteria_active(org=other_org, kind=ItemKind.CONVERSATION)
    with pytest.raises(SpendCapInvalid):
        spend_cap_set(org=org, version=foreign, period="day", tokens=5, cost_micros=None, actor=criteria_admin)
    assert not SpendCap.objects.exists() and not AuditEvent.objects.filter(action__startswith="spend.").exists()


def graded_for_trials(org, fake_llm, count: int) -> None:
    conversations(org, count)
    run_tasks(fake_llm, grading_pass().enqueued_ids)


def test_a_trial_that_would_pass_a_cap_is_refused_and_nothing_starts(org, fake_llm, criteria_admin):
    graded_for_trials(org, fake_llm, 3)
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    estimate = spend_estimate(org_id=org.pk, judge=version.judge, calls=3)
    assert (estimate.tokens, estimate.cost_micros) == (3 * PER_CALL, None)
    # Spent 360 this week; 3 more calls of 120 each would reach 720, past 600.
    spend_cap_set(org=org, version=None, period="week", tokens=600, cost_micros=None, actor=criteria_admin)
    count = trial_count(version=version, size=3)
    with pytest.raises(SpendCapPassed, match="would pass the per week spend cap of org"):
        criteria_trial_start(version=version, size=3, counted_calls=count.judge_calls, actor=criteria_admin)
    assert not CriteriaTrial.objects.exists()


def test_a_trial_item_held_by_a_cap_makes_no_call_and_the_trial_still_ends(org, fake_llm, criteria_admin):
    graded_for_trials(org, fake_llm, 2)
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    count = trial_count(version=version, size=2)
    trial = criteria_trial_start(version=version, size=2, counted_calls=count.judge_calls, actor=criteria_admin)
    spend_cap_set(org=org, version=version, period="day", tokens=1, cost_micros=None, actor=criteria_admin)
    judge = llm_judge(fake_llm)
    calls = len(fake_llm.chat_requests())
    trial_item_grade(trial_id=trial.pk, index=0, conversation_judge=judge)  # the version has spent nothing yet
    trial_item_grade(trial_id=trial.pk, index=1, conversation_judge=judge)
    trial.refresh_from_db()
    assert len(fake_llm.chat_requests()) == calls + 1
    assert trial.review_ids[1] == HELD_BY_SPEND_CAP and trial.finished_at is not None
    assert trial_score(trial).items[1].left_out.startswith("held back by a spend cap")
    assert trial_results(trial)[1][3].startswith("held back by a spend cap")  # what the trial page says of it
    assert JudgeSpend.objects.get(criteria_version=version).calls == 1  # trials book their spend too


def test_a_grader_reads_its_conversation_messages_and_caps_in_one_read_as_the_reads_apart_give_them(
    org, fake_llm, criteria_admin
):
    graded, waiting = conversations(org, 2)
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    run_tasks(fake_llm, [graded])  # spend booked today
    spend_cap_set(org=org, version=version, period="week", tokens=PER_CALL * 9, cost_micros=None, actor=criteria_admin)
    spend_cap_set(org=org, version=None, period="week", tokens=None, cost_micros=10**9, actor=criteria_admin)
    spend_cap_set(org=org, version=None, period="day", tokens=PER_CALL * 5, cost_micros=None, actor=criteria_admin)
    other = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)  # its cap is not this version's
    spend_cap_set(org=org, version=other, period="day", tokens=PER_CALL, cost_micros=None, actor=criteria_admin)
    today = utc_day(timezone.now())

    read = subject_to_grade(Conversation, waiting)

    apart = spend_caps_spent(org_id=org.pk, version_id=version.pk, today=today, week_start=monday(today))
    assert [period for _, _, period, *_ in apart] == ["day", "week", "week"]  # org caps first, days before weeks
    assert read.spend_caps == apart
    assert read.evidence_messages == conversation_messages(waiting)
