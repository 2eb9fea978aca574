"""Reviews and their state, people's decisions and labels, and the webhook deliveries of a verdict."""

from datetime import datetime

from django.conf import settings
from django.db import models

from grading.models.criteria import CriteriaVersion, ItemKind
from grading.models.items import Conversation, Draft
from grading.models.orgs import Org


class Route(models.TextChoices):
    PASS = "pass", "pass"  # noqa: S105 - a route, not a password
    FAIL = "fail", "fail"
    HUMAN = "human", "human"
    NOT_SCORABLE = "not_scorable", "not scorable"
    ERROR = "error", "error"


UNGRADED = (Route.NOT_SCORABLE, Route.ERROR)  # the judge could not grade the item: no pass probability
GRADED = (Route.PASS, Route.FAIL, Route.HUMAN)  # the judge gave a verdict, whoever decides the item
DECIDED_ALONE = (Route.PASS, Route.FAIL)  # the machine decided the item alone: people were not asked
NO_JUDGE = "none"  # the judge key of reviews that called no judge (not scorable)


class ReviewState(models.TextChoices):
    """What a review is worth now: the one definition every reader asks (docs/pipelines-and-api.md).

    Stored on the review and kept true by the writes that change it (grading/reviews/services.py: a review written,
    an item's evidence changed, a decision recorded), in the same transaction. One fact is read when asked
    instead of stored: whether the review's criteria version is still the active one. Publishing a version
    is then one row's change, not a rewrite of every current review of its kind (see `ReviewQuerySet`).
    """

    CURRENT = "current", "current"  # counts: the item's latest review, of its present evidence, under active criteria
    WAITING = "waiting", "waiting for a person"  # counts; routed to people and not decided yet: the queue
    DECIDED = "decided", "decided by a person"  # counts; routed to people and decided
    STALE = "stale", "stale"  # the item's latest review, but its evidence or criteria changed: it is graded again
    SUPERSEDED = "superseded", "superseded"  # a newer review of the item replaced it; kept as history
    TRIAL = "trial", "trial"  # graded under an unpublished criteria version for a trial run: never counts


COUNTING_STATES = (ReviewState.CURRENT, ReviewState.WAITING, ReviewState.DECIDED)
# The item's latest review, counting or not: at most one per item (a constraint).
LIVE_STATES = (*COUNTING_STATES, ReviewState.STALE)
_CRITERIA_ACTIVE = models.Q(criteria_version__is_active=True)
# The rule itself: a stored counting state counts only while the review's criteria version is active; after a
# publication the review reads as stale until the item is graded again.
_CRITERIA_CHANGED = models.Q(state__in=COUNTING_STATES) & ~_CRITERIA_ACTIVE


def queue_index(*fields: str, name: str) -> models.Index:
    """An index of the queue: over the waiting reviews only, the rows the queue's reads scan in order."""
    return models.Index(fields=list(fields), condition=models.Q(state=ReviewState.WAITING), name=name)


def one_subject(name: str) -> models.CheckConstraint:
    """The row names a conversation or a draft, never both or neither."""
    return models.CheckConstraint(
        condition=models.Q(conversation__isnull=True) ^ models.Q(draft__isnull=True), name=name
    )


def state_now(stored: str, *, criteria_active: bool) -> str:
    """The state a review reads as now, from its stored state and whether its criteria version is still the active
    one: decided in Python for the row in hand (`Review.state_now`) and for the rollups' state counters (kept per
    criteria version). Queries that pick reviews by it filter with `in_state`, its SQL form (bench/README.md says
    why there are two)."""
    if stored in COUNTING_STATES and not criteria_active:
        return ReviewState.STALE
    return stored


def for_people(*, route: str, audit: bool, sent: str) -> bool:
    """Whether a person may be asked about a review: routed to people by the machine, picked by the audit sample or
    sent by a person (`Review.sent`) whatever the machine decided. Asked of the row in hand: every reader looks a
    review up by its id."""
    return route == Route.HUMAN or audit or bool(sent)


