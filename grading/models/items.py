"""What is graded: conversations with their messages and thumbs, drafts, and the org memory they are judged by."""

from django.db import models
from pgvector.django import HnswIndex, VectorField

from grading.core.evidence import EvidenceMessage
from grading.models.orgs import Org

EMBEDDING_DIMENSIONS = 384


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
    # Set while a model call of the conversation is known from its OTLP span and its messages, sent as OTLP log
    # records, have not arrived (grading/otlp/pending.py): the record is known to be incomplete.
    content_awaited_since = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When a grading pass last enqueued it.")
    grading_task_id = models.CharField(
        max_length=64,
        blank=True,
        help_text="The Celery task that owes it a grading, while one does.",
    )
    end_user = models.CharField(
        max_length=200, blank=True, help_text="The pipeline's id of the person talking: what an erasure asks by."
    )
    metadata = models.JSONField(
        default=dict, blank=True, help_text="What produced it (release, model, ...): names to values; not evidence."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "external_id"], name="conversation_unique_external_id")]
        indexes = [
            models.Index(fields=["org", "application", "started_at"]),
            models.Index(fields=["org", "end_user"], condition=~models.Q(end_user=""), name="conversation_end_user"),
            # For the retention pass. Time alone: an index naming org_id (led by it or not) is one a cached generic plan
            # may find a conversation by external id through, reading every conversation of the org.
            models.Index(fields=["last_activity_at"], name="conversation_activity"),
        ]

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
    end_user = models.CharField(
        max_length=200, blank=True, help_text="The pipeline's id of the person it concerns: what an erasure asks by."
    )
    metadata = models.JSONField(
        default=dict, blank=True, help_text="What produced it (release, prompt, ...): names to values; not evidence."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "external_id"], name="draft_unique_external_id")]
        indexes = [
            models.Index(fields=["org", "end_user"], condition=~models.Q(end_user=""), name="draft_end_user"),
            models.Index(fields=["updated_at"], name="draft_updated"),  # for the retention pass; time alone, as above
        ]

    def __str__(self) -> str:
        return self.slug


def embedding_index(name: str) -> HnswIndex:
    """An index for similarity lookups: HNSW over `embedding` by cosine distance (pgvector's `<=>`)."""
    return HnswIndex(name=name, fields=["embedding"], opclasses=["vector_cosine_ops"], m=16, ef_construction=64)


class Article(models.Model):
    """One of the org's published articles: the targets of internal links and of related-reading repairs."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="articles")
    slug = models.SlugField(max_length=200)
    title = models.CharField(max_length=300)
    summary = models.TextField(blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "slug"], name="article_unique_slug")]
        indexes = [embedding_index("article_embedding_hnsw")]

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
    # The decision a learning was drawn from: erasing the item erases what was learnt from it.
    decision = models.ForeignKey("grading.Decision", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org"], condition=models.Q(kind="strategy", active=True), name="memory_one_active_strategy"
            )
        ]
        indexes = [
            embedding_index("memory_embedding_hnsw"),
            models.Index(fields=["org", "kind", "active"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.text[:60]}"
