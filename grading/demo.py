"""Demo data for `make demo`: conversations of three applications over eight weeks, and drafts with the org
memory they are judged against; all graded by the demo's worker.

Deterministic (a seeded random generator) and idempotent: seeding twice merges into the same records.
The mix lands on every route of the heuristic judge and on every not-scorable reason worth showing.
"""

import hashlib
import logging
import random
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Unpack

from django.conf import settings
from django.utils import timezone

from grading.certify.services import certificate_compute, certify_target_set
from grading.checks.definitions import UNKNOWN
from grading.conversations.grader import conversation_grade
from grading.conversations.ingest import conversation_upsert, feedback_record
from grading.core.evidence import Verdict
from grading.core.schemas import ConversationIn, DraftIn, FeedbackIn
from grading.dashboard.dimensions import org_dimensions_set
from grading.dashboard.labels import LabelIn, label_record, labels_record
from grading.dashboard.sampling import audit_sample_send
from grading.drafts.gate import draft_grade
from grading.drafts.submit import draft_save
from grading.judge.backends import (
    DraftJudgement,
    DraftPrompt,
    HeuristicDraftJudge,
    HeuristicJudge,
    JudgeIdentity,
    StageJudgement,
)
from grading.judge.client import JudgeUnavailable, Usage
from grading.judge.confidence import HEURISTIC
from grading.judge.conversation import SYSTEM_PROMPT, StageAsked, user_prompt
from grading.models import Conversation, CriteriaVersion, Draft, ItemKind, Org, Review
from grading.passes.planner import conversations_needing_grading, drafts_needing_grading
from grading.reviews.memory import article_upsert, memory_add
from grading.reviews.versions import criteria_active

APPLICATIONS = ("billing-assistant", "onboarding-bot", "docs-helper")
OLDER_RELEASE, NEWER_RELEASE = "2.3", "2.4"
DEMO_DIMENSIONS = ["release", "environment"]
WEEKS = 8
PER_WEEK = 4

_REQUESTS = {
    "billing-assistant": ("Please refund order {n}, it arrived damaged.", "refund_order", '{{"order": {n}}}'),
    "onboarding-bot": ("How many seats are left on plan {n}?", "plan_seats", '{{"plan": {n}}}'),
    "docs-helper": ("Which version of the SDK added endpoint {n}?", "search_docs", '{{"query": "endpoint {n}"}}'),
}


def _release(week: int) -> str:
    """The agent's release a conversation of `week` weeks ago ran: the newer one these last four weeks."""
    return NEWER_RELEASE if week < WEEKS // 2 else OLDER_RELEASE


def seed_conversations(org: Org) -> None:
    """The conversations, each carrying the release that produced it; the org slices its figures by release and
    environment (declared first, as an org admin would: a review is filed under them when it is graded)."""
    org_dimensions_set(org=org, dimensions=DEMO_DIMENSIONS)
    rng = random.Random(7)
    now = timezone.now()
    for app_index, application in enumerate(APPLICATIONS):
        for week in range(WEEKS):
            for slot in range(PER_WEEK):
                started = now - timedelta(weeks=week, days=slot, hours=app_index + 2)
                external_id = f"{application[:4]}-w{week}-{slot}"
                variant = (week + slot + app_index) % 7
                if _release(week) == NEWER_RELEASE and variant in (0, 1, 5):
                    # The newer release invents a figure where the older one read it (or refused): grounding drops.
                    variant = 2
                payload = _conversation(rng, application, external_id, started, variant=variant)
                payload["metadata"] = {"release": _release(week), "environment": "production", "model": "demo-agent"}
                write = conversation_upsert(org=org, payload=ConversationIn.model_validate(payload))
                if slot == 0:
                    value = "up" if week % 2 else "down"
                    last = write.conversation.active_path_ids[-1]
                    feedback_record(org=org, payload=FeedbackIn(conversation=external_id, message_id=last, value=value))
    for payload in _special_cases(now):
        conversation_upsert(org=org, payload=ConversationIn.model_validate(payload))


def _message(mid: str, role: str, content, parent: str | None, at: datetime, **extra) -> dict:
    return {"id": mid, "parent_id": parent, "role": role, "content": content, "created_at": at.isoformat(), **extra}


