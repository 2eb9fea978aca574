"""The domain core both sides use: orgs, API keys, the audit trail, criteria, items, reviews and decisions."""

import secrets

from django.conf import settings
from django.db import models
from pgvector.django import HnswIndex, VectorField

from grading.drafts.rules import DraftRules
from grading.evidence import EvidenceMessage

EMBEDDING_DIMENSIONS = 384


def new_webhook_secret() -> str:
    return secrets.token_hex(32)


class Org(models.Model):
    """A tenant: users, keys, criteria, memory, drafts and conversations belong to one org."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    webhook_secret = models.CharField(
        max_length=64, default=new_webhook_secret, help_text="Signs webhook deliveries (HMAC-SHA256)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class ApiKey(models.Model):
    """A pipeline's credential. Only a SHA-256 of the key is stored: keys are 256-bit random, so a
    fast hash is enough (there is nothing to brute-force), and it lets us look a key up by its hash."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The first characters of the key, to recognise it by.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.name} ({self.prefix}…)"


class AuditEvent(models.Model):
    """Who did what, when, to which object. Written by `audit_record`, never updated."""

    org = models.ForeignKey(Org, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["org", "action", "at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action} {self.object_type}:{self.object_id}"


class ItemKind(models.TextChoices):
    DRAFT = "draft", "draft"
    CONVERSATION = "conversation", "conversation"


class CriteriaVersion(models.Model):
    """What the judge is asked to apply. Immutable once published (services refuse edits); exactly one
    published version per org and kind is active, enforced by a partial unique index."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="criteria_versions")
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    number = models.PositiveIntegerField()
    rubric = models.TextField(help_text="The rubric the judge reads, check by check.")
    rules = models.JSONField(
        default=dict,
        blank=True,
        help_text="Drafts: the rules document, threshold and band included.",
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField(default=False)
    based_on = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", help_text="Cloned from it."
    )
    # The editor's optimistic lock: every saved edit of a draft version moves `revision` on, and a save made
    # from an older revision is refused, naming who saved in between and when.
    revision = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(null=True, blank=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "kind", "number"], name="criteria_unique_number"),
            models.UniqueConstraint(
                fields=["org", "kind"], condition=models.Q(is_active=True), name="criteria_one_active_per_kind"
            ),
            models.CheckConstraint(
                condition=models.Q(is_active=False) | models.Q(published_at__isnull=False),
                name="criteria_active_is_published",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} v{self.number}"

    def draft_rules(self) -> DraftRules:
        """The rules document of a draft version: the checks, the threshold and the band (their one home)."""
        return DraftRules.model_validate(self.rules)


class Conversation(models.Model):
    """An agent conversation: a tree of messages. The evidence columns (fingerprint, active path, scorable)
    are recomputed from the messages on every write, in the same transaction."""

    # No index of its own: conversation_unique_external_id leads with org_id and serves every lookup by org. With
    # one, a cached generic plan made while the org was small found a conversation by external id through it,
    # reading every conversation of the org (quadratic in an OTLP request that creates thousands).
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="conversations", db_index=False)
    external_id = models.CharField(max_length=200)
    application = models.CharField(max_length=100)
    closed = models.BooleanField(default=False)
    active_message_id = models.CharField(max_length=200, null=True, blank=True, help_text="Given by the source.")
    started_at = models.DateTimeField()
    last_activity_at = models.DateTimeField()
    fingerprint = models.CharField(max_length=80)
    active_path_ids = models.JSONField(default=list)
    branch_count = models.PositiveIntegerField(default=0)
    message_count = models.PositiveIntegerField(default=0)
    # What an append needs to extend the evidence columns without reading the messages (grading/conversations/
    # ingest.py): the resumable fingerprint digest and the path's facts. Null until the next write computes it.
    evidence_state = models.JSONField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When a grading pass last enqueued it.")
    grading_task_id = models.CharField(
        max_length=64,
        blank=True,
        help_text="The Celery task that owes it a grading, while one does.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "external_id"], name="conversation_unique_external_id")]
        indexes = [models.Index(fields=["org", "application", "started_at"])]

    def __str__(self) -> str:
        return self.external_id


class MessageRole(models.TextChoices):
    SYSTEM = "system", "system"
    USER = "user", "user"
    ASSISTANT = "assistant", "assistant"
    TOOL = "tool", "tool"


class Message(models.Model):
    """One node of a conversation tree. Parents are referenced by external id, not by foreign key,
    because a source may name a parent it never sent: that is an incomplete record, not a crash."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    external_id = models.CharField(max_length=200)
    parent_external_id = models.CharField(max_length=200, null=True, blank=True)
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    content = models.JSONField(null=True, blank=True, help_text="Text, or a list of content parts, as given.")
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=200, null=True, blank=True)
    name = models.CharField(max_length=200, null=True, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    hidden = models.BooleanField(default=False)
    truncated = models.BooleanField(default=False)
    # 0 for the message its id names. A payload that sends one id more than once is kept as sent: the later ones
    # are its twins 1, 2, ..., and while any exists the record reads `duplicate_id` (which one is meant cannot be
    # known). The source settles it by sending that id once.
    twin = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "external_id", "twin"], name="message_unique_external_id_twin"
            )
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}/{self.external_id}"

    # The columns a message is evidence by, in EvidenceMessage's field order: `as_evidence`, and graders that read
    # them as values (grading.reviews.sql.conversation_messages).
    EVIDENCE_FIELDS = (
        "external_id", "parent_external_id", "role", "content", "tool_calls", "tool_call_id", "name", "created_at",
        "hidden", "truncated",
    )  # fmt: skip

    def as_evidence(self) -> EvidenceMessage:
        return EvidenceMessage(*(getattr(self, name) for name in self.EVIDENCE_FIELDS))


