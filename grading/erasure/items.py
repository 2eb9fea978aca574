"""Erasing a batch of items of one kind, in the caller's transaction, with the items' rows locked (grading/erasure/
runs.py takes the locks, and the criteria trials' before them).

What goes, for each item: the evidence (messages, thumbs, the spans they came from, a draft's body, the OTLP calls still
waiting for their other part that would make or extend it), every review of it (trial reviews included) with what hangs
on a review (decisions, people's answers, webhook deliveries and evaluation exports, and the people side's claims,
assignments and notices, which the ORM's cascade takes: grading names no table of theirs), labels, the org learnings
drawn from its decisions (with their embeddings) and their text wherever another draft's review quoted them, the worked
examples quoting it (a published version's too: the judge stops reading them), its corrections (a corrected body or an
expected reply: they hold its text), its place in criteria trials, and its copies in regression sets with what their
runs said of them (grading/sets/erasure.py: a copy of erased text is still the text).

What stays: content-free tombstones. The erasure row counts what went; one audit event `item.erase` per item names
it by id with counts only, and who asked (the person or the API key; the retention pass asks as the machine, and
says so); the item's earlier audit events keep only the details known to hold no content (ids, verdicts, times),
and name the keys dropped. The judge spend ledger stays as it is: it names no item, and the
money was spent.

The dashboards' counters lose what the reviews contributed and the thumbs, and gain the erased items' counter, in
this transaction (`ErasedBatch.counters`, booked last by the caller): a rebuild afterwards finds no drift.
"""

import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import reduce

from django.db.models import F, Q, QuerySet

from grading.core.weeks import monday
from grading.models import (
    Answer,
    AuditEvent,
    Conversation,
    Correction,
    CriteriaExample,
    CriteriaTrial,
    CriteriaVersion,
    Decision,
    Draft,
    Erasure,
    ErasureScope,
    ItemKind,
    Label,
    MemoryItem,
    Org,
    Review,
    TrialFigures,
)
from grading.models.audit import audit_event
from grading.models.otlp import PendingCall, SpanLink
from grading.reviews.rollups import erased_cell, rollups_erasing
from grading.sets.erasure import set_copies_erase

# Audit details known to hold no content: ids, verdicts, times, names of people and pools. Everything else in an
# erased item's earlier events (a decline's reason, a replaced answer's note, whatever a later event adds) is dropped.
CONTENT_FREE_DETAIL = frozenset(
    {
        "review", "reviews", "claim", "via", "expires_at", "kind", "basis", "outcome", "checks", "fingerprint",
        "criteria_version", "keep_as_learning", "slots", "to", "until", "was", "holder", "expired_at", "noticed_by",
        "revision", "check", "human_verdict", "example", "item", "erasure", "scrubbed",
    }
)  # fmt: skip


@dataclass
class ErasedBatch:
    items: list[int]
    counts: Counter = field(default_factory=Counter)  # rows erased, per model name ("conversation", "message", ...)
    filed: Counter = field(default_factory=Counter)  # (kind, application, ISO date of the week) -> items
    counters: Counter = field(default_factory=Counter)  # the rollups' increments, for the caller to book last


def trials_naming(*, org_id: int, kind: str, item_ids: Sequence[int]) -> list[int]:
    """The org's criteria trials of `kind` whose sample names any of the items: lock these before the items (a
    trial item's write locks its trial, then its item)."""
    if not item_ids:
        return []
    # JSON containment of each id (`sample @> '[id]'`), one term per item of the batch: trials are few per org.
    naming = reduce(operator.or_, (Q(sample__contains=[pk]) for pk in item_ids))
    trials = CriteriaTrial.objects.filter(naming, org_id=org_id, criteria_version__kind=kind)
    trials = trials.select_for_update(of=("self",))
    return list(trials.order_by("pk").values_list("pk", flat=True))


