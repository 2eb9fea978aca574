"""Erasures asked for, worked to the end in short batches, and the daily retention pass.

An erasure is asked for by an org admin (the page) or a pipeline (the API): one conversation or draft by external
id, or every item naming an end user. The daily retention pass asks for one per retention policy with items past
it. Each is worked by the task `erasure_run`, one batch per transaction:

1. Lock the erasure's row (two workers on one erasure take turns), then the criteria trials naming the batch's
   candidates, then the items themselves in id order, checking again under the lock that each still matches (a
   conversation active again since the retention pass chose it stays).
2. Erase them (grading/erasure/items.py), save the cursor (the last item id erased) and the counts on the erasure
   row, and book the counters last, all in the one transaction: a worker that dies mid-batch leaves nothing of it
   half-written, and the next run starts after the cursor.
3. Once no item is left, erase the OTLP model calls still waiting for their other part that the erasure reaches
   without an item (a conversation not written yet, an end user's calls), a batch at a time, counted likewise.

A batch holds its items' rows, their reviews' and a few counters' for as long as it runs; BATCH_SIZE keeps that
far under a second (bench/bench_erasure.py), so grading and the queue wait on it no longer than that.
"""

import hashlib
from collections import Counter
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import BinaryField, CharField, Func, Q, QuerySet, Value
from django.utils import timezone

from grading.delivery import enqueue
from grading.erasure.items import (
    ErasedBatch,
    items_erase,
    items_to_lock,
    trials_naming,
    waiting_calls_erase,
    waiting_calls_of,
)
from grading.models import (
    ApiKey,
    Conversation,
    Draft,
    Erasure,
    ErasureScope,
    ErasureState,
    ItemKind,
    Org,
    RetentionPolicy,
)
from grading.models.audit import audit_record
from grading.models.otlp import PendingCall
from grading.reviews.rollups import rollups_book

BATCH_SIZE = 100
_MODELS = {ItemKind.CONVERSATION: Conversation, ItemKind.DRAFT: Draft}
# What each retention policy measures an item's age by: a conversation's last message, a draft's last submission.
_LAST_ACTIVE = {ItemKind.CONVERSATION: "last_activity_at", ItemKind.DRAFT: "updated_at"}


class ItemNotFound(Exception):
    """No item of the org has that external id, nor (a conversation) do OTLP calls waiting to make one: another
    org's are not found either. Nothing was asked."""


def end_user_hash(end_user: str) -> str:
    """What an erasure's tombstone keeps of an end user: the SHA-256 of the id, never the id."""
    return hashlib.sha256(end_user.encode()).hexdigest()


# --- asking ----------------------------------------------------------------------------------------------------


def erasure_request(
    *,
    org: Org,
    scope: str,
    target: str,
    requested_by: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
) -> Erasure:
    """Ask for an erasure, audited with who asked, and send it to a worker after commit. `target` is an external id
    (scope conversation or draft: ItemNotFound unless the org has it) or an end-user id (kept only hashed)."""
    if scope in (ErasureScope.CONVERSATION, ErasureScope.DRAFT):
        _item_check(org, scope, target)
        kind = scope
    elif scope == ErasureScope.END_USER:
        kind, target = "", end_user_hash(target)
    else:
        raise ValueError(f"not a scope one asks for: {scope!r}")
    with transaction.atomic():
        erasure = Erasure.objects.create(
            org=org,
            scope=scope,
            kind=kind,
            target=target,
            requested_by=requested_by if requested_by is not None and requested_by.is_authenticated else None,
            api_key=api_key,
            requested_at=timezone.now(),
        )
        audit_record(
            action="erasure.request",
            org=org,
            actor=requested_by,
            api_key=api_key,
            target=erasure,
            detail={"scope": scope, "target": target},
        )
        transaction.on_commit(lambda: enqueue.erasure_run(erasure_id=erasure.pk))
    return erasure


