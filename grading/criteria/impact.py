"""What a criteria version would change, read before anyone pays for it: the diff of two versions, the
preview of a draft version's deterministic checks over recent drafts (no judge calls), and the plan of a publication
(what goes stale, the judge calls and tokens the re-grade takes, when it runs). Reads only, apart from
`criteria_publish_planned`, which publishes what the plan was made for."""

import difflib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, Sum
from django.utils import timezone

from grading.checks.budget import ChecksOverBudget, checks_budget
from grading.checks.checks import Finding, check_draft
from grading.checks.definitions import (
    AnswerKind,
    CheckDefinition,
    CheckSet,
    ConversationRule,
    PatternRule,
    PhrasesRule,
    ToolCalledRule,
)
from grading.checks.routing import judge_sample_text, routing_text
from grading.checks.rules import DraftRules
from grading.drafts.gate import merge_verdict
from grading.models import (
    UNGRADED,
    ApiKey,
    Conversation,
    CriteriaVersion,
    Draft,
    GradingRun,
    ItemKind,
    MemoryItem,
    Org,
    Review,
    ReviewState,
    Route,
)
from grading.passes.planner import (
    PassResult,
    conversations_needing_grading,
    drafts_needing_grading,
    grading_pass,
    went_quiet,
)
from grading.reviews.memory import MemoryContext, MemoryEntry, active_memory
from grading.reviews.spend import Estimate, judge_prices
from grading.reviews.versions import criteria_publish

# --- the diff -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RubricRow:
    """One row of the side-by-side rubric diff: `tag` is equal, replace, delete (old only) or insert (new only)."""

    tag: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class ListChange:
    label: str
    added: list[str]
    removed: list[str]


@dataclass(frozen=True)
class ValueChange:
    label: str
    old: str
    new: str


@dataclass(frozen=True)
class CriteriaDiff:
    old: CriteriaVersion
    new: CriteriaVersion
    rubric: list[RubricRow]
    lists: list[ListChange]  # only the lists that changed
    values: list[ValueChange]  # only the values that changed
    check_lists: list[ListChange] = field(default_factory=list)  # checks added and retired, rules per check
    check_values: list[ValueChange] = field(default_factory=list)  # what changed of a check both versions ask

    @property
    def rubric_changed(self) -> bool:
        return any(row.tag != "equal" for row in self.rubric)

    @property
    def unchanged(self) -> bool:
        return not (self.rubric_changed or self.lists or self.values or self.check_lists or self.check_values)


def _characters(rules: DraftRules) -> list[str]:
    return [f"{c.sequence!r} ({c.name}) becomes {c.substitute!r}" for c in rules.banned_characters.characters]


def _components(rules: DraftRules) -> list[str]:
    return [f"{c.name}: {c.template} ({c.placement.replace('_', ' ')})" for c in rules.components.required]


# Every part of the rules document, in the editor's order: lists are diffed as entries, the rest as values.
_LISTS = (
    ("Banned words", lambda r: r.banned_words.terms),
    ("Filler phrases", lambda r: r.filler_phrases.terms),
    ("Banned characters", _characters),
    ("H2 openings", lambda r: r.h2.openings),
    ("Required components", _components),
)
_VALUES = (
    ("Threshold", lambda r: f"{r.threshold:g}"),
    ("Band", lambda r: f"{r.band:g}"),
    ("Maximum judge issues", lambda r: str(r.max_judge_issues)),
    ("Banned characters are", lambda r: r.banned_characters.severity),
    ("H2 share phrased as questions", lambda r: f"{r.h2.min_ratio:.0%}"),
    ("H2 minimum count", lambda r: str(r.h2.min_count)),
    ("Internal-link pattern", lambda r: r.internal_links.pattern),
    ("Internal links minimum", lambda r: str(r.internal_links.minimum)),
    ("Related-reading label", lambda r: r.internal_links.related_reading_label),
    ("Missing internal links are", lambda r: r.internal_links.severity),
    ("Missing components are", lambda r: r.components.severity),
    ("Citations minimum", lambda r: str(r.citation.minimum)),
    ("Sources required", lambda r: "yes" if r.citation.require_sources else "no"),
    ("Proof points minimum", lambda r: str(r.proof_points.minimum)),
    ("Repair banned characters", lambda r: "on" if r.repair.banned_character else "off"),
    ("Repair missing internal links", lambda r: "on" if r.repair.internal_links_missing else "off"),
    ("Repair missing components", lambda r: "on" if r.repair.component_missing else "off"),
)