def items_erase(
    *, org: Org, kind: str, items: Sequence[Conversation | Draft], erasure: Erasure, trial_ids: Sequence[int] = ()
) -> ErasedBatch:
    """Erase `items` (of `kind`, locked by the caller, as are the trials `trial_ids` naming them) and everything
    derived from them, for `erasure`. Returns what went, and the counters' increments the caller books last."""
    batch = ErasedBatch([item.pk for item in items])
    if not items:
        return batch
    subject = f"{kind}_id"
    # Locked before anything hanging on them goes: a claim, an answer or a webhook try being written for one of them
    # waits, then finds it gone, instead of its row outliving the review (the keys are checked at commit).
    reviews = Review.objects.filter(**{f"{subject}__in": batch.items}).select_for_update().order_by("pk")
    reviews = dict(reviews.values_list("pk", subject))
    review_ids = sorted(reviews)
    conversation_ids = batch.items if kind == ItemKind.CONVERSATION else []
    batch.counters = rollups_erasing(review_ids=review_ids, conversation_ids=conversation_ids)
    _audit(org, kind, items, reviews, erasure)
    learnings = _learnings_of(review_ids)
    _quotes_erase(org, learnings, batch)
    _examples_erase(org, kind, items, batch)
    _trials_rewrite(trial_ids, set(batch.items), set(review_ids))
    # Named like `_deleted`'s counts: the erasure's report says how many copies in sets went.
    batch.counts["regressionitem"] += set_copies_erase(org_id=org.pk, kind=kind, item_ids=batch.items)
    batch.counts.update(_deleted(MemoryItem.objects.filter(pk__in=learnings)))
    # Named rather than left to the reviews' cascade: they hold the item's text and the person's.
    batch.counts.update(_deleted(Correction.objects.filter(**{f"{subject}__in": batch.items})))
    batch.counts.update(_deleted(Answer.objects.filter(review_id__in=review_ids)))
    batch.counts.update(_deleted(Decision.objects.filter(review_id__in=review_ids)))
    batch.counts.update(_deleted(Review.objects.filter(pk__in=review_ids)))
    batch.counts.update(_deleted(Label.objects.filter(**{f"{subject}__in": batch.items})))
    if kind == ItemKind.CONVERSATION:  # before the conversations: their messages' spans say which traces are theirs
        external_ids = [item.external_id for item in items]
        batch.counts.update(_deleted(waiting_calls_of(org_id=org.pk, external_ids=external_ids)))
    model = Conversation if kind == ItemKind.CONVERSATION else Draft
    batch.counts.update(_deleted(model.objects.filter(pk__in=batch.items)))
    for item in items:
        application, week = _filed_by(kind, item)
        batch.filed[(kind, application, week.isoformat())] += 1
        batch.counters[erased_cell(org_id=org.pk, kind=kind, application=application, week=week)] += 1
    return batch


def waiting_calls_of(*, org_id: int, external_ids: Sequence[str]) -> QuerySet[PendingCall]:
    """The OTLP model calls waiting for their other part (or kept, written, for an exporter's resend) that would
    make or extend these conversations: those whose span named one, and the log records whose span has not come
    (so they name no conversation yet) in one of their traces: the traces of their messages' spans and of their
    waiting calls, and the external id itself, which is the trace id of a conversation its spans did not name."""
    named = PendingCall.objects.filter(org_id=org_id, conversation_external_id__in=external_ids)
    linked = SpanLink.objects.filter(conversation__org_id=org_id, conversation__external_id__in=external_ids)
    traces = (
        Q(trace_id__in=external_ids)
        | Q(trace_id__in=named.values("trace_id"))
        | Q(trace_id__in=linked.values("trace_id"))
    )
    return PendingCall.objects.filter(org_id=org_id).filter(
        Q(conversation_external_id__in=external_ids) | Q(traces, span_seen_at=None)
    )


def waiting_calls_erase(calls: QuerySet[PendingCall]) -> Counter:
    """Erase waiting calls that no item's erasure took (their conversation was never written): rows per model."""
    return _deleted(calls)


def items_to_lock(model: type[Conversation | Draft]) -> list[str]:
    """The columns an erasure reads of the items it locks: what it files them by and names them with."""
    common = ["id", "org_id", "external_id", "updated_at"]
    return common + (["application", "started_at", "message_count"] if model is Conversation else [])


def _filed_by(kind: str, item: Conversation | Draft) -> tuple[str, object]:
    if kind == ItemKind.CONVERSATION:
        return item.application, monday(item.started_at)
    return "", monday(item.updated_at)


def _deleted(rows) -> Counter:
    """Delete, cascades included (the people side's rows go with the reviews they hang on), and count per model."""
    _, per_model = rows.delete()
    return Counter({label.split(".")[1].lower(): n for label, n in per_model.items() if n})


