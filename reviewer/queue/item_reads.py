"""The item page's data, from one read: `item_page` returns what an item page and its partials show one person at one
moment, typed by the item's kind (`DraftItemPage`, `ConversationItemPage`). The views build no context of their own,
and a refused decision re-renders from the same call, with the form as it was posted and the refusal. The same page,
`reading`, is a reader's (the dashboard's lists lead to it: `dashboard_item`): the evidence and what was
said of it, in a frame of its own with no place on the item and nothing to act on it with.

Each part of a page is read when the template first shows it (a cached property), so a partial reads only what it
shows: the actions after a claim or a refused decision, the lease line of the heartbeat. What blind review hides from
the reader (grading/reviews/blind.py) is decided here, for every part, never only in a template.

Below the pages, their parts: the answers of an item several people decide, the score identity, why a person is
needed, where a draft's score sits against threshold and band, and its sub-scores. A conversation's path as the user
saw it is reviewer/queue/conversation_evidence.py's; a draft's article is rendered by reviewer/queue/rendering.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import ClassVar

from django.contrib.auth.models import AbstractBaseUser
from django.utils.safestring import SafeString

from grading.checks.definitions import UNKNOWN, AnswerKind
from grading.checks.routing import METADATA, SAMPLE, THUMBS_DOWN
from grading.core.evidence import Verdict
from grading.core.outcomes import BAND, BELOW_CERTIFIED, JUDGE_CONTRADICTION, SPREAD, UNKNOWN_CHECK
from grading.models import Answer, AuditEvent, Conversation, Decision, Draft, ItemKind, Review, Route, for_people
from grading.models.audit import item_of
from grading.reviews.blind import Blind, review_blind
from reviewer.access import reaches_of
from reviewer.audit.display import Trail, trail_of
from reviewer.criteria.reads import ExampleTargets, example_targets
from reviewer.models import Pool, Role
from reviewer.queue import reads, rendering
from reviewer.queue.assignments import Reservation, assignable_people, assignments_of, reservation_of
from reviewer.queue.conversation_evidence import ConversationEvidence, conversation_evidence
from reviewer.queue.corrections import CorrectionPanel, correction_panel
from reviewer.queue.display import due_of, stale_reason
from reviewer.queue.expected_replies import ExpectedRepliesPart, expected_replies_part
from reviewer.queue.forms import AssignForm, ConversationDecisionForm, DecisionForm, decision_form


def item_page(
    review: Review,
    *,
    user: AbstractBaseUser,
    now: datetime,
    posted: DecisionForm | None = None,
    refusal: str = "",
    lease_message: str = "",
    reading: bool = False,
) -> DraftItemPage | ConversationItemPage:
    """The page of `review` (read within the person's reach: `reads.review_for_operator`) as `user` sees it at `now`:
    with the decision form as `posted` and why it was not recorded (`refusal`), or the heartbeat's `lease_message`.
    `reading`: a reader's page of any review they may read (`reads.review_for_reader`), with no form on it."""
    page = DraftItemPage if review.kind == ItemKind.DRAFT else ConversationItemPage
    return page(review, user, now, posted=posted, refusal=refusal, lease_message=lease_message, reading=reading)


@dataclass(frozen=True)
class Assigning:
    """A lead's assignment control: the form, and whether the item has an assignment by hand to undo."""

    form: AssignForm
    by_hand: bool


@dataclass(eq=False)
class ItemPage:
    """What both item pages and their partials show of `review` to `user` at `now`."""

    template: ClassVar[str]

    review: Review
    user: AbstractBaseUser
    now: datetime
    posted: DecisionForm | None = None  # the decision form as it was posted, shown again with its errors
    refusal: str = ""  # why a claim or a decision was not recorded
    lease_message: str = ""  # why the heartbeat could not extend the lease
    reading: bool = False  # a reader's page: no decision form, claim, lease or assignment, whatever their roles

    @property
    def frame(self) -> str:
        """The page around the evidence (the kind's template extends it): the queue's, or a reader's."""
        return "reviewer/dashboards/item.html" if self.reading else "reviewer/queue/item.html"

    @property
    def item_view(self) -> str:
        """The URL name of an item page like this one: where its links to the item's other reviews go."""
        return "dashboard_item" if self.reading else "review_detail"

    # --- the item's standing, and the person's place on it (the actions partial) ---

    @cached_property
    def metadata(self) -> dict[str, str]:
        """What produced the item (release, model, ...): shown beside its identity, never part of it."""
        item = self.review.conversation if self.review.conversation_id else self.review.draft
        return item.metadata

    @cached_property
    def still_counts(self) -> bool:
        return self.review.counts_now

    @cached_property
    def stale_reason(self) -> str:
        return "" if self.still_counts else stale_reason(self.review)

    @cached_property
    def decision(self) -> Decision | None:
        return reads.decision_of(self.review)

    @cached_property
    def decided_answers(self) -> list[tuple[str, str]]:
        """The decision's answer to each check, by the check's name in the review's version."""
        checks = self.decision.checks if self.decision is not None and isinstance(self.decision.checks, dict) else {}
        if not checks:
            return []
        # In the version's order: the stored JSON keeps its keys in an order of its own.
        version = self.review.criteria_version.check_set()
        return [(check.name, str(checks[check.key])) for check in version.checks if check.key in checks]

    @cached_property
    def slots(self) -> reads.Slots:
        return reads.slots_now(self.review, self.now)

    @property
    def answering(self) -> bool:
        """Giving one of several answers, not the item's decision."""
        return self.slots.several and not self.slots.answers_in

    @property
    def adjudicating(self) -> bool:
        """Settling answers that differed."""
        return self.slots.answers_in and self.decision is None

    @cached_property
    def no_place(self) -> tuple[str, str] | None:
        """Why this person cannot claim the item now (a refusal's code and message), or None."""
        return self.slots.place_for(self.user.pk)

    @cached_property
    def lease(self) -> reads.Lease:
        return reads.lease_of(reads.open_claim(self.review.pk, self.user), self.user, self.now)

    @property
    def deciding(self) -> bool:
        """The decision form is shown: the person holds the live lease on a review that still waits."""
        if self.reading:
            return False
        return self.lease.live and self.lease.mine and self.still_counts and self.decision is None

    @cached_property
    def kept(self) -> str:
        """What a refused decision carried, when the page can no longer show it in the form (the item changed, the
        lease ran out): the note and the answers as typed, so nothing the person wrote is lost."""
        if self.posted is None or self.deciding:
            return ""
        data = self.posted.data
        asked = self.posted.check_set.checks if isinstance(self.posted, ConversationDecisionForm) else []
        lines = [f"{check.name}: {data[check.key]}" for check in asked if data.get(check.key)]
        if data.get("outcome"):
            lines.insert(0, f"outcome: {data['outcome']}")
        if (data.get("note") or "").strip():
            lines.append(data["note"])
        return "\n".join(lines)

    @cached_property
    def form(self) -> DecisionForm:
        if self.posted is not None:
            return self.posted
        return decision_form(self.review, start_from=agreed_answers(self.review) if self.adjudicating else None)

    # --- what is hidden, and what the rest of the page shows ---

    @cached_property
    def _blind(self) -> Blind:
        return review_blind(self.review)

    @cached_property
    def blind(self) -> bool:
        """Everything anyone but the reader said is hidden: an audit item not yet decided."""
        return self._blind.verdicts

    @cached_property
    def answers(self) -> AnswersView | None:
        return answers_view(self.review, self.slots, self.user.pk, blind=self._blind)

    @cached_property
    def reservation(self) -> Reservation | None:
        return reservation_of(self.review, self.now) if self.decision is None else None

    @cached_property
    def _undecided(self) -> bool:
        """Still to be decided on this review: then it is due, and a lead may assign it."""
        return self.decision is None and self.still_counts

    @cached_property
    def due(self) -> dict | None:
        return due_of(self.review, self.now) if self._undecided else None

    @cached_property
    def assign(self) -> Assigning | None:
        """For a lead whose reach covers the item, while it waits."""
        review = self.review
        reach = reaches_of(self.user, Role.LEAD).get(review.org_id) if self._undecided and not self.reading else None
        if reach is None or not reach.covers(review.kind, review.application):
            return None
        pools = Pool.objects.filter(org_id=review.org_id).order_by("name")
        form = AssignForm(people=assignable_people(review), pools=pools)
        return Assigning(form, by_hand=review.pk in assignments_of([review.pk]))

    @cached_property
    def for_people(self) -> bool:
        """Routed to people, or picked by the audit sample; else the machine decided alone (only a reader's page
        shows such a review: the queue holds none)."""
        return for_people(route=self.review.route, audit=self.review.audit, sent=self.review.sent)

    @cached_property
    def why(self) -> str:
        """Why the machine handed the item to a person, who or which rule sent it, or what the machine decided alone
        (its verdict: hidden while blind)."""
        if self.blind:
            return ""
        if self.review.sent:
            return why_sent(self.review)
        return why_human(self.review) if self.for_people else why_machine(self.review)

    @cached_property
    def other_reviews(self) -> list[Review]:
        """The item's other reviews: they carry the machine's earlier verdicts, so none while blind."""
        return [] if self.blind else reads.other_reviews(self.review)

    @cached_property
    def targets(self) -> ExampleTargets | None:
        """For a criteria admin: make the decided item a worked example of a version not yet published."""
        return None if self.blind else example_targets(self.user, self._subject)

    @cached_property
    def trail(self) -> Trail:
        return trail_of(self.user, self._subject)

    @property
    def _subject(self) -> Draft | Conversation:
        return self.review.draft or self.review.conversation


@dataclass(eq=False)
class DraftItemPage(ItemPage):
    """A draft's page: the article as it would be published, with what the checks and the judge made of it."""

    template: ClassVar[str] = "reviewer/queue/draft_item.html"

    @cached_property
    def article(self) -> SafeString:
        """The article as judged, with the findings and the proof points marked; only the article while blind."""
        body = draft_body_for_review(self.review)
        if self.blind:
            return rendering.render_markdown(body, [])
        facts = self.memory.get("facts") or []
        proof_terms = [term for fact in facts if isinstance(fact, dict) for term in fact.get("proof_terms") or []]
        highlights = rendering.finding_highlights(self.review.findings) + rendering.proof_highlights(body, proof_terms)
        return rendering.render_markdown(body, highlights)

    @cached_property
    def scale(self) -> Scale | None:
        return None if self.blind else draft_scale(self.review)

    @cached_property
    def sub_scores(self) -> list[SubScore]:
        return [] if self.blind else sub_scores(self.review)

    @cached_property
    def findings(self) -> list[dict]:
        return [] if self.blind else [f for f in self.review.findings if isinstance(f, dict)]

    @cached_property
    def judge_issues(self) -> list[dict]:
        return [] if self.blind else [i for i in self.review.judge_issues if isinstance(i, dict)]

    @cached_property
    def repairs(self) -> dict | None:
        repairs = self.review.repairs
        return repairs if isinstance(repairs, dict) and not self.blind else None

    @cached_property
    def diff(self) -> list[rendering.DiffLine]:
        return rendering.diff_lines(str(self.repairs.get("diff", ""))) if self.repairs else []

    @cached_property
    def memory(self) -> dict:
        """The org memory the judge read."""
        memory = self.review.memory_used
        return memory if isinstance(memory, dict) and not self.blind else {}

    @cached_property
    def identity(self) -> list[IdentityRow]:
        return identity_rows(self.review)

    @cached_property
    def correction(self) -> CorrectionPanel | None:
        """The draft's corrections, and its editor for the person deciding it (reviewer/queue/corrections.py)."""
        body = draft_body_for_review(self.review)
        return correction_panel(review=self.review, user=self.user, deciding=self.deciding, blind=self._blind,
                                now=self.now, body=body, findings=self.findings)  # fmt: skip


@dataclass(eq=False)
class ConversationItemPage(ItemPage):
    """A conversation's page: its path as the user saw it, each check beside the messages it cites."""

    template: ClassVar[str] = "reviewer/queue/conversation_item.html"
    scale: ClassVar[None] = None  # a conversation has no score to place against a threshold

    @cached_property
    def _read(self) -> ConversationEvidence:
        """The conversation as read once for the page: its path shown, and the expected replies' reply points."""
        return conversation_evidence(self.review)

    @cached_property
    def evidence(self) -> ConversationEvidence:
        shown = self._read
        controls = self.expected_replies.controls  # "write the expected reply" under each assistant message
        for entry in shown.path:
            if entry.message is not None:
                entry.message.reply_control = controls.get(entry.message.id)
        if not self.blind:
            return shown
        # The path as the user saw it, without the checks or the messages the judge cited.
        for entry in shown.path:
            for message in [entry.message] if entry.message else entry.fold.messages:
                message.cited_by.clear()
        return replace(shown, checks=[])

    @cached_property
    def identity(self) -> list[IdentityRow]:
        return identity_rows(self.review, messages_on_path=self.evidence.path_length)

    @cached_property
    def expected_replies(self) -> ExpectedRepliesPart:
        """The expected replies the reader may see (blind as answers are), and the controls to write one."""
        return expected_replies_part(
            self.review, user=self.user, deciding=self.deciding, blind=self._blind, path=self._read.active_path
        )


# --- an item several people decide: the answers, blind until every place is answered --------------------------------


SHOWN = 50  # answers on one page: far more than any item gets (its places, over a few evidence changes)


@dataclass(frozen=True)
class ShownAnswer:
    person: str
    answered_at: datetime
    earlier: bool  # about earlier evidence (another review of the item): never compared with this review's
    fingerprint: str
    note: str


@dataclass(frozen=True)
class AnswerRow:
    """One thing the answers give (the outcome, or a check's verdict): each answer's value, marked if they differ."""

    name: str  # the check's name in the review's version, or outcome / summary
    values: list[str]
    differs: bool


@dataclass(frozen=True)
class AnswersView:
    slots: reads.Slots
    blind: bool  # places are open: only the viewer's own answers are shown
    answers: list[ShownAnswer]
    rows: list[AnswerRow]

    @property
    def adjudicating(self) -> bool:
        return self.slots.answers_in


def answers_view(review: Review, slots: reads.Slots, viewer_id: int, *, blind: Blind) -> AnswersView | None:
    """The answers part of the item page, or None for an item one person decides that nobody answered apart.

    Only the viewer's own while `blind` hides answers (grading/reviews/blind.py: places are open). Answers about the
    item's other reviews (earlier evidence, or other criteria) are listed after this review's, marked, and never
    counted among its differences.
    """
    subject = (
        {"review__draft_id": review.draft_id}
        if review.draft_id
        else {"review__conversation_id": review.conversation_id}
    )
    answers = list(
        Answer.objects.filter(**subject).select_related("person").order_by("-review__finished_at", "pk")[:SHOWN]
    )
    if not slots.several and not answers:
        return None
    answers = [a for a in answers if not blind.hides_answer(person_id=a.person_id, reader_id=viewer_id)]
    answers.sort(key=lambda answer: answer.review_id != review.pk)  # this review's first, in order given
    if review.kind == ItemKind.DRAFT:
        names = {"outcome": "outcome"}
    else:
        names = {"summary": "summary"} | {c.key: c.name for c in review.criteria_version.check_set().checks}
    rows = []
    for key, name in names.items():
        values = [_value(answer, key) for answer in answers]
        current = {value for answer, value in zip(answers, values, strict=True) if answer.review_id == review.pk}
        rows.append(AnswerRow(name, values, differs=len(current) > 1))
    shown = [
        ShownAnswer(
            person=answer.person.get_username(),
            answered_at=answer.answered_at,
            earlier=answer.review_id != review.pk,
            fingerprint=answer.fingerprint,
            note=answer.note,
        )
        for answer in answers
    ]
    return AnswersView(slots=slots, blind=blind.answers, answers=shown, rows=rows)


def agreed_answers(review: Review) -> dict[str, str]:
    """The checks every answer on `review` gives the same answer to: where an adjudicator's form starts, so they
    settle only what the answers differ on."""
    given = [a for a in Answer.objects.filter(review=review).values_list("checks", flat=True) if isinstance(a, dict)]
    if not given:
        return {}
    return {key: value for key, value in given[0].items() if all(other.get(key) == value for other in given[1:])}


def _value(answer: Answer, name: str) -> str:
    if name in ("outcome", "summary"):
        return answer.get_outcome_display()
    checks = answer.checks if isinstance(answer.checks, dict) else {}
    return str(checks.get(name, "–"))


# --- the score identity -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IdentityRow:
    label: str
    value: str


def judge_label(judge: dict) -> str:
    """`cheap · openai · gpt-4.1-mini · prompt 5be0c2d1 · t=0` from the judge identity on a review: the configured
    judge's name first (reviews from before judges had names have none)."""
    if not isinstance(judge, dict):
        return str(judge)
    parts = [str(judge[key]) for key in ("name", "backend", "model") if judge.get(key)]
    if judge.get("prompt_hash"):  # whole: a backend may name its prompt in words ("heuristic"), not a hex digest
        parts.append(f"prompt {judge['prompt_hash']}")
    if "temperature" in judge:
        parts.append(f"t={judge['temperature']:g}" if isinstance(judge["temperature"], int | float) else "")
    known = {"name", "backend", "model", "prompt_hash", "temperature"}
    parts += [f"{key}={value}" for key, value in sorted(judge.items()) if key not in known]
    return " · ".join(part for part in parts if part)


def identity_rows(review: Review, *, messages_on_path: int | None = None) -> list[IdentityRow]:
    fingerprint = review.fingerprint
    if messages_on_path is not None:
        fingerprint += f" ({messages_on_path} messages on the path, nothing truncated)"
    rows = [IdentityRow("fingerprint", fingerprint)]
    if review.criteria_fingerprint:  # reviews from before it was recorded have none
        rows.append(IdentityRow("criteria fingerprint", review.criteria_fingerprint))
    rows.append(IdentityRow("judge", judge_label(review.judge)))
    if review.kind == ItemKind.DRAFT:
        rows.append(IdentityRow("memory", review.memory_snapshot or "none read"))
    rows.append(IdentityRow("judged at", f"{review.finished_at:%d %b %Y %H:%M:%S} UTC"))
    stages = review.stages
    if review.kind == ItemKind.CONVERSATION:
        rows.append(IdentityRow("stages", "1 (the whole path in one call)" if stages == 1 else f"{stages}"))
    if review.confidences:
        said = ", ".join(f"{key.replace('_', ' ')} {p:.2f}" for key, p in review.confidences.items())
        rows.append(IdentityRow("confidence", f"{said} (from {review.confidence_source or 'unknown'})"))
    if review.certificate_id is not None:
        certificate = review.certificate
        rows.append(
            IdentityRow(
                "routed under",
                f"certificate {certificate.pk} of {certificate.computed_at:%d %b %Y %H:%M} UTC: agreement "
                f"{certificate.agreement:.0%} with {certificate.confidence:.0%} confidence, "
                f"{certificate.labels} labels",
            )
        )
    usage = review.usage or {}
    # A judge call reads at least its prompt: no tokens in means the usage was not reported (a pipeline's own judge
    # graded through the API), which the page says by leaving the row out rather than printing "0 in · 0 out".
    if usage.get("prompt_tokens"):
        rows.append(
            IdentityRow("tokens", f"{usage.get('prompt_tokens', 0):,} in · {usage.get('completion_tokens', 0):,} out")
        )
    return rows


# --- why a person is needed, and where a draft's score sits ---------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """Where the score sits on the 1-10 scale, in percent of the width, for a small SVG."""

    band_start: float
    threshold: float
    score: float | None
    spread_from: float | None
    spread_to: float | None
    band_start_value: float
    threshold_value: float
    band_value: float

    @property
    def band_width(self) -> float:
        return round(self.threshold - self.band_start, 2)

    @property
    def pass_width(self) -> float:
        return round(100.0 - self.threshold, 2)

    @property
    def spread_width(self) -> float:
        return round((self.spread_to or 0.0) - (self.spread_from or 0.0), 2)


def _percent(value: float) -> float:
    return round(max(0.0, min(100.0, (value - 1.0) / 9.0 * 100.0)), 2)


def draft_scale(review: Review) -> Scale:
    rules = review.criteria_version.draft_rules()
    threshold, band = rules.threshold, rules.band
    spread_from = spread_to = None
    center = review.judge_score if review.judge_score is not None else review.score
    if review.spread is not None and center is not None:
        spread_from, spread_to = _percent(center - review.spread), _percent(center + review.spread)
    return Scale(
        band_start=_percent(threshold - band),
        threshold=_percent(threshold),
        score=_percent(review.score) if review.score is not None else None,
        spread_from=spread_from,
        spread_to=spread_to,
        band_start_value=threshold - band,
        threshold_value=threshold,
        band_value=band,
    )


RULE_WORDS = {
    THUMBS_DOWN: "a user's thumbs is down on the conversation",
    METADATA: "its metadata matched",
    SAMPLE: "it fell in the sample the rule takes of its slice",
}


def why_sent(review: Review) -> str:
    """Which routing rule sent the item to people, or who sent it and why as the trail keeps it (`review_send`); and
    what the machine had decided."""
    machine = f"The machine {'passed' if review.route == Route.PASS else 'failed'} it."
    if review.sent in RULE_WORDS:
        version = review.criteria_version.number
        return f"A routing rule of criteria v{version} sent it to people: {RULE_WORDS[review.sent]}. {machine}"
    kind, item_id = item_of(review)
    event = (
        AuditEvent.objects.filter(org_id=review.org_id, action="review.send", item_kind=kind, item_id=item_id)
        .select_related("actor", "api_key")
        .order_by("-pk")
        .first()
    )
    if event is None:  # the trail was pruned: the review still says a person sent it
        return f"A person sent it to review. {machine}"
    who = "a former user"
    if event.actor is not None:
        who = event.actor.get_username()
    elif event.api_key is not None:
        who = f"the API key {event.api_key.name}"
    return f"Sent to review by {who}: {event.detail.get('reason', '')} {machine}"


def why_human(review: Review) -> str:
    """Why the machine handed this item to a person, in one or two sentences."""
    if review.reason == BELOW_CERTIFIED:
        return _below_certified(review)
    if review.kind == ItemKind.CONVERSATION:
        if review.reason == UNKNOWN_CHECK:
            open_checks = [
                check.name
                for check in review.criteria_version.check_set().checks
                if check.required and check.outcome(str((review.checks.get(check.key) or {}).get("verdict"))) == UNKNOWN
            ]
            named = f" ({', '.join(open_checks)})" if open_checks else ""
            return (
                f"A required check came back unknown{named}: the recorded evidence leaves it open. "
                "Unknowns never count in the quality number."
            )
        return review.detail or "The machine could not decide on its own."
    rules = review.criteria_version.draft_rules()
    threshold, band = rules.threshold, rules.band
    score = f"{review.score:.1f}" if review.score is not None else "no score"
    if review.reason == BAND:
        return (
            f"Score {score} against threshold {threshold:.1f}: inside the marginal band {threshold - band:.1f}–"
            f"{threshold:.1f}. No remaining hard finding."
        )
    if review.reason == JUDGE_CONTRADICTION:
        said = "pass" if review.judge_passed else "fail"
        return f"The judge said {said}, but its own score of {score} against threshold {threshold:.1f} says otherwise."
    if review.reason == SPREAD and review.spread is not None:
        center = review.judge_score if review.judge_score is not None else review.score or 0
        return (
            f"The judge is unsure: its score {center:.1f} spreads from {center - review.spread:.1f} to "
            f"{center + review.spread:.1f}, across the threshold {threshold:.1f}."
        )
    return review.detail or "The machine could not decide on its own."


def why_machine(review: Review) -> str:
    """What the machine made of an item it did not hand to a person, in a sentence."""
    if review.route == Route.ERROR:
        return f"No verdict: the judge could not grade it ({review.reason}). {review.detail}".strip()
    if review.route == Route.NOT_SCORABLE:
        return f"Not scorable, so no judge read it: {review.detail or review.reason}"
    verdict = "passed" if review.route == Route.PASS else "failed"
    if review.kind == ItemKind.CONVERSATION:
        failed = [
            check.name
            for check in review.criteria_version.check_set().checks
            if check.outcome(str((review.checks.get(check.key) or {}).get("verdict"))) == Verdict.FAIL
        ]
        named = f": {', '.join(failed)} failed" if failed and review.route == Route.FAIL else ""
        return f"The machine {verdict} it without a person{named}."
    findings = [str(f.get("code", "")) for f in review.findings if isinstance(f, dict)]
    if findings and review.route == Route.FAIL:
        return f"The gate failed it without a person: the hard findings ({', '.join(findings)}) veto the judge."
    threshold = review.criteria_version.draft_rules().threshold
    score = f"{review.score:.1f}" if review.score is not None else "no score"
    return f"The gate {verdict} it without a person: score {score} against threshold {threshold:.1f}."


def _below_certified(review: Review) -> str:
    certificate = review.certificate
    if certificate is None:
        return (
            "These criteria let the machine decide alone only where people's verdicts certify that it agrees with "
            "them; no certificate stands yet (too few audited items), so every item waits for a person."
        )
    below = []
    for key, part in certificate.checks.items():
        threshold, confidence = part.get("threshold"), review.confidences.get(key)
        if threshold is None or confidence is None or confidence < threshold:
            said = "none" if confidence is None else f"{confidence:.2f}"
            needed = "no certified threshold" if threshold is None else f"the certified {threshold:.2f}"
            below.append(f"{key.replace('_', ' ')}: {said} against {needed}")
    return (
        f"The judge's confidence is below what people's verdicts certify (agreement {certificate.agreement:.0%} "
        f"with {certificate.confidence:.0%} confidence): {'; '.join(below)}."
    )


@dataclass(frozen=True)
class SubScore:
    label: str
    value: int | float | None
    percent: float
    question: str
    guidance: list[tuple[str, str]]  # (answer, what it means) as the version words it


def sub_scores(review: Review) -> list[SubScore]:
    """The judge's score on each score check of the draft's criteria version, placed on the check's scale."""
    scores = review.sub_scores or {}
    rows = []
    for check in review.criteria_version.check_set().checks:
        if check.kind != AnswerKind.SCORE:
            continue
        value = scores.get(check.key)
        percent = round(max(0.0, min(1.0, value / check.scale)) * 100.0, 1) if isinstance(value, int | float) else 0.0
        rows.append(SubScore(check.name, value, percent, check.question, check.guidance_in_order()))
    return rows


def draft_body_for_review(review: Review) -> str:
    """The body the review's findings point into: the repaired one when repairs ran, else the draft's."""
    repairs = review.repairs or {}
    body = repairs.get("body") if isinstance(repairs, dict) else None
    return body if isinstance(body, str) else review.draft.body