def erasure_preview(*, org: Org, scope: str, target: str) -> dict[str, int]:
    """What an erasure asked now would erase, in rows per kind of row as its tombstone counts them (the confirm step
    shows it). The erasure's own steps run (its items, then its waiting calls, each step's reads, locks and
    cascades) in a transaction rolled back at the end, so the preview cannot count otherwise than the erasure does;
    the counters are not booked, so their rows are never locked. ItemNotFound for one item the org does not have."""
    if scope in (ErasureScope.CONVERSATION, ErasureScope.DRAFT):
        _item_check(org, scope, target)
    target = end_user_hash(target) if scope == ErasureScope.END_USER else target
    counts: Counter = Counter()
    with transaction.atomic():
        kind = "" if scope == ErasureScope.END_USER else scope
        asked = Erasure.objects.create(org=org, scope=scope, kind=kind, target=target, requested_at=timezone.now())
        for kind in _kinds(asked):
            candidates = list(_matching(asked, kind).order_by("pk").values_list("pk", flat=True))
            counts += _items_erase(asked, kind, candidates).counts
        counts += waiting_calls_erase(_waiting_calls(asked))
        transaction.set_rollback(True)
    return dict(sorted(counts.items()))


def _item_check(org: Org, kind: str, external_id: str) -> None:
    if _MODELS[kind].objects.filter(org=org, external_id=external_id).exists():
        return
    if kind == ItemKind.CONVERSATION and waiting_calls_of(org_id=org.pk, external_ids=[external_id]).exists():
        return  # its calls wait for their other part: the conversation is on its way, and its content here
    raise ItemNotFound(f"no {kind} {external_id}")


def erasure_counts(erasure: Erasure) -> dict[str, int]:
    """The rows erased so far, per kind of row (without the cells the erased-items counter was filed in)."""
    return {name: n for name, n in erasure.erased.items() if name != "filed"}


def retention_pass(*, now: datetime | None = None) -> list[int]:
    """The daily pass: an erasure for each retention policy with items past it, and every erasure left unfinished
    (its worker died) sent again. Returns the erasures sent."""
    now = now or timezone.now()
    sent = []
    unfinished = Erasure.objects.exclude(state=ErasureState.DONE)
    for policy in RetentionPolicy.objects.select_related("org").order_by("pk"):
        before = now - timedelta(days=policy.days)
        working = unfinished.filter(org_id=policy.org_id, scope=ErasureScope.RETENTION, kind=policy.kind)
        past = Erasure(org_id=policy.org_id, scope=ErasureScope.RETENTION, kind=policy.kind, before=before)
        if working.exists() or not _matching(past, policy.kind).exists():
            continue  # the unfinished one is resumed below; it erases the rest tomorrow
        with transaction.atomic():
            erasure = Erasure.objects.create(
                org=policy.org, scope=ErasureScope.RETENTION, kind=policy.kind, before=before, requested_at=now,
                target=f"{policy.days} days",
            )  # fmt: skip
            audit_record(
                action="erasure.request",
                org=policy.org,
                target=erasure,
                detail={"scope": ErasureScope.RETENTION, "kind": policy.kind, "days": policy.days},
            )
        sent.append(erasure.pk)
    sent += list(unfinished.exclude(pk__in=sent).order_by("pk").values_list("pk", flat=True))
    for erasure_id in sent:
        enqueue.erasure_run(erasure_id=erasure_id)
    return sent


# --- working ---------------------------------------------------------------------------------------------------


def erasure_run(*, erasure_id: int, batch_size: int = BATCH_SIZE) -> Erasure | None:
    """Work an erasure to its end, one batch per transaction; None when there is no such erasure."""
    while True:
        erasure = erasure_batch(erasure_id=erasure_id, batch_size=batch_size)
        if erasure is None or erasure.state == ErasureState.DONE:
            return erasure


def erasure_batch(*, erasure_id: int, batch_size: int = BATCH_SIZE) -> Erasure | None:
    """One batch of an erasure, in one transaction (the module's steps 1 and 2); done once nothing is left."""
    with transaction.atomic():
        # Of the erasure's row alone: every grading write and claim takes its org's row as a key (KEY SHARE).
        erasure = (
            Erasure.objects.select_for_update(of=("self",))
            .select_related("org", "requested_by", "api_key")  # who asked: each item's event names them
            .filter(pk=erasure_id)
            .first()
        )
        if erasure is None or erasure.state == ErasureState.DONE:
            return erasure
        for kind in _kinds(erasure):
            candidates = list(_matching(erasure, kind).order_by("pk").values_list("pk", flat=True)[:batch_size])
            if not candidates:
                continue
            batch = _items_erase(erasure, kind, candidates)
            erasure.state = ErasureState.RUNNING
            erasure.cursor = max(candidates)
            erasure.erased = _added(erasure.erased, batch.counts, batch.filed)
            erasure.save(update_fields=["state", "cursor", "erased"])
            rollups_book(batch.counters)  # last: the counters' rows are the hottest this transaction holds
            return erasure
        waiting = list(_waiting_calls(erasure).order_by("pk").values_list("pk", flat=True)[:batch_size])
        if waiting:  # step 3
            counts = waiting_calls_erase(PendingCall.objects.filter(pk__in=waiting))
            erasure.state = ErasureState.RUNNING
            erasure.erased = _added(erasure.erased, counts, Counter())
            erasure.save(update_fields=["state", "erased"])
            return erasure
        erasure.state, erasure.finished_at = ErasureState.DONE, timezone.now()
        erasure.save(update_fields=["state", "finished_at"])
        return erasure