def _conversation(rng: random.Random, application: str, external_id: str, started: datetime, *, variant: int) -> dict:
    """Variants: 0-1 grounded answers, 2 an invented figure, 3 a regenerated reply (branch), 4 an
    unanswered follow-up, 5 a refusal, 6 a reply too terse to judge (a human decides)."""
    n = rng.randint(1000, 9999)
    request, tool, arguments = _REQUESTS[application]
    figure = rng.randint(10, 90)
    at = lambda minutes: started + timedelta(minutes=minutes)  # noqa: E731 - a local clock for readability
    messages = [
        _message("u1", "user", request.format(n=n), None, at(0)),
        _message(
            "a1",
            "assistant",
            None,
            "u1",
            at(1),
            tool_calls=[
                {"id": "call-1", "type": "function", "function": {"name": tool, "arguments": arguments.format(n=n)}}
            ],
        ),
        _message("t1", "tool", f'{{"result": "ok", "value": {figure}}}', "a1", at(2), tool_call_id="call-1", name=tool),
    ]
    answer = f"Done. For {n} the value is {figure}, as the system reported."
    if variant == 2:
        answer = f"Done. For {n} the value is {figure + 7}, and it will be applied within 3 days."
    if variant == 5:
        answer = "Unfortunately I can't help with that request."
    if variant == 6:
        answer = "Done, see above."
    messages.append(_message("a2", "assistant", answer, "t1", at(3)))
    active = "a2"
    if variant == 3:
        # The user regenerated the reply: a2 is abandoned, a2b is what they saw.
        messages.append(
            _message("a2b", "assistant", f"All set: {n} shows {figure}, straight from the system.", "t1", at(5))
        )
        active = "a2b"
    if variant == 4:
        messages.append(_message("u2", "user", "Can you also email me a receipt for it?", active, at(6)))
        active = "u2"
    return {
        "external_id": external_id,
        "application": application,
        "closed": True,
        "active_message_id": active,
        "messages": messages,
    }


def _special_cases(now: datetime) -> list[dict]:
    """One in progress, one with a parent that never arrived, and one long enough to be judged in stages."""
    in_progress = {
        "external_id": "live-chat-1",
        "application": "onboarding-bot",
        "closed": False,
        "messages": [
            _message("u1", "user", "I am setting up SSO, one moment while I find the metadata URL.", None, now)
        ],
    }
    incomplete = {
        "external_id": "broken-export-1",
        "application": "docs-helper",
        "closed": True,
        "active_message_id": "a1",
        "messages": [
            _message("u1", "user", "What changed in version 4?", None, now - timedelta(days=3, minutes=1)),
            _message("a1", "assistant", "Version 4 removed the legacy client.", "u0-lost", now - timedelta(days=3)),
        ],
    }
    chapters = []
    parent = "u1"
    for i in range(1, 8):
        text = f"Section {i} of the migration guide. " + (
            "The importer maps every legacy field to its new name. " * 180
        )
        chapters.append(_message(f"a{i}", "assistant", text, parent, now - timedelta(days=2, minutes=60 - i)))
        parent = f"a{i}"
    long_one = {
        "external_id": "long-guide-1",
        "application": "docs-helper",
        "closed": True,
        "messages": [
            _message(
                "u1",
                "user",
                "Write me the full migration guide, section by section.",
                None,
                now - timedelta(days=2, hours=1),
            ),
            *chapters,
        ],
    }
    return [in_progress, incomplete, long_one]


# --- drafts ----------------------------------------------------------------------------------------------

SOURCE = "https://example.com/northwind-support-study"
FACTS = [
    ("Acme Logistics cut ticket volume by 38% in one quarter with self-service answers.", ["Acme Logistics", "38%"]),
    ("Brightline Health answers 70% of billing questions without an agent.", ["Brightline Health", "70%"]),
]
LEARNINGS = [
    "Lead with the customer's number, not ours.",
    "Readers skim: answer the heading's question in the first sentence.",
    "Avoid vendor-speak; name the tool the reader already uses.",
    "Support leaders care about backlog age more than ticket counts.",
]
STRATEGY = "Write for support leaders at mid-size software companies who are asked to do more with the same team."
ARTICLE_TOPICS = [
    "ticket triage", "measuring deflection", "help-center search", "support macros", "escalation paths",
    "customer health scores", "support hiring", "onboarding emails", "status pages", "chatbot handoff",
    "knowledge-base upkeep", "SLA design", "backlog age", "support analytics", "voice of the customer",
    "refund policies", "billing questions", "self-service forms", "community forums", "agent burnout",
]  # fmt: skip

