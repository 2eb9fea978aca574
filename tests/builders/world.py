"""A small org whose reviews land on every figure of the dashboard, built through the production writes (the
grading code with the judge on the loopback fake LLM, decisions, the audit sample, labels, thumbs), and an
independent recomputation of the figures straight from the rows, by the definitions in docs/stakeholders.md."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.utils import timezone

from grading.checks.definitions import CONVERSATION_DEFAULTS
from grading.conversations.grader import conversation_grade
from grading.conversations.ingest import conversation_append, feedback_record
from grading.core.schemas import FeedbackIn, MessagesIn
from grading.core.weeks import monday
from grading.dashboard.figures import Scope, scope_for
from grading.dashboard.labels import LabelIn, label_record
from grading.drafts.gate import draft_grade
from grading.models import Conversation, Decision, Feedback, ItemKind, Label, Review, ReviewState
from grading.reviews.services import PersonVerdict, decision_record, review_audit_mark
from grading.reviews.versions import criteria_active
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.fakes.openai_server import error_reply

CHECKS = CONVERSATION_DEFAULTS.keys  # what a version asks that names no checks of its own

SUNDAY_NIGHT = datetime(2026, 11, 22, 23, 59, 30, tzinfo=UTC)  # the last seconds of ISO week 2026-W47
MONDAY = datetime(2026, 11, 23, 0, 0, 0, tzinfo=UTC)  # the first second of 2026-W48
W47, W48 = date(2026, 11, 16), date(2026, 11, 23)


def at_ten(day: date | datetime) -> datetime:
    if isinstance(day, datetime):
        return day
    return datetime(day.year, day.month, day.day, 10, tzinfo=UTC)


def conversation_payload(external_id: str, application: str, started: date | datetime, *, parent: str | None = None):
    started = at_ten(started)
    at = lambda minutes: (started + timedelta(minutes=minutes)).isoformat()  # noqa: E731
    return {
        "external_id": external_id,
        "application": application,
        "closed": True,
        "messages": [
            {"id": "m1", "parent_id": parent, "role": "user", "content": "Refund order 1182?", "created_at": at(0)},
            {"id": "m2", "parent_id": "m1", "role": "assistant", "content": "Refunded: 49.90.", "created_at": at(1)},
        ],
    }


@dataclass
class World:
    org: object
    reviews: dict[str, Review] = field(default_factory=dict)


def build_world(org, fake_llm, operator) -> World:
    """Conversations in two applications over two ISO weeks (two of them a second either side of the boundary),
    drafts on every route of the gate, then decisions, the audit mark, labels and thumbs. See the comments for
    what each item is for."""
    world = World(org)
    judge = llm_judge(fake_llm)
    plan = [
        # (external id, application, started, grounded, complete, usable)
        ("c1", "billing", W47 + timedelta(days=2), "pass", "pass", "pass"),  # audit item, people agree
        ("c2", "billing", SUNDAY_NIGHT, "fail", "pass", "pass"),  # W47 by a second; labelled fail (agree)
        ("c3", "billing", MONDAY, "pass", "unknown", "pass"),  # W48 by a second; unsure, decided
        ("c4", "billing", W48 + timedelta(days=1), "pass", "pass", "pass"),  # audit item, people disagree
        ("c5", "onboarding", W47 + timedelta(days=3), "pass", "pass", "pass"),  # labelled grounded fail
        ("c6", "onboarding", W48 + timedelta(days=2), "pass", "pass", "unknown"),  # waits in the queue
        ("c7", "onboarding", W48 + timedelta(days=3), "pass", "pass", "pass"),  # goes stale: never counts
        ("c8", "billing", W48 + timedelta(days=4), "pass", "pass", "pass"),  # re-graded as a fail
    ]
    for external_id, application, started, grounded, complete, usable in plan:
        conversation = upsert(org, conversation_payload(external_id, application, started)).conversation
        fake_llm.script(verdicts_reply(["m1", "m2"], grounded=grounded, complete=complete, usable=usable))
        world.reviews[external_id] = conversation_grade(conversation_id=conversation.pk, judge=judge)
    # c9 cannot be scored (its first message names a parent that never arrived); c10's judge refuses the request.
    c9 = upsert(org, conversation_payload("c9", "onboarding", W47 + timedelta(days=4), parent="m0")).conversation
    world.reviews["c9"] = conversation_grade(conversation_id=c9.pk, judge=judge)
    c10 = upsert(org, conversation_payload("c10", "billing", W48 + timedelta(days=5))).conversation
    fake_llm.script(error_reply(400, message="bad request"))
    world.reviews["c10"] = conversation_grade(conversation_id=c10.pk, judge=judge)

    # c7 changes after grading and is not graded again; c8 changes and is graded again (its first review is history).
    for external_id in ("c7", "c8"):
        started = Conversation.objects.get(org=org, external_id=external_id).started_at
        asked, answered = (started + timedelta(minutes=m) for m in (5, 6))
        more = [
            {"id": "m3", "parent_id": "m2", "role": "user", "content": "And the receipt?", "created_at": asked},
            {"id": "m4", "parent_id": "m3", "role": "assistant", "content": "Sent.", "created_at": answered},
        ]
        conversation_append(org=org, external_id=external_id, payload=_messages(more))
    c8 = Conversation.objects.get(org=org, external_id="c8")
    fake_llm.script(verdicts_reply(["m1", "m2", "m3", "m4"], grounded="pass", complete="fail", usable="pass"))
    world.reviews["c8"] = conversation_grade(conversation_id=c8.pk, judge=judge)

    # A trial review (a criteria trial run) of c4: never counts. Written as criteria trials write theirs, outside
    # the rollups: the stored counters equal the live GROUP BY only if that leaves it out too.
    c4 = world.reviews["c4"]
    Review.objects.create(
        org=org, kind=ItemKind.CONVERSATION, conversation=c4.conversation, fingerprint=c4.fingerprint,
        criteria_version=c4.criteria_version, judge={"backend": "trial"}, judge_key="trial",
        started_at=c4.started_at, finished_at=c4.finished_at, stages=1, route="pass", checks=c4.checks,
        state=ReviewState.TRIAL, usage={"prompt_tokens": 999, "completion_tokens": 9}, application="billing",
        week=W48,
    )  # fmt: skip

    # Drafts: a pass, a fail, one in the band (a person decides), one repaired then passed, one the judge refused.
    setup_org_memory(org)
    draft_judge = llm_draft_judge(fake_llm)
    drafts = [
        ("d-pass", CLEAN_BODY, draft_reply(8, writing=5)),
        ("d-fail", CLEAN_BODY.replace("Start with the questions", "Delve into the questions"), draft_reply(8)),
        ("d-band", CLEAN_BODY, draft_reply(7, aeo=3, passed=False)),  # 7 - 0: contradiction -> human
        ("d-repaired", CLEAN_BODY.replace("When answers go stale.", "When answers go stale \u2014 they do."),
         draft_reply(9)),
        ("d-error", CLEAN_BODY, error_reply(400, message="bad request")),
    ]  # fmt: skip
    for external_id, body, reply in drafts:
        draft = save_draft(org, body, external_id=external_id)
        fake_llm.script(reply)
        world.reviews[external_id] = draft_grade(draft_id=draft.pk, judge=draft_judge)

    # The audit mark (as sample_cycle sends it): c1, c4 and d-pass wait for a person, whatever the machine said.
    review_audit_mark(review_ids=[world.reviews[k].pk for k in ("c1", "c4", "d-pass")])
    every_pass, grounded_fail = (
        dict.fromkeys(CHECKS, "pass"),
        {"grounded": "fail", "complete": "pass", "usable": "pass"},
    )
    decide = [
        ("c1", PersonVerdict(checks=every_pass, note="looked"), datetime(2026, 11, 24, 9, tzinfo=UTC)),
        ("c4", PersonVerdict(checks=grounded_fail, note="looked"), datetime(2026, 11, 24, 10, tzinfo=UTC)),
        # a Monday: ISO week 2026-W49
        ("c3", PersonVerdict(checks=every_pass, note="looked"), datetime(2026, 11, 30, 23, tzinfo=UTC)),
        ("d-pass", PersonVerdict(outcome="reject", note="looked"), datetime(2026, 11, 25, 9, tzinfo=UTC)),
        ("d-band", PersonVerdict(outcome="approve", note="looked"), datetime(2026, 11, 25, 12, tzinfo=UTC)),
    ]  # fmt: skip
    for key, verdict, decided_at in decide:
        decision_record(review_id=world.reviews[key].pk, decided_by=operator, decided_at=decided_at, verdict=verdict)

    for item, check, verdict in (
        ("c2", "pass_fail", "fail"),
        ("c5", "grounded", "fail"),
        ("d-fail", "pass_fail", "fail"),
    ):
        label_record(org=org, label=LabelIn(item=item, check=check, verdict=verdict, labeller="ann"), source="test")
    for external_id, value in (("c1", "up"), ("c2", "down"), ("c5", "up")):
        feedback_record(org=org, payload=FeedbackIn(conversation=external_id, message_id="m2", value=value))
    for key in world.reviews:
        world.reviews[key].refresh_from_db()
    criteria_active(org=org, kind=ItemKind.DRAFT)
    return world


def _messages(messages):
    return MessagesIn.model_validate({"messages": messages})


# --- the independent recomputation ---------------------------------------------------------------------------


def iso(day) -> str:
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


def world_scope(org) -> Scope:
    """The dashboard scope over every week the world has reviews in: 2026-W46 up to this week."""
    return scope_for(org, since="2026-W46", until=iso(monday(timezone.now())))


def expected_quality(org, weeks: list[str]) -> dict:
    """Quality read literally: a review counts (Review.objects.counting()); it passes when all three checks pass;
    it is resolved when no check is unknown; one with an unknown stands beside; by the ISO week of the start."""
    by_app: dict[str, Counter] = {}
    by_week = {week: Counter() for week in weeks}
    reviews = Review.objects.counting().filter(org=org, kind=ItemKind.CONVERSATION).select_related("conversation")
    for review in reviews:
        week = iso(review.conversation.started_at.astimezone(UTC))
        if week not in by_week or not review.checks:
            continue
        verdicts = [review.checks[name]["verdict"] for name in CHECKS]
        counts = by_app.setdefault(review.conversation.application, Counter())
        for bucket in (counts, by_week[week]):
            if "unknown" in verdicts:
                bucket["unknown"] += 1
            else:
                bucket["resolved"] += 1
                bucket["passed"] += all(v == "pass" for v in verdicts)
            for name in CHECKS:
                bucket[f"{name}:{review.checks[name]['verdict']}"] += 1
    for feedback in Feedback.objects.filter(conversation__org=org).select_related("conversation"):
        if iso(feedback.conversation.started_at.astimezone(UTC)) in by_week:
            by_app.setdefault(feedback.conversation.application, Counter())[f"thumbs_{feedback.value}"] += 1
    return {"by_app": by_app, "by_week": by_week}


def expected_agreement(org) -> dict:
    """(kind, sample, check) -> Counter of (machine, person) pairs, read from decisions and labels directly."""
    pairs: dict[tuple, Counter] = {}
    for review in Review.objects.counting().filter(org=org):
        decision = Decision.objects.filter(review=review).first()
        sample = "audit" if review.audit else ("unsure" if review.route == "human" else None)
        if decision is not None and sample:
            if review.kind == ItemKind.DRAFT:
                machine = (
                    review.route if review.route in ("pass", "fail") else ("pass" if review.judge_passed else "fail")
                )
                person = "pass" if decision.outcome == "approve" else "fail"
                pairs.setdefault((review.kind, sample, "pass_fail"), Counter())[(machine, person)] += 1
            else:
                for name in CHECKS:
                    pair = (review.checks[name]["verdict"], decision.checks[name])
                    pairs.setdefault((review.kind, sample, name), Counter())[pair] += 1
        subject = {"draft": review.draft} if review.kind == ItemKind.DRAFT else {"conversation": review.conversation}
        for label in Label.objects.filter(**subject, fingerprint=review.fingerprint):
            if label.check_name == "pass_fail":
                machine = {"pass": "pass", "fail": "fail"}.get(review.route, "unknown")
            else:
                machine = review.checks[label.check_name]["verdict"]
            pairs.setdefault((review.kind, "label", label.check_name), Counter())[(machine, label.verdict)] += 1
    return pairs