class Feedback(models.Model):
    """A user's thumbs on a message. Shown beside scores, never stored as one."""

    class Value(models.TextChoices):
        UP = "up", "up"
        DOWN = "down", "down"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="feedback")
    message_external_id = models.CharField(max_length=200)
    value = models.CharField(max_length=4, choices=Value.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "message_external_id"], name="feedback_one_per_message")
        ]

    def __str__(self) -> str:
        return f"{self.value} on {self.conversation_id}/{self.message_external_id}"


class Draft(models.Model):
    """An article a writing pipeline wants to publish (Markdown/MDX). Resubmitting the same external id
    replaces its content; the fingerprint over title, body and source URLs says which content a review read."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="drafts")
    external_id = models.CharField(max_length=200)
    title = models.CharField(max_length=300)
    slug = models.SlugField(max_length=200)
    body = models.TextField()
    source_urls = models.JSONField(default=list, blank=True)
    run_id = models.CharField(max_length=200, blank=True)
    callback_url = models.URLField(max_length=1000, blank=True)
    fingerprint = models.CharField(max_length=80)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When grading was last enqueued.")
    grading_task_id = models.CharField(
        max_length=64,
        blank=True,
        help_text="The Celery task that owes it a grading, while one does.",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "external_id"], name="draft_unique_external_id")]

    def __str__(self) -> str:
        return self.slug


class Article(models.Model):
    """One of the org's published articles: the targets of internal links and of related-reading repairs."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="articles")
    slug = models.SlugField(max_length=200)
    title = models.CharField(max_length=300)
    summary = models.TextField(blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "slug"], name="article_unique_slug")]
        indexes = [
            HnswIndex(
                name="article_embedding_hnsw",
                fields=["embedding"],
                opclasses=["vector_cosine_ops"],
                m=16,
                ef_construction=64,
            )
        ]

    def __str__(self) -> str:
        return self.slug