_CLEAN = """\
Most support questions repeat. Answering them once, in public, is the cheapest support there is.

## How do self-service answers cut support costs?

Acme Logistics cut ticket volume by 38% in one quarter after publishing answers to its most common questions,
as [the study]({source}) shows.

<ArticleCallout variant="summary" />

## Which questions should a team answer first?

Start with the ones that reach agents most often. See [ticket triage](/writing/ticket-triage) and
[measuring deflection](/writing/measuring-deflection).

<ArticleCaseStudyCallout />

## When does self-service stop paying off?

When answers go stale. Review them every month.

<ArticleCta />
"""

_H2_STATEMENTS = _CLEAN.replace(
    "## How do self-service answers cut support costs?", "## Self-service and costs"
).replace("## Which questions should a team answer first?", "## Picking questions")

DEMO_DRAFTS = {
    "clean-pass": _CLEAN,
    "banned-word": _CLEAN.replace("Start with the ones", "Delve into the ones"),
    "filler-phrase": _CLEAN.replace("When answers go stale.", "It is worth noting that answers go stale."),
    "headings-not-questions": _H2_STATEMENTS,
    "no-headings": _CLEAN.replace("## ", ""),
    "citation-missing": _CLEAN.replace("as [the study]({source}) shows", "as a recent study shows"),
    "proof-point-missing": _CLEAN.replace("Acme Logistics cut ticket volume by 38%", "One company cut ticket volume"),
    "band-intensifiers": _CLEAN.replace(
        "Review them every month.",
        "Really, just review them. Very simply, it is really just very important, truly, to simply review them.",
    ),
    "repaired-dash": _CLEAN.replace("When answers go stale.", "When answers go stale \u2014 and they do."),
    "repaired-links-and-cta": _CLEAN.replace("<ArticleCta />\n", "").replace(
        " and\n[measuring deflection](/writing/measuring-deflection)", ""
    ),
    "repaired-but-still-failing": _CLEAN.replace("<ArticleCta />\n", "").replace(
        "Start with the ones", "Leverage the ones"
    ),
    "second-clean-pass": _CLEAN.replace("Most support questions repeat.", "Most questions your agents see repeat."),
}


def seed_drafts(org: Org) -> None:
    if not org.memory.exists():
        for text, proof_terms in FACTS:
            memory_add(org=org, kind="fact", text=text, proof_terms=proof_terms)
        for text in LEARNINGS:
            memory_add(org=org, kind="learning", text=text)
        memory_add(org=org, kind="strategy", text=STRATEGY)
    for topic in ARTICLE_TOPICS:
        slug = topic.replace(" ", "-").lower()
        article_upsert(org=org, slug=slug, title=topic.capitalize(), summary=f"How support teams handle {topic}.")
    for external_id, body in DEMO_DRAFTS.items():
        payload = DraftIn(
            external_id=f"demo/{external_id}",
            title=external_id.replace("-", " ").capitalize(),
            slug=external_id,
            body=body.replace("{source}", SOURCE),
            source_urls=[SOURCE],
        )
        draft_save(org=org, payload=payload)


# --- review history for the dashboards: graded items, a judge error, labels ------------------------------------


class DemoConversationJudge(HeuristicJudge):
    """The offline heuristic judge, with token usage estimated from the prompt (four characters a token) so the
    demo's cost figures have something to show. Its identity says so."""

    identity = JudgeIdentity("heuristic", "offline-heuristic-v1+demo-token-estimate", "heuristic-v1", 0.0)

    def judge_stage(self, **asked: Unpack[StageAsked]) -> StageJudgement:
        judgement = super().judge_stage(**asked)
        prompt = user_prompt(**asked)
        stage = asked["stage"]
        said = {message.id: str(message.content) for message in (*stage.context, *stage.messages)}
        confidences = {
            key: _stand_in_confidence(key, [said.get(mid, "") for mid in answer["message_ids"]])
            for key, answer in judgement.verdicts.items()
            if answer["verdict"] != UNKNOWN
        }
        return replace(
            judgement,
            usage=_estimate(prompt, completion=90),
            confidences=confidences,
            confidence_source=HEURISTIC,
        )