def _audit(org: Org, kind: str, items: Sequence, reviews: dict[int, int], erasure: Erasure) -> None:
    """Scrub the items' earlier audit events of content, then record one content-free event per item erased, by
    whoever asked for the erasure."""
    events = AuditEvent.objects.filter(org=org, item_kind=kind, item_id__in=[item.pk for item in items])
    scrubbed = []
    for event in events.only("pk", "detail"):
        detail = event.detail
        dropped = sorted(key for key in detail if key not in CONTENT_FREE_DETAIL) if isinstance(detail, dict) else []
        if dropped or not isinstance(detail, dict):
            kept = {key: value for key, value in detail.items() if key in CONTENT_FREE_DETAIL} if dropped else {}
            event.detail = kept | {"scrubbed": dropped or ["detail"]}
            scrubbed.append(event)
    AuditEvent.objects.bulk_update(scrubbed, ["detail"])
    per_item = Counter(reviews.values())
    # A person (the erasure page) or a key (the API) asked; nobody asks a retention erasure: the daily pass does.
    by = {"actor": erasure.requested_by, "api_key": erasure.api_key}
    via = {"via": "retention"} if erasure.scope == ErasureScope.RETENTION else {}
    erased = []
    for item in items:
        counts = {"reviews": per_item[item.pk]}
        if kind == ItemKind.CONVERSATION:
            counts["messages"] = item.message_count
        detail = {"erasure": erasure.pk, **counts, **via}
        erased.append(audit_event(action="item.erase", org=org, item=item, detail=detail, **by))
    AuditEvent.objects.bulk_create(erased)


def _learnings_of(review_ids: Sequence[int]) -> list[int]:
    """The org learnings drawn from the reviews' decisions: linked either way (before MemoryItem.decision existed,
    only the decision named its learning)."""
    decisions = Decision.objects.filter(review_id__in=review_ids)
    linked = MemoryItem.objects.filter(Q(decision__in=decisions) | Q(pk__in=decisions.values("learning_id")))
    return sorted(linked.values_list("pk", flat=True))


def _quotes_erase(org: Org, learnings: Sequence[int], batch: ErasedBatch) -> None:
    """Other drafts' reviews list the learnings their judge read (`memory_used`), text included: the text of an
    erased learning goes from them, its id stays (the review's memory snapshot hashed what was read)."""
    if not learnings:
        return
    erased = set(learnings)
    quoting = Review.objects.filter(org=org, kind=ItemKind.DRAFT).filter(
        Q.create([("memory_used__learnings__contains", [{"id": pk}]) for pk in learnings], connector=Q.OR)
    )
    for pk, memory_used in quoting.values_list("pk", "memory_used"):
        for entry in memory_used.get("learnings", []):
            if entry.get("id") in erased:
                entry["text"], entry["erased"] = "", True
        Review.objects.filter(pk=pk).update(memory_used=memory_used)
        batch.counts["learning_quote"] += 1


def _examples_erase(org: Org, kind: str, items: Sequence, batch: ErasedBatch) -> None:
    """The worked examples quoting the items go, from published versions too: the version's revision moves on, so
    every process reads its examples afresh (grading/reviews/examples.py caches a published version's by it)."""
    external_ids = [item.external_id for item in items]
    # By key, or by external id once the key was cleared (the item deleted before): an id is unique per org and kind.
    quoting = CriteriaExample.objects.filter(org=org, criteria_version__kind=kind).filter(
        Q(**{f"{kind}_id__in": [item.pk for item in items]}) | Q(external_id__in=external_ids)
    )
    versions = sorted(set(quoting.values_list("criteria_version_id", flat=True)))
    if not versions:
        return
    batch.counts.update(_deleted(quoting))
    CriteriaVersion.objects.filter(pk__in=versions).update(revision=F("revision") + 1)


def _trials_rewrite(trial_ids: Sequence[int], item_ids: set[int], review_ids: set[int]) -> None:
    """A trial's sample keeps its positions (its tasks name them): an erased item's becomes 0 and its trial review
    0, "the item was gone", as a trial item deleted before it was graded reads."""
    for trial in CriteriaTrial.objects.filter(pk__in=list(trial_ids)).order_by("pk"):
        sample = [0 if pk in item_ids else pk for pk in trial.sample]
        graded = [
            0 if review_id is not None and (review_id in review_ids or pk in item_ids) else review_id
            for pk, review_id in zip(trial.sample, trial.review_ids, strict=True)
        ]
        if sample != trial.sample or graded != trial.review_ids:
            CriteriaTrial.objects.filter(pk=trial.pk).update(sample=sample, review_ids=graded)
            # Its stored figures and items name the item (its id, people's verdict on it): counted again when read.
            TrialFigures.objects.filter(trial_id=trial.pk).delete()