def _in_state(state: ReviewState) -> models.Q:
    if state in COUNTING_STATES:
        return models.Q(state=state) & _CRITERIA_ACTIVE
    if state == ReviewState.STALE:
        return models.Q(state=state) | _CRITERIA_CHANGED
    return models.Q(state=state)


def in_state_condition(*states: ReviewState) -> models.Q:
    """The condition `in_state` filters on, for a count that reads some states among others (a filtered aggregate)."""
    condition = models.Q(pk__in=[])
    for state in states:
        condition |= _in_state(state)
    return condition


class ReviewQuerySet(models.QuerySet):
    def in_state(self, *states: ReviewState) -> "ReviewQuerySet":
        return self.filter(in_state_condition(*states))

    def counting(self) -> "ReviewQuerySet":
        """Reviews that count: the item's latest, of its present evidence, under the active criteria."""
        return self.in_state(*COUNTING_STATES)

    def waiting(self) -> "ReviewQuerySet":
        """The queue: counting reviews routed to people and not decided yet."""
        return self.in_state(ReviewState.WAITING)

    def waiting_under(self, version: "CriteriaVersion") -> "ReviewQuerySet":
        """`waiting()` for the reviews graded under one criteria version, as one index range (`review_queue`):
        the version's activeness is known, so the rule needs no join."""
        if not version.is_active:
            return self.none()
        return self.filter(state=ReviewState.WAITING, criteria_version=version)

    def overdue(self, at: datetime) -> "ReviewQuerySet":
        """Overdue at `at`: waiting in the queue (`waiting()`, so an item a publication made stale is not) with its due
        time passed. The one reading of "overdue" for people: the escalation sweep (due soon: overdue by the end of
        the warning margin), the dashboard's "overdue now", its list and each person's overdue holdings."""
        return self.waiting().filter(due_at__lte=at)

    def with_state(self) -> "ReviewQuerySet":
        """The reviews with what `Review.state_now` reads beside each (its criteria version, in the same query)."""
        return self.select_related("criteria_version")