def check_text(check: CheckDefinition) -> str:
    """A check in one line: its key, name and answer kind."""
    kind = {
        AnswerKind.VERDICT: "pass / fail",
        AnswerKind.CATEGORY: f"one of {', '.join(check.categories)}",
        AnswerKind.SCORE: f"1 to {check.scale}",
    }[check.kind]
    return f"{check.key} ({check.name}): {kind}{'' if check.required else ', not required'}"


def rule_text(rule: ConversationRule) -> str:
    """A rule in words: what it looks for, where, and what a match sets."""
    where = " or ".join(f"{scope.value} messages" for scope in getattr(rule, "scopes", []))
    if isinstance(rule, PhrasesRule):
        looks = f"{'any of ' if len(rule.phrases) > 1 else ''}{', '.join(repr(p) for p in rule.phrases)} in {where}"
    elif isinstance(rule, PatternRule):
        looks = f"pattern {rule.pattern!r}{' (case-sensitive)' if rule.case_sensitive else ''} in {where}"
    elif isinstance(rule, ToolCalledRule):
        looks = f"the tool {rule.tool!r} {'never called' if rule.must else 'called'}"
    else:
        looks = "a tool call with no result"
    return f"{looks} sets {rule.sets}" + (f" ({rule.note})" if rule.note else "")


# What is compared of a check both versions ask, in the editor's order.
_CHECK_VALUES = (
    ("name", lambda c: c.name),
    ("question", lambda c: c.question),
    ("answer", lambda c: c.kind.value),
    ("required", lambda c: "yes" if c.required else "no"),
    ("categories", lambda c: ", ".join(c.categories)),
    ("categories that pass", lambda c: ", ".join(c.passing)),
    ("scale", lambda c: f"1 to {c.scale}" if c.kind == AnswerKind.SCORE else ""),
    ("lowest passing score", lambda c: "" if c.pass_from is None else str(c.pass_from)),
)


def _checks_diff(old: CheckSet, new: CheckSet) -> tuple[list[ListChange], list[ValueChange]]:
    """Checks added and retired (by key), the order of those both ask, and per check both ask each value, each
    answer's guidance and its rules (as entries added and removed)."""
    before, after = {c.key: c for c in old.checks}, {c.key: c for c in new.checks}
    lists, values = [], []
    added = [check_text(c) for c in new.checks if c.key not in before]
    retired = [check_text(c) for c in old.checks if c.key not in after]
    if added or retired:
        lists.append(ListChange("Checks", added, retired))
    kept_before = [key for key in old.keys if key in after]
    kept_after = [key for key in new.keys if key in before]
    if kept_before != kept_after:
        values.append(ValueChange("Order of the checks", ", ".join(kept_before), ", ".join(kept_after)))
    for key in kept_after:
        was, now = before[key], after[key]
        for label, value in _CHECK_VALUES:
            if value(was) != value(now):
                values.append(ValueChange(f"{key}: {label}", value(was), value(now)))
        for answer in dict.fromkeys([*was.answers, *now.answers]):
            if was.guidance.get(answer, "") != now.guidance.get(answer, ""):
                values.append(
                    ValueChange(
                        f"{key}: guidance for {answer}", was.guidance.get(answer, ""), now.guidance.get(answer, "")
                    )
                )
        rules_before, rules_after = [rule_text(r) for r in was.rules], [rule_text(r) for r in now.rules]
        rules_added = [r for r in rules_after if r not in rules_before]
        rules_removed = [r for r in rules_before if r not in rules_after]
        if rules_added or rules_removed:
            lists.append(ListChange(f"{key}: rules", rules_added, rules_removed))
    if old.judge_after_rule_fail != new.judge_after_rule_fail:
        values.append(
            ValueChange(
                "Judge asked after a rule failed a required check",
                "yes" if old.judge_after_rule_fail else "no",
                "yes" if new.judge_after_rule_fail else "no",
            )
        )
    return lists, values


