"""What OpenTelemetry adds to the domain core: where each message came from, the model calls whose span and
messages arrive apart, and each try at sending a verdict.

Their tables and migrations are the `otlp` app's (grading/otlp/: its label, its migrations), as they were before
the app's code moved above the record; the models live here, with the rest, so every layer may read them."""

from django.db import models

from grading.models.items import Conversation
from grading.models.orgs import Org
from grading.models.reviews import Review

APP = "otlp"


class SpanLink(models.Model):
    """The span that a message was first read from: evaluation records point back at it, so the producer's
    tracing backend can show a verdict beside the model call it judged."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="span_links")
    message_external_id = models.CharField(max_length=200)
    trace_id = models.CharField(max_length=32, help_text="Lowercase hex, as OTLP/JSON writes it.")
    span_id = models.CharField(max_length=16)
    response_id = models.CharField(max_length=200, blank=True, help_text="gen_ai.response.id of the call.")

    class Meta:
        app_label = APP
        constraints = [
            models.UniqueConstraint(fields=["conversation", "message_external_id"], name="span_link_one_per_message")
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}/{self.message_external_id} <- {self.trace_id}/{self.span_id}"


class PendingCall(models.Model):
    """A model call whose span and messages (OTLP log records) arrive in separate requests: whichever came first
    waits here for the other (grading/otlp/pending.py). Kept, without its content, until it expires once the call
    is written or refused, so that an exporter's resend of either part finds it settled instead of waiting again."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    # From the span, once it came; its messages are awaited from then on.
    span_seen_at = models.DateTimeField(null=True, blank=True)
    conversation_external_id = models.CharField(max_length=200, blank=True)
    application = models.CharField(max_length=100, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    response_id = models.CharField(max_length=200, blank=True)
    end_user = models.CharField(max_length=200, blank=True, help_text="The span's `enduser.id`, else its resource's.")
    metadata = models.JSONField(default=dict, blank=True, help_text="What the span names of what produced the call.")
    # What its log records (PendingEvent rows) add up to, kept as they are appended: nothing reads them back to
    # learn whether the call's reply is here or what the call holds.
    replied = models.BooleanField(default=False, help_text="A reply event (the last of a call's) is here.")
    event_count = models.PositiveIntegerField(default=0)
    stored_bytes = models.BigIntegerField(default=0, help_text="The UTF-8 JSON size of its events' fields.")
    received_at = models.DateTimeField(auto_now_add=True)
    written_at = models.DateTimeField(null=True, blank=True)
    refused = models.CharField(
        max_length=500,
        blank=True,
        help_text="Why the call can never be written: its content went, its parts are refused.",
    )

    class Meta:
        app_label = APP
        constraints = [models.UniqueConstraint(fields=["org", "trace_id", "span_id"], name="pending_call_one_per_span")]
        indexes = [
            models.Index(fields=["org", "conversation_external_id"]),
            models.Index(fields=["org", "received_at"]),
            models.Index(fields=["received_at"], name="pending_call_expiry"),
            # The org's waiting calls and their bytes, counted against its caps on every request.
            models.Index(
                fields=["org"],
                include=["stored_bytes"],
                condition=models.Q(written_at=None, refused=""),
                name="pending_call_waiting",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id}/{self.span_id}"


class PendingEvent(models.Model):
    """One content event (an OTLP log record) of a waiting call, in the order they arrived (by id). A row each, so a
    record is appended without reading back the call's others; `key` makes a resent record a no-op."""

    call = models.ForeignKey(PendingCall, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    values = models.JSONField(help_text="The event's fields: the record's attributes and, over them, its body's.")
    time = models.BigIntegerField(help_text="The record's time in nanoseconds.")
    key = models.CharField(max_length=64, help_text="SHA-256 of name, fields and time: what makes it itself.")

    class Meta:
        app_label = APP
        constraints = [models.UniqueConstraint(fields=["call", "key"], name="pending_event_one_per_record")]

    def __str__(self) -> str:
        return f"{self.call_id}: {self.name}"


class EvaluationExport(models.Model):
    """One try at sending a review's (or a decision's) `gen_ai.evaluation.result` records. Every try is kept,
    failed ones included, so the health view can count what did not get out."""

    class Event(models.TextChoices):
        REVIEW = "review", "review"
        DECISION = "decision", "decision"

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="evaluation_exports")
    event = models.CharField(max_length=16, choices=Event.choices)
    endpoint = models.URLField(max_length=1000)
    attempt = models.PositiveSmallIntegerField()
    records = models.PositiveSmallIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    delivered = models.BooleanField(default=False)
    final = models.BooleanField(default=False, help_text="No further try follows (delivered, refused or given up).")
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        app_label = APP

    def __str__(self) -> str:
        return f"{self.event} of review {self.review_id} try {self.attempt}: {self.status_code or self.error}"