class Review(models.Model):
    """One grading of one item, with its whole score identity. Written once when it finishes and never
    deleted; only `state` changes afterwards (see ReviewState), so a review can never be shown as counting
    for evidence it did not read.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="reviews")
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.CASCADE, related_name="reviews"
    )
    draft = models.ForeignKey(Draft, null=True, blank=True, on_delete=models.CASCADE, related_name="reviews")
    # -- score identity
    fingerprint = models.CharField(max_length=80)
    criteria_version = models.ForeignKey(CriteriaVersion, on_delete=models.PROTECT, related_name="reviews")
    judge = models.JSONField(help_text="backend, model, prompt-template hash, sampling settings")
    judge_key = models.CharField(max_length=64, help_text="A hash of `judge`, for the identity constraint.")
    criteria_fingerprint = models.CharField(
        max_length=80, blank=True, help_text="Of what the judge read of the criteria: rubric, rules and examples."
    )
    memory_snapshot = models.CharField(max_length=80, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    stages = models.PositiveSmallIntegerField(default=0)
    # -- outcome
    route = models.CharField(max_length=16, choices=Route.choices)
    reason = models.CharField(max_length=40, blank=True, help_text="A code: why humans, why not scorable, what failed.")
    detail = models.TextField(blank=True)
    checks = models.JSONField(default=dict, blank=True, help_text="Conversations: verdict, message ids, rationale.")
    # Drafts: the merged score, the judge's sub-scores and spread, findings first, then the judge's issues.
    score = models.FloatField(null=True, blank=True)
    judge_score = models.FloatField(null=True, blank=True, help_text="The judge's overall before findings.")
    judge_passed = models.BooleanField(null=True, blank=True, help_text="The judge's own pass verdict.")
    spread = models.FloatField(null=True, blank=True)
    sub_scores = models.JSONField(default=dict, blank=True)
    findings = models.JSONField(default=list, blank=True)
    judge_issues = models.JSONField(default=list, blank=True)
    repairs = models.JSONField(null=True, blank=True, help_text="{diff, body, applied} when auto-repair ran.")
    memory_used = models.JSONField(default=dict, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    # -- how sure the judge was, and the certificate the review was routed under (grading/certify/)
    confidences = models.JSONField(
        default=dict,
        blank=True,
        help_text="The probability the judge gave its answer, 0 to 1: check key -> p; a draft's verdict as pass_fail.",
    )
    confidence_source = models.CharField(
        max_length=16, blank=True, help_text="Where the confidences came from: logprobs; empty: none."
    )
    pass_probability = models.FloatField(
        null=True,
        blank=True,
        help_text="The judge's probability that the item passes, from its answers and confidences as the version's "
        "required checks read them (grading/judge/pass_probability.py); null: the judge could not grade it.",
    )
    certificate = models.ForeignKey(
        "grading.Certificate",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="reviews",
        help_text="The certificate the machine decided it under; null: routed by the fixed bands.",
    )
    # -- what it is worth now
    state = models.CharField(max_length=16, choices=ReviewState.choices)
    audit = models.BooleanField(
        default=False,
        help_text="Picked by the fixed-rule sample: waits for a person whatever the machine decided (blind).",
    )
    sent = models.CharField(
        max_length=40,
        blank=True,
        default="",
        help_text="Who sent it to people whatever the machine decided: person (the reason is in the audit trail), or "
        "the code of a routing rule of its criteria version (thumbs_down, metadata).",
    )
    # -- where the dashboards file it, as the item was when it was graded (set by review_record, never changed,
    # so the rollups can take back exactly what a review added; see grading/reviews/rollups.py)
    application = models.CharField(max_length=100, blank=True)
    week = models.DateField(
        null=True, blank=True, help_text="Monday of the ISO week: the conversation's start, or the draft's verdict."
    )
    submitted_at = models.DateTimeField(
        null=True, blank=True, help_text="When the evidence it read arrived: the draft's save, the last message."
    )
    slice = models.JSONField(
        default=dict,
        blank=True,
        help_text="The item's values of the org's dimensions when graded: name -> value.",
    )
    # -- when it was routed to people (graded so, or marked for the audit sample), and when they owe it a decision
    # (ServiceTarget; null: no target names it)
    routed_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)

    objects = ReviewQuerySet.as_manager()
    # Not stored: True on the review `review_record` returns when its transaction also handed back the grading
    # task's ticket for the item, so the task sends nothing more for it (grading/reviews/inflight.py, `grade_each`).
    ticket_returned = False

    class Meta:
        constraints = [
            # A second review of the same identity is impossible, not unlikely. Errors are exempt so the
            # next pass may try again; the retry then becomes the item's latest review.
            # Trial reviews are exempt too: a trial under a version that is later published must not stand in
            # for the real grading of the same identity (it never counts, reached no pipeline, no export).
            models.UniqueConstraint(
                fields=["conversation", "fingerprint", "criteria_version", "judge_key"],
                condition=~models.Q(route="error") & ~models.Q(state="trial"),
                name="review_unique_conversation_identity",
            ),
            models.UniqueConstraint(
                fields=["conversation"],
                condition=models.Q(state__in=LIVE_STATES),
                name="review_one_live_per_conversation",
            ),
            models.UniqueConstraint(
                fields=["draft", "fingerprint", "criteria_version", "judge_key", "memory_snapshot"],
                condition=~models.Q(route="error") & ~models.Q(state="trial"),
                name="review_unique_draft_identity",
            ),
            models.UniqueConstraint(
                fields=["draft"], condition=models.Q(state__in=LIVE_STATES), name="review_one_live_per_draft"
            ),
            one_subject("review_has_one_subject"),
        ]
        indexes = [
            models.Index(
                fields=["org", "kind", "route"], condition=models.Q(state__in=COUNTING_STATES), name="review_counting"
            ),
            # The queue: one ordered range per active criteria version (a version names its org and kind).
            queue_index("criteria_version", "finished_at", "id", name="review_queue"),
            queue_index("criteria_version", "reason", "finished_at", "id", name="review_queue_reason"),
            # The queue of someone whose reach names applications (or who filters by one): one range per version
            # and application, and per reason within it for the counts.
            queue_index("criteria_version", "application", "finished_at", "id", name="review_queue_application"),
            queue_index(
                "criteria_version", "application", "reason", "finished_at", "id", name="review_queue_app_reason"
            ),
            # The queue's order where service-level targets give due times: by due time (none last), then age.
            queue_index("criteria_version", "due_at", "finished_at", "id", name="review_queue_due"),
            queue_index("criteria_version", "application", "due_at", "finished_at", "id", name="review_queue_app_due"),
            queue_index("criteria_version", "reason", "due_at", "finished_at", "id", name="review_queue_reason_due"),
            # The escalation sweep: the org's waiting reviews whose due time falls in a window.
            models.Index(
                fields=["org", "due_at"],
                condition=models.Q(state=ReviewState.WAITING, due_at__isnull=False),
                name="review_due",
            ),
            # Monitors (grading/monitors/figures.py): the reviews of an org's kind graded in a rolling window.
            models.Index(fields=["org", "kind", "finished_at"], name="review_graded_window"),
            # The dashboards' lists: the counting reviews of a version's weeks, newest first, read in index order.
            models.Index(
                fields=["criteria_version", "week", "id"],
                condition=models.Q(state__in=COUNTING_STATES),
                name="review_counting_cell",
            ),
            # The audit sample's reviews (people's audit decisions, read per kind by a trial scored against the
            # audit's verdicts): a few thousand among a million.
            models.Index(fields=["org", "kind"], condition=models.Q(audit=True), name="review_audited"),
            # Graded with no pass probability: written only by a worker still on the code from before it was stored,
            # during an upgrade (grading/reviews/services.py `pass_probabilities_backfill`); none at all otherwise.
            models.Index(
                fields=["org"],
                condition=models.Q(pass_probability__isnull=True) & ~models.Q(route__in=UNGRADED),
                name="review_unweighed",
            ),
        ]

    def __str__(self) -> str:
        return f"review {self.pk} of {self.kind} ({self.route}, {self.state})"

    @property
    def subject(self) -> "Conversation | Draft":
        return self.draft if self.kind == ItemKind.DRAFT else self.conversation

    @property
    def state_now(self) -> str:
        """The state the review reads as now, as every reader must show it (`state_now`); read the review with
        `ReviewQuerySet.with_state`, which brings its criteria version along."""
        return state_now(self.state, criteria_active=self.criteria_version.is_active)

    @property
    def counts_now(self) -> bool:
        """Whether the review counts as it reads now: its `state_now` is a counting state. The one reading of the
        "still counts" rule for a review in hand; queries use `counting()`."""
        return self.state_now in COUNTING_STATES

    @property
    def sendable(self) -> bool:
        """Whether a person may send the item to people now: the review counts, the machine graded it, and nobody
        asks people about it yet (`for_people`). The one reading of the rule: a list offers the send on the rows it
        shows by it, and the send asks it again of the rows it locked."""
        return (
            self.counts_now
            and self.route not in UNGRADED
            and not for_people(route=self.route, audit=self.audit, sent=self.sent)
        )


class Decision(models.Model):
    """What a person decided about a review routed to them: part of grading's record of the review, written
    by `decision_record` (grading/reviews/services.py). Who held the item while deciding is the people side's business.
    """

    class Outcome(models.TextChoices):
        APPROVE = "approve", "approve"
        REJECT = "reject", "reject"
        SEND_BACK = "send_back", "send back"
        # Conversations: the human verdicts per check, summarised as the routes would be.
        PASS = "pass", "pass"  # noqa: S105 - an outcome, not a password
        FAIL = "fail", "fail"
        UNKNOWN = "unknown", "unknown"

    class Basis(models.TextChoices):
        ONE = "one", "one person's decision"
        AGREED = "agreed", "the answers agreed"  # every slot answered alike (`Answer`); decided by no one person
        ADJUDICATED = "adjudicated", "adjudicated"  # the answers differed; someone who gave none decided

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    review = models.OneToOneField(Review, on_delete=models.PROTECT, related_name="decision")
    basis = models.CharField(max_length=12, choices=Basis.choices, default=Basis.ONE)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    checks = models.JSONField(default=dict, blank=True, help_text="Conversations: the human verdict per check.")
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField()
    learning = models.ForeignKey(
        "MemoryItem",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The org learning the note became, when the person asked for one.",
    )

    class Meta:
        indexes = [models.Index(fields=["org", "decided_at"], name="decision_org_decided_at")]

    def __str__(self) -> str:
        return f"{self.outcome} on review {self.review_id}"


# People's verdict on the whole item, by the decision's outcome (a draft's, or a conversation's summary).
HUMAN_PASS = (Decision.Outcome.APPROVE, Decision.Outcome.PASS)
HUMAN_FAIL = (Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK, Decision.Outcome.FAIL)


class Answer(models.Model):
    """One person's answer on a review that several people decide (`CriteriaVersion.slots`), kept apart from the
    others' and bound to the evidence that person read. The item's human verdict is a `Decision`: written when
    every slot is answered alike, or by an adjudicator when the answers differ. Written by `answer_record`
    (grading/reviews/services.py); answering again replaces only the person's own answer (the audit trail keeps the
    replaced one)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    review = models.ForeignKey(Review, on_delete=models.PROTECT, related_name="answers")
    person = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    fingerprint = models.CharField(max_length=80, help_text="The evidence the person read: the review's.")
    outcome = models.CharField(max_length=16, choices=Decision.Outcome.choices)
    checks = models.JSONField(default=dict, blank=True, help_text="Conversations: the person's verdict per check.")
    note = models.TextField(blank=True)
    answered_at = models.DateTimeField()
    slots = models.PositiveSmallIntegerField(help_text="How many people the item asked for when this was given.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["review", "person"], name="answer_one_per_person")]

    def __str__(self) -> str:
        return f"{self.outcome} by {self.person_id} on review {self.review_id}"


class Label(models.Model):
    """A human verdict from outside the queue (a spreadsheet, another annotation tool), with its labeller and
    source, bound to the item's fingerprint when it was recorded: it speaks about that evidence only."""

    PASS_FAIL = "pass_fail"  # noqa: S105 - a verdict on the whole item rather than on one check

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="labels")
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.CASCADE, related_name="labels"
    )
    draft = models.ForeignKey(Draft, null=True, blank=True, on_delete=models.CASCADE, related_name="labels")
    fingerprint = models.CharField(max_length=80)
    # A check's key is up to 32 characters, and so is an answer (a category's key): grading/checks/definitions.py.
    check_name = models.CharField(max_length=32, help_text="A check of the item's criteria, or pass_fail for the item.")
    verdict = models.CharField(max_length=32, help_text="The answer, as a review stores it: pass, a category, a score.")
    labeller = models.CharField(max_length=200)
    source = models.CharField(max_length=200, help_text="Where it came from: api, or the imported file's name.")
    labelled_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "fingerprint", "check_name", "labeller"], name="label_unique_conversation"
            ),
            models.UniqueConstraint(
                fields=["draft", "fingerprint", "check_name", "labeller"], name="label_unique_draft"
            ),
            one_subject("label_has_one_subject"),
        ]

    def __str__(self) -> str:
        return (
            f"{self.labeller}: {self.check_name} {self.verdict} on {self.kind} {self.conversation_id or self.draft_id}"
        )