def criteria_diff(*, old: CriteriaVersion, new: CriteriaVersion) -> CriteriaDiff:
    """Two versions of one kind side by side: the rubric as a line diff, each rule list as the entries added and
    removed, every other rule whose value changed, and the checks each asks."""
    if old.kind != new.kind:
        raise ValueError(f"{old} and {new} are of different kinds")
    lists: list[ListChange] = []
    values: list[ValueChange] = []
    if old.kind == ItemKind.DRAFT:
        old_rules, new_rules = old.draft_rules(), new.draft_rules()
        for label, entries in _LISTS:
            before, after = entries(old_rules), entries(new_rules)
            added = [e for e in after if e not in set(before)]
            removed = [e for e in before if e not in set(after)]
            if added or removed:
                lists.append(ListChange(label, added, removed))
        for label, value in _VALUES:
            if value(old_rules) != value(new_rules):
                values.append(ValueChange(label, value(old_rules), value(new_rules)))
    rules_before, rules_after = [routing_text(r) for r in old.routing], [routing_text(r) for r in new.routing]
    added = [r for r in rules_after if r not in rules_before]
    removed = [r for r in rules_before if r not in rules_after]
    if added or removed:
        lists.append(ListChange("Routing rules", added, removed))
    elif rules_before != rules_after:  # the first rule that matches names itself: their order is part of them
        values.append(ValueChange("Order of the routing rules", "; ".join(rules_before), "; ".join(rules_after)))
    shares_before = [judge_sample_text(share) for share in old.judge_sample]
    shares_after = [judge_sample_text(share) for share in new.judge_sample]
    if shares_before != shares_after:
        values.append(ValueChange("Judge sampling", "; ".join(shares_before) or "every conversation",
                                  "; ".join(shares_after) or "every conversation"))  # fmt: skip
    check_lists, check_values = _checks_diff(old.check_set(), new.check_set())
    return CriteriaDiff(old, new, list(_rubric_rows(old.rubric, new.rubric)), lists, values, check_lists, check_values)


def _rubric_rows(old: str, new: str) -> Iterator[RubricRow]:
    before, after = old.splitlines(), new.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        left, right = before[i1:i2], after[j1:j2]
        for index in range(max(len(left), len(right))):
            yield RubricRow(
                tag if tag != "replace" or (index < len(left) and index < len(right)) else _side(index, left),
                left[index] if index < len(left) else None,
                right[index] if index < len(right) else None,
            )


def _side(index: int, left: list[str]) -> str:
    """A replace block with more lines on one side: the extra rows are deletions or insertions."""
    return "delete" if index < len(left) else "insert"


# --- the preview ----------------------------------------------------------------------------------------------------

PREVIEW_DEFAULT = 200
PREVIEW_MAX = 2_000


PREVIEW_CHUNK = 500  # drafts read at once: bodies are large, and only the drafts that change are kept


@dataclass(frozen=True)
class PreviewDraft:
    """What a preview row shows of its draft (the body is checked and let go)."""

    pk: int
    external_id: str
    slug: str
    title: str