def _stand_in_confidence(key: str, cited: list[str]) -> float:
    """A confidence for the demo's offline judge, which has no probabilities: spread deterministically over 0.70 to
    0.99 by a hash of the check and the text of the messages it cites, recorded with the source `heuristic`. It says
    nothing about how sure anything was; what the demo shows is that only a certificate from people's verdicts lets
    such numbers route an item."""
    digest = hashlib.sha256("\n".join([key, *cited]).encode()).digest()
    return round(0.70 + 0.29 * int.from_bytes(digest[:4], "big") / 0xFFFFFFFF, 3)


class DemoDraftJudge(HeuristicDraftJudge):
    identity = JudgeIdentity("heuristic", "offline-heuristic-v1+demo-token-estimate", "heuristic-draft-v1", 0.0)

    def judge_draft(self, *, prompt: DraftPrompt) -> DraftJudgement:
        judgement = super().judge_draft(prompt=prompt)
        return replace(
            judgement, usage=_estimate(prompt.rubric + prompt.body + "".join(prompt.learnings), completion=140)
        )


class TimingOutJudge(DemoDraftJudge):
    """Stands in for a judge that timed out: the gate records the error, the next pass tries again."""

    def judge_draft(self, *, prompt: DraftPrompt) -> DraftJudgement:
        raise JudgeUnavailable("the judge did not answer within 60 s (a seeded demo timeout)")


def _estimate(text: str, *, completion: int) -> Usage:
    prompt_tokens = len(SYSTEM_PROMPT + text) // 4
    return Usage(prompt_tokens, completion, prompt_tokens + completion)


TIMED_OUT_DRAFT = "demo/judge-timed-out"


def grade_demo_items(org: Org) -> None:
    """Grade what has no review that counts, as a pass would, with the demo judges; the first try at one draft
    times out, so the dashboard has a judge error to show (the next grading pass grades it)."""
    now = timezone.now()
    if not Draft.objects.filter(org=org, external_id=TIMED_OUT_DRAFT).exists():
        body = DEMO_DRAFTS["clean-pass"].replace("Most support questions repeat.", "Repeat questions cost the most.")
        draft = draft_save(
            org=org,
            payload=DraftIn(external_id=TIMED_OUT_DRAFT, title="Judge timed out", slug="judge-timed-out",
                            body=body.replace("{source}", SOURCE), source_urls=[SOURCE]),
        )  # fmt: skip
        # Not logged as the gate logs a failure: `manage.py demo` lists it among the seeded examples.
        gate_log = logging.getLogger("grading.drafts.gate")
        gate_log.disabled = True
        try:
            draft_grade(draft_id=draft.pk, judge=TimingOutJudge())
        finally:
            gate_log.disabled = False
    for conversation_id in conversations_needing_grading(now).filter(org=org).values_list("pk", flat=True):
        conversation_grade(conversation_id=conversation_id, judge=DemoConversationJudge(), now=now)
    for draft_id in (
        drafts_needing_grading().filter(org=org).exclude(external_id=TIMED_OUT_DRAFT).values_list("pk", flat=True)
    ):
        draft_grade(draft_id=draft_id, judge=DemoDraftJudge())


# Labels from the team's spreadsheet: the item, what it judges, the verdict. Some agree with the machine, some not.
DEMO_LABELS = [
    ("bill-w1-0", "grounded", "pass"), ("bill-w1-0", "usable", "pass"), ("bill-w2-1", "grounded", "fail"),
    ("onbo-w3-2", "complete", "pass"), ("onbo-w4-1", "pass_fail", "pass"), ("docs-w2-0", "grounded", "pass"),
    ("docs-w5-3", "usable", "fail"), ("bill-w6-2", "complete", "fail"), ("demo/clean-pass", "pass_fail", "pass"),
    ("demo/banned-word", "pass_fail", "fail"), ("demo/band-intensifiers", "pass_fail", "fail"),
]  # fmt: skip


