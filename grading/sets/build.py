"""Building a regression set: items of one kind copied out of the record with the answers people expected.

Which items: those a filter selects (an application, a range of ISO weeks of the item's start, dimension values in its
metadata) or those named by external id. Where their expected answers come from, one source per set:

- `decisions`: the item's decision on its present evidence (grading/reviews/human.py, the trials' reading): each
  check's answer, and the whole item's verdict from the outcome (a draft approved passes, rejected or sent back
  fails; a conversation's outcome is its answers summarised as a route would be).
- `labels`: the answer every label of a check gives on the present evidence (labels split on a check give none),
  and the whole item's verdict from a `pass_fail` label when there is one.
- `corrections`: what a person said the item should have been. A corrected draft approved: its present body (the
  corrected revision), expected to pass. An expected reply: the active path up to the corrected message with the
  reply in the agent's place, expected to pass as a whole; it says nothing of each check, so it expects none.
  A correction whose evidence the item has moved on from speaks for nothing the item holds, and is skipped; so is
  one of an item still waiting for people, as the corrections' export leaves it out.

An item with no expected answer from the source is skipped and counted (`RegressionSet.skipped`). What is copied
is the evidence the expected answer was given on, frozen: a later edit of the item changes nothing in the set.
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import date

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from grading.core.errors import FieldInvalid
from grading.core.evidence import EvidenceMessage, fingerprint
from grading.core.sql_expressions import id_in
from grading.core.weeks import FIRST_WEEK, LAST_WEEK, in_weeks
from grading.figures.definitions import PASS_FAIL
from grading.models import (
    ApiKey,
    Conversation,
    Correction,
    Decision,
    Draft,
    ItemKind,
    Org,
    RegressionItem,
    RegressionSet,
    Review,
    SetSource,
)
from grading.models.audit import audit_record
from grading.reviews.conversation_reads import conversation_path
from grading.reviews.human import DECISIONS, LABELS, human_verdicts

MAX_ITEMS = 10_000  # a set is graded in full on every run: each item is at least one paid judge call
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"  # a name the CLI and a URL path carry as they are
_MODELS = {ItemKind.CONVERSATION: Conversation, ItemKind.DRAFT: Draft}
_STARTED = {ItemKind.CONVERSATION: "started_at", ItemKind.DRAFT: "created_at"}


class SetRefused(FieldInvalid):
    """A set was not built (or not run): `field` names what was wrong. Nothing was written."""


@dataclass(frozen=True)
class SetFilter:
    """Which items, when the set is not built from ids: every bound given must hold."""

    application: str = ""
    since: date | None = None  # the Monday of the first ISO week, included
    until: date | None = None  # the Monday of the last ISO week, included
    dimensions: dict[str, str] = field(default_factory=dict)  # metadata name -> value


@dataclass(frozen=True)
class Expected:
    evidence: dict | list
    fingerprint: str
    checks: dict[str, str]
    verdict: str  # "pass", "fail" or "" when the source says nothing of the whole item


def set_build(
    *,
    org: Org,
    name: str,
    kind: str,
    source: str,
    item_filter: SetFilter | None = None,
    external_ids: Sequence[str] | None = None,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
) -> RegressionSet:
    """Build the set `name` of the org's items of `kind` that `item_filter` selects or `external_ids` names, with
    their expected answers from `source`. Raises SetRefused (naming the field) and writes nothing when the name is
    taken, the items are more than MAX_ITEMS or an id names no item of the org."""
    items = _items(org, kind, item_filter, external_ids)
    copies = _copies(org, kind, source, items)
    described = built_from(source, item_filter, external_ids)
    try:
        with transaction.atomic():
            regression_set = RegressionSet.objects.create(
                org=org,
                name=name,
                kind=kind,
                built_from=described,
                skipped=len(items) - len(copies),
                created_by=actor if actor is not None and actor.is_authenticated else None,
                created_by_key=api_key,
            )
            RegressionItem.objects.bulk_create(
                RegressionItem(
                    regression_set=regression_set,
                    org=org,
                    kind=kind,
                    item_id=item.pk,
                    external_id=item.external_id,
                    application=getattr(item, "application", ""),
                    fingerprint=expected.fingerprint,
                    evidence=expected.evidence,
                    metadata=item.metadata,
                    source=source,
                    expected=expected.checks,
                    expected_verdict=expected.verdict,
                )
                for item, expected in copies
            )
            audit_record(
                action="set.build",
                org=org,
                actor=actor,
                api_key=api_key,
                target=regression_set,
                detail={"name": name, "items": len(copies), "skipped": regression_set.skipped, **described},
            )
    except IntegrityError as exc:  # regression_set_name_once: another build took the name first
        raise SetRefused("name", f"the org already has a set named {name!r}") from exc
    return regression_set


def _items(
    org: Org, kind: str, item_filter: SetFilter | None, external_ids: Sequence[str] | None
) -> list[Conversation | Draft]:
    model = _MODELS[kind]
    items: QuerySet = model.objects.filter(org=org)
    if external_ids is not None:
        wanted = list(dict.fromkeys(external_ids))
        found = list(items.filter(external_id__in=wanted).order_by("pk"))
        missing = sorted(set(wanted) - {item.external_id for item in found})
        if missing:
            raise SetRefused("ids", f"no {kind} of this org has the id {missing[0]!r}")
    else:
        item_filter = item_filter or SetFilter()
        if item_filter.application:
            items = items.filter(application=item_filter.application) if kind == ItemKind.CONVERSATION else items
        if item_filter.since or item_filter.until:
            since, until = item_filter.since or FIRST_WEEK, item_filter.until or LAST_WEEK
            items = items.filter(in_weeks(_STARTED[kind], since=since, until=until))
        for name, value in item_filter.dimensions.items():
            items = items.filter(metadata__contains={name: value})
        found = list(items.order_by("pk")[: MAX_ITEMS + 1])
    if len(found) > MAX_ITEMS:
        raise SetRefused("filter", f"it selects more than {MAX_ITEMS} items, the most a set holds: narrow it")
    return found


def _copies(
    org: Org, kind: str, source: str, items: list[Conversation | Draft]
) -> list[tuple[Conversation | Draft, Expected]]:
    """Each item with its expected answers from `source` and the evidence they were given on; those with none left
    out."""
    if source == SetSource.CORRECTIONS:
        return _corrected(kind, items)
    ids = [item.pk for item in items]
    verdicts = human_verdicts(org_id=org.pk, kind=kind, source=DECISIONS if source == SetSource.DECISIONS else LABELS,
                              item_ids=ids)  # fmt: skip
    outcomes = {}
    if source == SetSource.DECISIONS:
        reviews = [v.review_id for v in verdicts.values() if v.review_id]
        outcomes = dict(Decision.objects.filter(id_in("review_id", reviews)).values_list("review_id", "outcome"))
    copies = []
    for item in items:
        verdict = verdicts.get(item.pk)
        if verdict is None:
            continue
        checks = {check: answer for check, answer in verdict.checks.items() if check != PASS_FAIL}
        whole = verdict.checks.get(PASS_FAIL, "")
        if verdict.review_id in outcomes:
            whole = _whole(kind, outcomes[verdict.review_id])
        evidence, print_ = _evidence(item)
        if print_ != verdict.fingerprint:  # the item moved on between the two reads: its verdict is on other evidence
            continue
        copies.append((item, Expected(evidence, print_, checks, whole)))
    return copies


def _whole(kind: str, outcome: str) -> str:
    """A decision's verdict on the whole item: a draft approved passes (rejected or sent back fails); a conversation's
    outcome is its checks' answers summarised as a route (pass, fail or unknown)."""
    if kind == ItemKind.DRAFT:
        return "pass" if outcome == Decision.Outcome.APPROVE else "fail"
    return outcome