class Correction(models.Model):
    """What a person says the item should have been, kept beside their decision on a review (issue "fix and approve").

    Two kinds. A draft's corrected body: a new revision of the draft with its own fingerprint, which goes through the
    gate again (checks and judge, under the review's criteria version) and is approved only if its hard checks pass;
    `original` is the body the review read, `regrade` the gate's review of the corrected revision. An expected reply:
    the reply the agent should have given at one assistant message of a conversation, bound to the fingerprint of
    the active path up to that message (`evidence_fingerprint`); `original` is that message's text.
    Either way the correction names the evidence it corrects, so it stops speaking for the item when that moves on.
    """

    class Kind(models.TextChoices):
        DRAFT_BODY = "draft_body", "corrected draft"
        EXPECTED_REPLY = "expected_reply", "expected reply"

    class State(models.TextChoices):
        GRADING = "grading", "being graded"  # a corrected draft waits for the gate
        APPROVED = "approved", "approved as corrected"
        REFUSED = "refused", "refused: a hard check still fails"
        # The draft moved on before the gate could settle it: the pipeline resubmitted, or other criteria were
        # published. The approval was about a revision no longer graded as it asked.
        OVERTAKEN = "overtaken", "overtaken: the draft or its criteria changed first"
        KEPT = "kept", "kept"  # an expected reply: nothing to grade

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="corrections")
    draft = models.ForeignKey(Draft, null=True, blank=True, on_delete=models.CASCADE, related_name="corrections")
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.CASCADE, related_name="corrections"
    )
    message_external_id = models.CharField(
        max_length=200, blank=True, help_text="An expected reply: the assistant message it replaces."
    )
    evidence_fingerprint = models.CharField(
        max_length=80, help_text="What was corrected: the draft's fingerprint, or the path's up to the message."
    )
    original = models.TextField(help_text="The text as the review read it: the draft's body, or the message's text.")
    corrected = models.TextField(help_text="The person's text: the corrected body, or the expected reply.")
    corrected_fingerprint = models.CharField(max_length=80, blank=True, help_text="A corrected draft's fingerprint.")
    diff = models.TextField(blank=True, help_text="A unified diff from the original to the correction.")
    regrade = models.ForeignKey(
        Review,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="A corrected draft: the gate's review of the corrected revision.",
    )
    state = models.CharField(max_length=16, choices=State.choices)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    settled_at = models.DateTimeField(
        null=True, blank=True, help_text="When a corrected draft was approved or refused."
    )

    class Meta:
        indexes = [models.Index(fields=["org", "created_at"], name="correction_org_created_at")]
        constraints = [
            one_subject("correction_has_one_subject"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} on review {self.review_id} by {self.author_id}"


class WebhookDelivery(models.Model):
    """One try at telling a pipeline about a draft's verdict. Every try is logged, failed ones included."""

    draft = models.ForeignKey(Draft, on_delete=models.CASCADE, related_name="webhook_deliveries")
    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="webhook_deliveries")
    event = models.CharField(max_length=32, help_text="machine_verdict | human_decision")
    url = models.URLField(max_length=1000)
    attempt = models.PositiveSmallIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    delivered = models.BooleanField(default=False)
    at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.event} to {self.url} try {self.attempt}: {self.status_code or self.error}"


class ItemSelector(models.Model):
    """An org's rule, in order of `position`, that picks the items of a kind and application (blank: any) and a
    routing reason (`reason`, which each rule declares; `audit`: the audit sample): what service-level targets and
    assignment rules have in common (grading/reviews/targets.py `selects`)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, blank=True)
    application = models.CharField(max_length=100, blank=True)

    class Meta:
        abstract = True


class ServiceTarget(ItemSelector):
    """A service-level target: people decide the items of a kind, application and reason (blank: any; `audit`: the
    audit sample) within `minutes` of their routing to people. The lowest `position` among the targets that match
    an item gives its due time (`Review.due_at`), set when it is routed and again whenever the targets change."""

    reason = models.CharField(max_length=64, blank=True)
    minutes = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "position"], name="service_target_unique_position"),
            models.CheckConstraint(condition=models.Q(minutes__gte=1), name="service_target_minutes_positive"),
        ]

    def __str__(self) -> str:
        return f"target {self.position} of {self.org_id}: {self.minutes} min"