@dataclass(frozen=True)
class PreviewRow:
    draft: PreviewDraft
    review: Review
    new_findings: list[dict]  # what the draft version finds that the current review does not list
    gone_findings: list[dict]  # what the current review lists that the draft version no longer finds
    route_before: str
    route_after: str | None  # None: no judge score is recorded to merge with, so only the judge can tell

    @property
    def route_changed(self) -> bool:
        return self.route_after is not None and self.route_after != self.route_before


@dataclass(frozen=True)
class Preview:
    version: CriteriaVersion
    asked: int  # the N of "the last N drafts"
    read: int  # drafts read (the org may have fewer)
    compared: int  # of those, drafts with a current review to compare with
    rows: list[PreviewRow]  # the drafts whose outcome would change, newest first
    unchecked: int = 0  # of the compared, drafts whose checks ran past a CPU budget: not compared after all

    @property
    def route_changes(self) -> int:
        return sum(row.route_changed for row in self.rows)

    @property
    def unchanged(self) -> int:
        return self.compared - self.unchecked - len(self.rows)


_PREVIEW_REVIEW_FIELDS = (
    "pk", "draft_id", "criteria_version_id", "route", "reason", "findings", "repairs", "judge_score", "judge_passed",
    "spread",
)  # fmt: skip


def criteria_preview(*, version: CriteriaVersion, limit: int = PREVIEW_DEFAULT) -> Preview:
    """Run the deterministic checks of `version` over the org's last `limit` drafts and compare with their current
    reviews, with no judge call.

    1. Read the drafts newest first, PREVIEW_CHUNK at a time with their current reviews (two queries a chunk), and
       the org's proof terms once.
    2. Check each body once under the version's rules (`check_draft`, as the gate does).
    3. The gate repairs fixable findings before the judge reads a draft, and its review lists what remains: so
       the preview counts a fixable finding as repaired when the version allows its repair, unless the current
       review shows that repair cannot be made for this draft (no related article left to link, a component that
       would land in code): it records the repair as skipped, or lists the finding although its own version
       allowed the repair.
    4. New findings and findings gone are compared by code and subject (the term, character or component).
    5. The route it would take: the current review's judge score (and its pass verdict and spread) merged with
       the remaining findings under the version's threshold and band, as the gate merges. A judge reading a
       changed rubric may score differently: that is what a trial run measures.

    The checks run inside the web request: each draft's under the gate's budget (CHECKS_CPU_BUDGET_SECONDS), and
    all of them under PREVIEW_CPU_BUDGET_SECONDS together. A draft past either is counted as unchecked.
    """
    rules = version.draft_rules()
    proof_terms = _proof_terms(version.org)
    newest = Draft.objects.filter(org_id=version.org_id).order_by("-updated_at", "-pk")
    ids = list(newest.values_list("pk", flat=True)[:limit])
    reviewed_under: dict[int, DraftRules] = {}
    rows, compared, unchecked = [], 0, 0
    preview_deadline = time.thread_time() + settings.PREVIEW_CPU_BUDGET_SECONDS
    for start in range(0, len(ids), PREVIEW_CHUNK):
        chunk = ids[start : start + PREVIEW_CHUNK]
        drafts = Draft.objects.filter(pk__in=chunk).only("pk", "external_id", "slug", "title", "body", "source_urls")
        by_id = {draft.pk: draft for draft in drafts}
        reviews = {
            review.draft_id: review
            for review in Review.objects.counting()
            .filter(draft_id__in=chunk)
            .select_related("decision")  # what people said, beside the route, where they decided
            .only(*_PREVIEW_REVIEW_FIELDS, "decision__id", "decision__outcome")
        }
        compared += len(reviews)
        for draft_id in chunk:
            draft, review = by_id.get(draft_id), reviews.get(draft_id)
            if draft is None or review is None:  # deleted since the ids were read, or nothing to compare with
                continue
            if review.criteria_version_id not in reviewed_under:
                reviewed_under[review.criteria_version_id] = CriteriaVersion.objects.get(
                    pk=review.criteria_version_id
                ).draft_rules()
            budget = min(settings.CHECKS_CPU_BUDGET_SECONDS, preview_deadline - time.thread_time())
            if budget <= 0:  # the preview's budget is spent: the rest is not checked at all
                unchecked += 1
                continue
            try:
                with checks_budget(budget):
                    findings = check_draft(
                        body=draft.body, rules=rules, source_urls=draft.source_urls, proof_terms=proof_terms
                    )
            except ChecksOverBudget:
                unchecked += 1
                continue
            row = preview_row(
                draft=PreviewDraft(draft.pk, draft.external_id, draft.slug, draft.title),
                review=review,
                findings=findings,
                rules=rules,
                reviewed_under=reviewed_under[review.criteria_version_id],
            )
            if row.new_findings or row.gone_findings or row.route_changed:
                rows.append(row)
    return Preview(version=version, asked=limit, read=len(ids), compared=compared, rows=rows, unchecked=unchecked)