def _corrected(kind: str, items: list[Conversation | Draft]) -> list[tuple[Conversation | Draft, Expected]]:
    wanted = Correction.State.APPROVED if kind == ItemKind.DRAFT else Correction.State.KEPT
    ids = [item.pk for item in items]
    # As the corrections' export reads them (grading/dashboard/corrections.py): not while the item waits for people,
    # whose answer it is not yet (and whom blind review keeps from it).
    waiting = Review.objects.waiting().filter(id_in(f"{kind}_id", ids)).values(kind)
    latest: dict[int, Correction] = {}
    corrections = Correction.objects.filter(id_in(f"{kind}_id", ids), state=wanted).exclude(**{f"{kind}__in": waiting})
    for correction in corrections.order_by("created_at", "pk"):
        latest[getattr(correction, f"{kind}_id")] = correction
    copies = []
    for item in items:
        correction = latest.get(item.pk)
        if correction is None:
            continue
        if kind == ItemKind.DRAFT:
            if item.fingerprint != correction.corrected_fingerprint:  # resubmitted since: the revision is not it
                continue
            evidence, print_ = _evidence(item)
        else:
            replied = _replied(item, correction)
            if replied is None:
                continue
            evidence, print_ = replied
        copies.append((item, Expected(evidence, print_, {}, "pass")))
    return copies


def _replied(conversation: Conversation, correction: Correction) -> tuple[list, str] | None:
    """The active path up to the corrected message with the expected reply as its text, when the path still holds
    the evidence the correction was made on."""
    path = conversation_path(conversation).path
    upto = next((i for i, m in enumerate(path) if m.id == correction.message_external_id), None)
    if upto is None or fingerprint(path[: upto + 1]) != correction.evidence_fingerprint:
        return None
    replied = [*path[:upto], EvidenceMessage(**{**asdict(path[upto]), "content": correction.corrected})]
    return [_message_json(m) for m in replied], fingerprint(replied)


def _evidence(item: Conversation | Draft) -> tuple[dict | list, str]:
    """What a run judges of the item, as it is now, and the fingerprint of it."""
    if isinstance(item, Draft):
        body = {"title": item.title, "slug": item.slug, "body": item.body, "source_urls": item.source_urls}
        return body, item.fingerprint
    path = conversation_path(item).path
    return [_message_json(m) for m in path], fingerprint(path)


def _message_json(message: EvidenceMessage) -> dict:
    as_json = asdict(message)
    as_json["created_at"] = message.created_at.isoformat() if message.created_at else None
    return as_json


def built_from(source: str, item_filter: SetFilter | None, external_ids: Sequence[str] | None) -> dict:
    """How a set is built, as it keeps it (`RegressionSet.built_from`): its source, and its ids or its filter."""
    if external_ids is not None:
        return {"source": source, "ids": list(dict.fromkeys(external_ids))}
    item_filter = item_filter or SetFilter()
    return {
        "source": source,
        "application": item_filter.application,
        "since": item_filter.since.isoformat() if item_filter.since else None,
        "until": item_filter.until.isoformat() if item_filter.until else None,
        "dimensions": item_filter.dimensions,
    }