class MemoryItem(models.Model):
    """Org memory read before judging a draft: learnings (retrieved by similarity), the strategy, facts."""

    class Kind(models.TextChoices):
        LEARNING = "learning", "learning"
        STRATEGY = "strategy", "strategy"
        FACT = "fact", "fact"

    class Source(models.TextChoices):
        MANUAL = "manual", "manual"
        IMPORT = "import", "import"
        OPERATOR_DECISION = "operator_decision", "operator decision"

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="memory")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    text = models.TextField()
    proof_terms = models.JSONField(default=list, blank=True, help_text="Facts: customer names, figures.")
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    source = models.CharField(max_length=24, choices=Source.choices, default=Source.MANUAL)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org"], condition=models.Q(kind="strategy", active=True), name="memory_one_active_strategy"
            )
        ]
        indexes = [
            HnswIndex(
                name="memory_embedding_hnsw",
                fields=["embedding"],
                opclasses=["vector_cosine_ops"],
                m=16,
                ef_construction=64,
            ),
            models.Index(fields=["org", "kind", "active"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.text[:60]}"


class Route(models.TextChoices):
    PASS = "pass", "pass"  # noqa: S105 - a route, not a password
    FAIL = "fail", "fail"
    HUMAN = "human", "human"
    NOT_SCORABLE = "not_scorable", "not scorable"
    ERROR = "error", "error"


NO_JUDGE = "none"  # the judge key of reviews that called no judge (not scorable)


class ReviewState(models.TextChoices):
    """What a review is worth now: the one definition every reader asks (DESIGN 2 and 3).

    Stored on the review and kept true by the writes that change it (grading/reviews/store.py: a review written,
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


def state_now(stored: str, *, criteria_active: bool) -> str:
    """The state a review reads as now, from its stored state and whether its criteria version is still the active
    one: the rule `with_state` writes as SQL, for readers holding the two facts already (the rollups' state
    counters are kept per criteria version)."""
    if stored in COUNTING_STATES and not criteria_active:
        return ReviewState.STALE
    return stored


def for_people(*, route: str, audit: bool) -> bool:
    """Whether a person may be asked about a review: routed to people by the machine, or picked by the audit
    sample whatever the machine decided. `FOR_PEOPLE` is the same as a query."""
    return route == Route.HUMAN or audit


FOR_PEOPLE = models.Q(route=Route.HUMAN) | models.Q(audit=True)


def _in_state(state: ReviewState) -> models.Q:
    if state in COUNTING_STATES:
        return models.Q(state=state) & _CRITERIA_ACTIVE
    if state == ReviewState.STALE:
        return models.Q(state=state) | _CRITERIA_CHANGED
    return models.Q(state=state)


class ReviewQuerySet(models.QuerySet):
    def in_state(self, *states: ReviewState) -> "ReviewQuerySet":
        condition = models.Q(pk__in=[])
        for state in states:
            condition |= _in_state(state)
        return self.filter(condition)

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

    def with_state(self) -> "ReviewQuerySet":
        """Annotate `state_now`, the review's state as every reader must show it."""
        return self.annotate(
            state_now=models.Case(
                models.When(_CRITERIA_CHANGED, then=models.Value(ReviewState.STALE.value)),
                default=models.F("state"),
                output_field=models.CharField(),
            )
        )


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
    # -- what it is worth now
    state = models.CharField(max_length=16, choices=ReviewState.choices)
    audit = models.BooleanField(
        default=False,
        help_text="Picked by the fixed-rule sample: waits for a person whatever the machine decided (blind).",
    )
    # -- where the dashboards file it, as the item was when it was graded (set by review_record, never changed,
    # so the rollups can take back exactly what a review added; see grading/figures/rollups.py)
    application = models.CharField(max_length=100, blank=True)
    week = models.DateField(
        null=True, blank=True, help_text="Monday of the ISO week: the conversation's start, or the draft's verdict."
    )
    submitted_at = models.DateTimeField(
        null=True, blank=True, help_text="When the evidence it read arrived: the draft's save, the last message."
    )

    objects = ReviewQuerySet.as_manager()
    # Not stored: True on the review `review_record` returns when its transaction also handed back the grading
    # task's ticket for the item, so the task sends nothing more for it (grading/passes/inflight.py, `grade_each`).
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
            models.CheckConstraint(
                condition=models.Q(conversation__isnull=True) ^ models.Q(draft__isnull=True),
                name="review_has_one_subject",
            ),
        ]
        indexes = [
            models.Index(
                fields=["org", "kind", "route"], condition=models.Q(state__in=COUNTING_STATES), name="review_counting"
            ),
            # The queue: one ordered range per active criteria version (a version names its org and kind).
            models.Index(
                fields=["criteria_version", "finished_at", "id"],
                condition=models.Q(state=ReviewState.WAITING),
                name="review_queue",
            ),
            models.Index(
                fields=["criteria_version", "reason", "finished_at", "id"],
                condition=models.Q(state=ReviewState.WAITING),
                name="review_queue_reason",
            ),
            # The dashboards' lists: the counting reviews of a version's weeks, newest first, read in index order.
            models.Index(
                fields=["criteria_version", "week", "id"],
                condition=models.Q(state__in=COUNTING_STATES),
                name="review_counting_cell",
            ),
        ]

    def __str__(self) -> str:
        return f"review {self.pk} of {self.kind} ({self.route}, {self.state})"

    @property
    def subject(self) -> "Conversation | Draft":
        return self.draft if self.kind == ItemKind.DRAFT else self.conversation

    @property
    def counts_now(self) -> bool:
        """Whether the review counts as it reads now: its `state_now` (`ReviewQuerySet.with_state`) is a counting
        state. The one reading of the "still counts" rule for a review in hand; queries use `counting()`."""
        return self.state_now in COUNTING_STATES


class Decision(models.Model):
    """What a person decided about a review routed to them: part of grading's record of the review, written
    by `decision_record` (grading/reviews/store.py). Who held the item while deciding is the people side's business.
    """

    class Outcome(models.TextChoices):
        APPROVE = "approve", "approve"
        REJECT = "reject", "reject"
        SEND_BACK = "send_back", "send back"
        # Conversations: the human verdicts per check, summarised as the routes would be.
        PASS = "pass", "pass"  # noqa: S105 - an outcome, not a password
        FAIL = "fail", "fail"
        UNKNOWN = "unknown", "unknown"

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    review = models.OneToOneField(Review, on_delete=models.PROTECT, related_name="decision")
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
    check_name = models.CharField(max_length=16, help_text="A conversation check, or pass_fail for the whole item.")
    verdict = models.CharField(max_length=8)
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
            models.CheckConstraint(
                condition=models.Q(conversation__isnull=True) ^ models.Q(draft__isnull=True),
                name="label_has_one_subject",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.labeller}: {self.check_name} {self.verdict} on {self.kind} {self.conversation_id or self.draft_id}"
        )