def _proof_terms(org: Org) -> list[str]:
    """The org's proof terms as the gate reads them (the facts part of its memory), with no embedding: the facts
    do not depend on the draft."""
    facts = active_memory(org, MemoryItem.Kind.FACT).order_by("pk")
    entries = tuple(MemoryEntry(f.pk, f.kind, f.text, tuple(f.proof_terms)) for f in facts)
    return MemoryContext(embedder="", learnings=(), strategy=None, facts=entries).proof_terms


def preview_row(
    *, draft: PreviewDraft, review: Review, findings: list[Finding], rules: DraftRules, reviewed_under: DraftRules
) -> PreviewRow:
    """Steps 3-5 of `criteria_preview` for one draft, the findings of its body under `rules`, and the rules its
    current review was graded under."""
    unrepairable = {s.get("code") for s in (review.repairs or {}).get("skipped", []) if isinstance(s, dict)} | {
        f.get("code")
        for f in review.findings
        if isinstance(f, dict) and f.get("severity") == "fixable" and reviewed_under.repair.allows(str(f.get("code")))
    }
    remaining = [
        f
        for f in findings
        if not (f.severity == "fixable" and rules.repair.allows(f.code) and f.code not in unrepairable)
    ]
    before = {_key(f): f for f in review.findings if isinstance(f, dict)}
    after = {(f.code, f.subject): f for f in remaining}
    route_after = None
    if review.judge_score is not None:
        route_after = merge_verdict(
            judge_score=review.judge_score,
            judge_passed=bool(review.judge_passed),
            spread=review.spread,
            findings=remaining,
            threshold=rules.threshold,
            band=rules.band,
        ).route
    elif remaining:
        route_after = Route.FAIL  # a remaining finding fails a draft whatever the judge says
    return PreviewRow(
        draft=draft,
        review=review,
        new_findings=[f.as_json() for key, f in after.items() if key not in before],
        gone_findings=[f for key, f in before.items() if key not in after],
        route_before=review.route,
        route_after=route_after,
    )


def _key(finding: dict) -> tuple[str, str]:
    return str(finding.get("code", "")), str(finding.get("subject", ""))


# --- the publication plan -------------------------------------------------------------------------------------------

TOKEN_BASIS_REVIEWS = 200  # the estimate's window: the org's latest judged reviews of the kind


@dataclass(frozen=True)
class StaleGroup:
    application: str  # conversations: the application; drafts: "drafts"
    reviews: int  # current reviews that stop counting
    judge_calls: int  # the stages they recorded (not-scorable ones call no judge)


@dataclass(frozen=True)
class TokenBasis:
    reviews: int  # how many past reviews the mean is over (at most TOKEN_BASIS_REVIEWS)
    mean_total: float
    mean_prompt: float
    mean_completion: float