# A second labelling of the same items by another team, which reads two of them otherwise: the dashboard's people
# against people panel.
SECOND_OPINIONS = {("bill-w2-1", "grounded"): "pass", ("demo/band-intensifiers", "pass_fail"): "pass"}


def seed_labels(org: Org) -> None:
    for item, check, verdict in DEMO_LABELS:
        if (
            Conversation.objects.filter(org=org, external_id=item).exists()
            or Draft.objects.filter(org=org, external_id=item).exists()
        ):
            label = LabelIn(item=item, check=check, verdict=verdict, labeller="qa-team")
            label_record(org=org, label=label, source="file:qa-labels.csv")
            second = SECOND_OPINIONS.get((item, check), verdict)
            label = LabelIn(item=item, check=check, verdict=second, labeller="vendor-review")
            label_record(org=org, label=label, source="file:vendor-labels.csv")


# --- certified decisions: a labelling round, a target, its certificate, and today's conversations under it ----------

LABELLING_ROUND_WEEKS = range(2, WEEKS)  # the QA team labelled the conversations of the six older weeks
CERTIFY_AGREEMENT, CERTIFY_CONFIDENCE = 0.85, 0.90
TODAY_PER_APPLICATION = 4
OVERTURNED_BELOW = 0.80  # people read about half of the answers the demo judge was less sure of the other way


def seed_certification(org: Org) -> None:
    """The QA team's labelling round (`OVERTURNED_BELOW`), a target of 85% agreement with 90% confidence on the
    active conversation version, its certificate for the demo judge, and today's conversations graded under it:
    some decided alone, the others sent to people below the certified confidence; the audit sample drawn again, as
    the cycle would, over them too. The worker's own offline judge is another judge: its certificate needs people's
    verdicts on its own reviews."""
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    if version.certify_agreement is None:
        version = certify_target_set(
            version=version, actor=None, agreement=CERTIFY_AGREEMENT, confidence=CERTIFY_CONFIDENCE
        )
    labels_record(org=org, labels=_labelling_round(org, version), source="file:qa-round-2.csv")
    certificate_compute(version, judge_key=DemoConversationJudge.identity.key)
    rng, now = random.Random(11), timezone.now()
    for app_index, application in enumerate(APPLICATIONS):
        for slot in range(TODAY_PER_APPLICATION):
            started = now - timedelta(hours=slot + 1, minutes=app_index * 7)
            payload = _conversation(rng, application, f"{application[:4]}-today-{slot}", started, variant=slot)
            written = conversation_upsert(org=org, payload=ConversationIn.model_validate(payload)).conversation
            conversation_grade(conversation_id=written.pk, judge=DemoConversationJudge(), now=now)
    audit_sample_send(org=org, per_week=1, weeks=WEEKS, salt=settings.SAMPLING_SALT, now=now)


def _labelling_round(org: Org, version: CriteriaVersion) -> list[LabelIn]:
    required = [check for check in version.check_set().checks if check.required]
    older = tuple(f"-w{week}-" for week in LABELLING_ROUND_WEEKS)
    labels = []
    reviews = Review.objects.counting().filter(org=org, kind=ItemKind.CONVERSATION, criteria_version=version)
    for review in reviews.select_related("conversation").order_by("pk"):
        external_id = review.conversation.external_id
        if not any(week in external_id for week in older):
            continue
        for check in required:
            answer = review.checks.get(check.key, {}).get("verdict", UNKNOWN)
            confidence = review.confidences.get(check.key)
            if answer not in (Verdict.PASS, Verdict.FAIL) or confidence is None:
                continue
            overturned = (
                confidence < OVERTURNED_BELOW and hashlib.sha256(f"{external_id}:{check.key}".encode()).digest()[0] % 2
            )
            verdict = ({Verdict.PASS, Verdict.FAIL} - {answer}).pop() if overturned else answer
            labels.append(LabelIn(item=external_id, check=check.key, verdict=verdict, labeller="qa-round-2"))
    return labels