class Rollup(models.Model):
    """One counter of the dashboards' figures for one cell: (org, kind, criteria version, application, ISO
    week). Kept by grading/figures/rollups.py in the same transaction as every write that changes what a review
    contributes, and rebuilt from the reviews every hour. `criteria_id` 0: no criteria (thumbs)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    criteria_id = models.IntegerField()
    application = models.CharField(max_length=100)
    week = models.DateField()
    metric = models.CharField(max_length=32)
    key1 = models.CharField(max_length=64)
    key2 = models.CharField(max_length=64)
    value = models.BigIntegerField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "kind", "criteria_id", "application", "week", "metric", "key1", "key2"],
                name="rollup_unique_cell_counter",
            )
        ]
        indexes = [models.Index(fields=["org", "week"], name="rollup_org_week")]

    def __str__(self) -> str:
        return f"{self.kind} c{self.criteria_id} {self.application} {self.week} {self.metric}:{self.key1}:{self.key2}"


class RollupRebuild(models.Model):
    """A full rebuild of an org's rollups from the reviews (hourly, by the beat), with what it found."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    rebuilt_at = models.DateTimeField()
    seconds = models.FloatField()
    rows = models.PositiveIntegerField()
    drifted = models.PositiveIntegerField(help_text="Counters the incremental upkeep had wrong (0 unless a bug).")
    mismatched = models.JSONField(default=dict, help_text="Per kind: counting reviews whose fingerprint differs.")

    class Meta:
        indexes = [models.Index(fields=["org", "-rebuilt_at"], name="rollup_rebuild_latest")]

    def __str__(self) -> str:
        return f"rollups of org {self.org_id} rebuilt at {self.rebuilt_at:%Y-%m-%d %H:%M}"


class CriteriaTrial(models.Model):
    """A trial run: a fixed-rule sample graded under an unpublished criteria version with the real judge.
    The judge calls are counted before it runs (`judge_calls`) and as it runs (`judge_calls_made`); its reviews
    are trial reviews (ReviewState.TRIAL), listed here in sample order."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    criteria_version = models.ForeignKey(CriteriaVersion, on_delete=models.PROTECT, related_name="trials")
    sample = models.JSONField(default=list, help_text="Ids of the drafts or conversations, in sample order.")
    judge_calls = models.PositiveIntegerField(help_text="Counted before the run, and shown to whoever started it.")
    judge_calls_made = models.PositiveIntegerField(default=0)
    review_ids = models.JSONField(default=list)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # Two admins starting at once cannot both run one: the second insert fails.
            models.UniqueConstraint(
                fields=["criteria_version"],
                condition=models.Q(finished_at__isnull=True),
                name="criteria_trial_one_running_per_version",
            )
        ]

    def __str__(self) -> str:
        return f"trial of {self.criteria_version} on {len(self.sample)} items"


class GradingRun(models.Model):
    """One grading pass. Beat-triggered passes are unique per hour so a second beat cannot double one."""

    class Trigger(models.TextChoices):
        BEAT = "beat", "beat"
        MANUAL = "manual", "manual"

    hour_bucket = models.DateTimeField()
    trigger = models.CharField(max_length=8, choices=Trigger.choices)
    started_at = models.DateTimeField(auto_now_add=True)
    needing = models.PositiveIntegerField(default=0, help_text="Items whose current review did not match.")
    enqueued = models.PositiveIntegerField(default=0, help_text="Sent to the workers, recovered ones included.")
    recovered = models.PositiveIntegerField(
        default=0, help_text="Of those enqueued, items whose earlier task was lost (broker, worker, send)."
    )
    in_flight = models.PositiveIntegerField(
        default=0, help_text="Items whose task was waiting in the broker or held by a live worker: not enqueued again."
    )
    backlog = models.PositiveIntegerField(default=0, help_text="Left for later passes by the per-pass cap.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour_bucket"], condition=models.Q(trigger="beat"), name="grading_run_one_beat_per_hour"
            )
        ]

    def __str__(self) -> str:
        return f"{self.trigger} pass at {self.started_at:%Y-%m-%d %H:%M}: {self.enqueued} enqueued, {self.backlog} left"


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