@dataclass(frozen=True)
class PublishPlan:
    version: CriteriaVersion
    active: CriteriaVersion | None
    groups: list[StaleGroup]
    items: int  # items of the kind in the org: after publishing, every one needs grading under the version
    waiting: int  # of them, items with no current review now (never graded, errors, backlog)
    judge_calls: int
    judged_items: int  # items whose re-grade calls the judge (not-scorable ones do not)
    decided: int  # of the reviews made stale, those people decided: their decisions stop counting with them
    basis: TokenBasis | None  # None: no past review of the kind recorded its usage
    cap: int  # GRADING_PASS_CAP: judge tasks one pass may enqueue, both kinds and every org together
    ahead: int  # waiting items every pass takes before these: conversations go before drafts
    competing: int  # waiting items of the same kind in other orgs, taken oldest first together with these
    last_pass: GradingRun | None
    made_at: datetime

    @property
    def stale(self) -> int:
        return sum(group.reviews for group in self.groups)

    @property
    def judge_changes(self) -> bool:
        """The version names another judge than the active one's: every item is re-graded by that judge."""
        return self.active is not None and self.active.judge != self.version.judge

    @property
    def judge_configured(self) -> bool:
        """Publishing is refused when the version's judge is not configured (criteria_publish)."""
        return self.version.judge in settings.JUDGES

    @property
    def tokens(self) -> int | None:
        return round(self.basis.mean_total * self.judged_items) if self.basis else None

    @property
    def estimate(self) -> Estimate:
        """The re-grade's spend, the plan's one estimate: shown, and checked against the spend caps. Its cost is the
        basis's prompt and completion tokens at the prices of the version's judge (the one that re-grades)."""
        prices = judge_prices(self.version.judge)
        if self.basis is None or prices is None:
            return Estimate(self.judge_calls, self.tokens, None)
        cost = prices.cost_micros(
            prompt_tokens=round(self.basis.mean_prompt * self.judged_items),
            completion_tokens=round(self.basis.mean_completion * self.judged_items),
        )
        return Estimate(self.judge_calls, self.tokens, cost)

    @property
    def next_pass_takes_all(self) -> bool:
        return self.ahead + self.competing + self.items <= self.cap

    @property
    def next_pass_takes_at_least(self) -> int:
        """Of these items, the next pass enqueues at least this many (all of them when everything fits the cap;
        otherwise items of other orgs may be older and go first)."""
        if self.next_pass_takes_all:
            return self.items
        return max(0, min(self.items, self.cap - self.ahead - self.competing))

    @property
    def next_pass_takes_at_most(self) -> int:
        return max(0, min(self.items, self.cap - self.ahead))

    @property
    def left_after_next_pass(self) -> int:
        """Of these items, at most this many wait for later passes."""
        return self.items - self.next_pass_takes_at_least

    @property
    def backlog_after(self) -> int:
        """Everything waiting once this is published, every org and kind: what the passes work through."""
        return self.items + self.ahead + self.competing

    @property
    def passes(self) -> int:
        """Hourly passes until every one of these items is enqueued, at worst, if nothing else arrives."""
        return math.ceil(self.backlog_after / self.cap) if self.items else 0