def _items_erase(erasure: Erasure, kind: str, candidates: list[int]) -> ErasedBatch:
    """Lock the trials naming the candidates, then those of them that still match (in id order), and erase them."""
    trial_ids = trials_naming(org_id=erasure.org_id, kind=kind, item_ids=candidates)
    items = list(
        _matching(erasure, kind)
        .filter(pk__in=candidates)
        .only(*items_to_lock(_MODELS[kind]))
        .order_by("pk")
        .select_for_update()
    )
    return items_erase(org=erasure.org, kind=kind, items=items, erasure=erasure, trial_ids=trial_ids)


def _kinds(erasure: Erasure) -> list[str]:
    return [erasure.kind] if erasure.kind else [ItemKind.CONVERSATION, ItemKind.DRAFT]


def _matching(erasure: Erasure, kind: str) -> QuerySet:
    """The items of `kind` the erasure still has to erase.

    One item, or a retention period's, after the cursor. An end user's items are found by the hash the erasure
    keeps, over the org's items that name an end user (an index of their own), afresh each batch: what a batch
    erased is gone, and the cursor (one number) cannot say where the two kinds stand."""
    items = _MODELS[kind].objects.filter(org_id=erasure.org_id)
    if erasure.scope == ErasureScope.END_USER:
        return _naming(items, erasure.target)
    items = items.filter(pk__gt=erasure.cursor)
    if erasure.scope == ErasureScope.RETENTION:
        return items.filter(**{f"{_LAST_ACTIVE[kind]}__lt": erasure.before})
    return items.filter(external_id=erasure.target)


def _naming(rows: QuerySet, end_user_hash: str) -> QuerySet:
    """The rows whose `end_user` has that hash (computed by the database: the erasure keeps only the hash)."""
    utf8 = Func("end_user", Value("UTF8"), function="convert_to", output_field=BinaryField())
    hex_digest = Func(Func(utf8, function="sha256", output_field=BinaryField()), Value("hex"), function="encode",
                      output_field=CharField())  # fmt: skip
    return rows.exclude(end_user="").alias(end_user_hash=hex_digest).filter(end_user_hash=end_user_hash)


def _waiting_calls(erasure: Erasure) -> QuerySet[PendingCall]:
    """The OTLP model calls waiting for their other part that the erasure reaches, besides those its items take
    (grading/erasure/items.py): a conversation's, by external id (it may not be written yet), or those naming the
    end user, with the log records waiting in their traces (whose span has not come to name anyone)."""
    calls = PendingCall.objects.filter(org_id=erasure.org_id)
    if erasure.scope == ErasureScope.CONVERSATION:
        return waiting_calls_of(org_id=erasure.org_id, external_ids=[erasure.target])
    if erasure.scope != ErasureScope.END_USER:
        return calls.none()
    named = _naming(calls, erasure.target)
    return calls.filter(Q(pk__in=named.values("pk")) | Q(span_seen_at=None, trace_id__in=named.values("trace_id")))


def _added(erased: dict, counts: Counter, filed: Counter) -> dict:
    """The erasure's counts with a batch's added: rows per model name, and under "filed" the items per (kind,
    application, week) that the erased-items counter books (grading/reviews/rollups.py counts it from these)."""
    total = Counter({key: value for key, value in erased.items() if key != "filed"}) + counts
    cells = Counter({(kind, application, week): n for kind, application, week, n in erased.get("filed", [])}) + filed
    return {**dict(sorted(total.items())), "filed": [[*cell, n] for cell, n in sorted(cells.items())]}