def publish_plan(*, version: CriteriaVersion, now: datetime | None = None) -> PublishPlan:
    """What publishing `version` would do, counted from the rows as they are.

    1. Every current review of the kind in the org stops counting (ReviewState): counted per application, with
       the stages each recorded, which is how many judge calls its re-grade takes while the evidence stays the
       same. Not-scorable reviews take none, unless the conversation was in progress and has gone quiet (one).
    2. After publishing, no item of the kind in the org has a current review, so the passes grade all of them:
       those with a review now and those already waiting (estimated at one judge call each).
    3. Tokens: the mean usage of the org's latest TOKEN_BASIS_REVIEWS judged reviews of the kind, times the items
       whose re-grade calls the judge. The basis is part of the plan.
    4. When: a pass enqueues at most GRADING_PASS_CAP tasks, conversations before drafts, each kind oldest first
       across every org; what else waits is counted with the planner's own queries.
    """
    now = now or timezone.now()
    org_id, kind = version.org_id, version.kind
    active = CriteriaVersion.objects.filter(org_id=org_id, kind=kind, is_active=True).first()
    counting = Review.objects.counting().filter(org_id=org_id, kind=kind)
    judged = Q(stages__gt=0) & ~Q(route=Route.NOT_SCORABLE)
    totals = {"reviews": Count("pk"), "calls": Sum("stages", filter=judged), "judged": Count("pk", filter=judged)}
    totals["decided"] = Count("pk", filter=Q(state=ReviewState.DECIDED))  # people's decisions that stop counting
    if kind == ItemKind.CONVERSATION:
        totals["quiet"] = Count("pk", filter=went_quiet(now))
        per_application = counting.values("conversation__application").annotate(**totals)
        rows = list(per_application.order_by("conversation__application"))
        groups = [
            StaleGroup(r["conversation__application"], r["reviews"], (r["calls"] or 0) + r["quiet"]) for r in rows
        ]
        judged_now = sum(r["judged"] + r["quiet"] for r in rows)
        decided = sum(r["decided"] for r in rows)
        items = Conversation.objects.filter(org_id=org_id).count()
        ahead = 0
        competing = conversations_needing_grading(now).exclude(org_id=org_id).count()
    else:
        row = counting.aggregate(**totals)
        groups = [StaleGroup("drafts", row["reviews"], row["calls"] or 0)] if row["reviews"] else []
        judged_now = row["judged"]
        decided = row["decided"]
        items = Draft.objects.filter(org_id=org_id).count()
        ahead = conversations_needing_grading(now).count()
        competing = drafts_needing_grading().exclude(org_id=org_id).count()
    waiting = max(0, items - sum(group.reviews for group in groups))  # an item has at most one current review
    return PublishPlan(
        version=version,
        active=active,
        groups=groups,
        items=items,
        waiting=waiting,
        judge_calls=sum(group.judge_calls for group in groups) + waiting,
        judged_items=judged_now + waiting,
        decided=decided,
        basis=_token_basis(org_id, kind),
        cap=settings.GRADING_PASS_CAP,
        ahead=ahead,
        competing=competing,
        last_pass=GradingRun.objects.order_by("-started_at").first(),
        made_at=now,
    )


def _token_basis(org_id: int, kind: str) -> TokenBasis | None:
    # Reviews are written when they finish, so the highest ids are the latest; the primary key serves the order.
    usages = list(
        Review.objects.filter(org_id=org_id, kind=kind, stages__gt=0)
        .exclude(route__in=UNGRADED)
        .exclude(state=ReviewState.TRIAL)
        .order_by("-pk")
        .values_list("usage", flat=True)[:TOKEN_BASIS_REVIEWS]
    )
    recorded = [u for u in usages if isinstance(u, dict) and isinstance(u.get("total_tokens"), int)]
    if not recorded:
        return None
    count = len(recorded)
    return TokenBasis(
        reviews=count,
        mean_total=sum(u["total_tokens"] for u in recorded) / count,
        mean_prompt=sum(u.get("prompt_tokens", 0) for u in recorded) / count,
        mean_completion=sum(u.get("completion_tokens", 0) for u in recorded) / count,
    )


def criteria_publish_planned(
    *,
    version: CriteriaVersion,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
    plan_active_id: int | None,
    regrade_now: bool,
) -> tuple[CriteriaVersion, PassResult | None]:
    """Publish `version` as planned: refused if another version was published after the plan was read
    (CriteriaConflict). With `regrade_now`, a grading pass runs right after the publication's commit instead of at
    the next hourly one: it plans and enqueues (after its own commit), and the judge calls happen in the workers."""
    published = criteria_publish(version=version, actor=actor, api_key=api_key, expected_active_id=plan_active_id)
    return published, grading_pass(trigger=GradingRun.Trigger.MANUAL) if regrade_now else None
