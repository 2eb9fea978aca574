"""Criteria versions: the seeded v1 of each kind, the active version, new versions cloned from any
version, edits of unpublished versions under an optimistic lock, and publication.

A published version never changes: every write here refuses one (CriteriaImmutable), and so do the pages, the forms
and the Django admin, which all come through here.
"""

import re
from datetime import datetime
from typing import TypedDict, Unpack

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone
from pydantic import ValidationError

from grading.checks.definitions import MAX_CHECKS, AnswerKind, CheckSet
from grading.checks.routing import RoutingInvalid, judge_sample_validate, routing_validate
from grading.checks.rules import RulesInvalid, default_rules, rules_validate
from grading.core.schemas import editor_reason
from grading.judge.backends import judge_entry, judge_names
from grading.models import (
    LIVE_STATES,
    ApiKey,
    AuditEvent,
    CriteriaExample,
    CriteriaVersion,
    ItemKind,
    Org,
    Review,
    SlotsFor,
)
from grading.models.audit import audit_record
from grading.models.criteria import MAX_SLOTS

CONVERSATION_RUBRIC_V1 = """\
grounded: Every factual claim the agent makes is supported by the recorded evidence: tool results on the
path, or what the user or the agent said earlier. A claim with no support in the record (a number, a
name, a status, a promise about what a tool did) fails this check, even if it might be true. Cite the
message that makes the claim and, for a pass, the messages that support it.

complete: The agent's delivery covers the whole request, including every follow-up the user added later
in the conversation. Silently dropping part of a request, or stopping before the work is done, fails.
Cite the request and the reply that does or does not cover it.

usable: What the agent delivered works as delivered: the user can act on it without repair. Code that
would not run, steps that contradict each other, a link or value the user cannot use, or a refusal where
help was possible fails. Cite the delivering message.
"""

DRAFT_RUBRIC_V1 = """\
aeo: headings are the questions readers ask and each section answers its question in its first sentence;
the draft links to sibling articles and is structured so an answer engine can quote it.
writing: plain, specific prose for a busy professional reader; no AI tells (stock phrases, filler,
inflated vocabulary, empty intensifiers); claims are concrete.
org fit: follows the organisation's strategy and learnings, and backs its claims with the organisation's own
proof points (customer names, figures) used accurately.
"""

RUBRIC_MAX_CHARS = 20_000  # the rubric goes into every judge prompt: a runaway paste would cost on every call


def _defaults(kind: str) -> dict:
    """The seeded v1 of a kind."""
    if kind == ItemKind.DRAFT:
        return {"rubric": DRAFT_RUBRIC_V1, "rules": default_rules().model_dump(mode="json")}
    return {"rubric": CONVERSATION_RUBRIC_V1}


class CriteriaImmutable(Exception):
    """A published criteria version cannot change; edit a new draft version instead."""


class CriteriaConflict(Exception):
    """Someone else got there first: a save made from an older revision of a version, or a publication planned
    against a version that is no longer the active one. Nothing was written; the message names who and when."""

    def __init__(self, message: str, *, by: str, at: datetime | None) -> None:
        super().__init__(message)
        self.by = by
        self.at = at


class CriteriaInvalid(Exception):
    """An edit that may not be saved. `errors` maps "rubric", "rules.<path in the rules document>" or
    "checks.<path in the checks document>" to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{path}: {' '.join(messages)}" for path, messages in errors.items()))
        self.errors = errors


def criteria_active(*, org: Org, kind: str) -> CriteriaVersion:
    """The org's active version of `kind`; an org that never had one gets the seeded v1, published."""
    active = CriteriaVersion.objects.filter(org=org, kind=kind, is_active=True).first()
    if active is not None:
        return active
    try:
        with transaction.atomic():
            return CriteriaVersion.objects.create(
                org=org, kind=kind, number=1, published_at=timezone.now(), is_active=True, **_defaults(kind)
            )
    except IntegrityError:  # another process seeded it first (or versions exist and none is active)
        active = CriteriaVersion.objects.filter(org=org, kind=kind, is_active=True).first()
        if active is None:
            raise LookupError(f"{org.slug} has {kind} criteria versions but none is active") from None
        return active


def criteria_new_version(
    *,
    org: Org,
    kind: str,
    author: AbstractBaseUser | None = None,
    source: CriteriaVersion | None = None,
    api_key: ApiKey | None = None,
) -> CriteriaVersion:
    """A new unpublished version, cloned from `source` (any version of the same org and kind: rolling back is
    moving forward to a copy of an old one) or else from the active one, audited with what it was cloned from.
    Numbers only grow; two admins creating at once get consecutive numbers."""
    active = criteria_active(org=org, kind=kind)
    source = source or active
    if (source.org_id, source.kind) != (org.pk, kind):
        raise ValueError(f"{source} is not a {kind} version of {org.slug}")
    for _ in range(5):
        latest = CriteriaVersion.objects.filter(org=org, kind=kind).order_by("-number").first()
        try:
            with transaction.atomic():
                version = CriteriaVersion.objects.create(
                    org=org,
                    kind=kind,
                    number=latest.number + 1,
                    rubric=source.rubric,
                    rules=source.rules,
                    checks=source.checks,
                    slots=source.slots,
                    slots_for=source.slots_for,
                    slots_share=source.slots_share,
                    routing=source.routing,
                    judge_sample=source.judge_sample,
                    judge=source.judge,
                    based_on=source,
                    author=_person(author),
                )
                _examples_copy(source=source, version=version)
                audit_record(
                    action="criteria.create", org=org, actor=author, api_key=api_key, target=version,
                    detail={"kind": kind, "number": version.number, "based_on": source.number},
                )  # fmt: skip
                return version
        except IntegrityError:  # the number was taken meanwhile: take the next one
            continue
    raise RuntimeError(f"could not number a new {kind} version of {org.slug}")


def _examples_copy(*, source: CriteriaVersion, version: CriteriaVersion) -> None:
    """A clone reads like its source: it starts with the source's worked examples, quoted and explained as they
    are there (the admin removes what the new version should not show)."""
    CriteriaExample.objects.bulk_create(
        CriteriaExample(
            org_id=example.org_id,
            criteria_version=version,
            conversation_id=example.conversation_id,
            draft_id=example.draft_id,
            external_id=example.external_id,
            check_name=example.check_name,
            human_verdict=example.human_verdict,
            machine_verdict=example.machine_verdict,
            source=example.source,
            fingerprint=example.fingerprint,
            evidence=example.evidence,
            note=example.note,
            explanation=example.explanation,
            position=example.position,
            added_by_id=example.added_by_id,
        )
        for example in source.examples.order_by("position", "pk")
    )


class CriteriaEdit(TypedDict, total=False):
    """What an edit of an unpublished version may set, as `criteria_changes` reads it (None: left as it is)."""

    rubric: str | None
    rules: dict | None
    checks: dict | None
    slots: int | None
    slots_for: str | None
    slots_share: int | None
    judge: str | None
    routing: object
    judge_sample: object


def criteria_update(
    *,
    version: CriteriaVersion,
    actor: AbstractBaseUser | None = None,
    revision: int | None = None,
    api_key: ApiKey | None = None,
    **edit: Unpack[CriteriaEdit],
) -> CriteriaVersion:
    """Save an edit of an unpublished version, audited with the fields it changed.

    1. Lock the row. A published version is refused (CriteriaImmutable), whatever the caller read earlier.
    2. `revision` is the revision the editor started from: if someone saved since, refuse (CriteriaConflict, naming
       them and when) and keep their save. Without it (a script), no lock is checked.
    3. Validate the edit (`criteria_changes`: CriteriaInvalid naming every field that is wrong); store the rules and
       checks in their normalised form, move the revision on and record who saved.
    """
    with transaction.atomic():
        locked = criteria_edit_lock(version=version, revision=revision)
        changes = criteria_changes(version=locked, **edit)
        detail: dict[str, object] = {"changed": sorted(f for f, v in changes.items() if getattr(locked, f) != v)}
        if "judge" in detail["changed"]:
            detail["judge"] = {"from": locked.judge, "to": changes["judge"]}
        for field, value in changes.items():
            setattr(locked, field, value)
        locked.revision += 1
        locked.updated_at = timezone.now()
        locked.updated_by = _person(actor)
        locked.save(update_fields=[*changes, "revision", "updated_at", "updated_by"])
        audit_record(
            action="criteria.update", org=locked.org, actor=actor, api_key=api_key, target=locked,
            detail={"revision": locked.revision, **detail},
        )  # fmt: skip
    return locked


def criteria_changes(
    *,
    version: CriteriaVersion,
    rubric: str | None = None,
    rules: dict | None = None,
    checks: dict | None = None,
    slots: int | None = None,
    slots_for: str | None = None,
    slots_share: int | None = None,
    judge: str | None = None,
    routing: object = None,
    judge_sample: object = None,
) -> dict[str, object]:
    """The fields an edit of `version` sets (None: left as it is), in their stored form, or CriteriaInvalid naming
    every field that is wrong at once: the rubric, the checks (`checks_validate`, and no check retired while its
    worked examples are shown), the reviewer slots, the judge (a configured one), the routing rules, the judge's
    sample and, for drafts, the rules document per field. Writes nothing: the editor asks it to show every error in
    one round with its own, and `criteria_update` asks it again with the row locked."""
    errors: dict[str, list[str]] = {}
    changes: dict[str, object] = {}
    if rubric is not None:
        rubric = rubric.replace("\r\n", "\n")
        if not rubric.strip():
            errors["rubric"] = ["The judge needs a rubric: say what each check means."]
        elif len(rubric) > RUBRIC_MAX_CHARS:
            errors["rubric"] = [f"At most {RUBRIC_MAX_CHARS:,} characters: the rubric goes into every judge call."]
        changes["rubric"] = rubric
    if rules is not None and version.kind != ItemKind.DRAFT:
        errors["rules"] = ["A conversation version has no rules document: its rules are its checks' rules."]
    elif rules is not None:
        try:
            changes["rules"] = rules_validate(rules).model_dump(mode="json")
        except RulesInvalid as invalid:
            errors |= {f"rules.{path}" if path else "rules": messages for path, messages in invalid.errors.items()}
    if checks is not None:
        try:
            changes["checks"] = checks_validate(checks, kind=version.kind).model_dump(mode="json")
        except CriteriaInvalid as invalid:
            errors |= invalid.errors
        else:
            errors |= _retired_with_examples(version, changes["checks"])
    if slots is not None:
        slots_for = version.slots_for if slots_for is None else slots_for  # given alone, the count keeps its "for"
        if not 1 <= slots <= MAX_SLOTS or slots_for not in SlotsFor.values or not 0 <= (slots_share or 0) <= 100:
            errors["slots"] = [f"From 1 to {MAX_SLOTS} people, for the audit sample, every item or a share of 0-100%."]
        changes |= {"slots": slots, "slots_for": slots_for, "slots_share": slots_share or 0}
    if judge is not None:
        if judge not in settings.JUDGES:
            errors["judge"] = [f"No judge named {judge!r} is configured; choose one of {', '.join(judge_names())}."]
        changes["judge"] = judge
    if routing is not None:
        try:
            changes["routing"] = routing_validate(routing, drafts=version.kind == ItemKind.DRAFT)
        except RoutingInvalid as invalid:
            errors |= invalid.errors
    if judge_sample is not None:
        try:
            changes["judge_sample"] = judge_sample_validate(judge_sample, drafts=version.kind == ItemKind.DRAFT)
        except RoutingInvalid as invalid:
            errors |= invalid.errors
    if errors:
        raise CriteriaInvalid(errors)
    return changes


# --- checks -----------------------------------------------------------------------------------------------------------

_CHECK_PATH = re.compile(r"checks\.(\d+)")
_RULE_PATH = re.compile(r"(checks\.\d+\.rules\.\d+)\.(?:phrases|pattern|tool_called|tools_answered)(\..+)?")
_DRAFT_CHECKS = "A draft's checks are its sub-scores: score checks the judge answers beside its score."


def checks_validate(document: object, *, kind: str) -> CheckSet:
    """The checks an editor asked to save (a CheckSet document), or CriteriaInvalid naming each field that is wrong
    as `checks.<i>.<field>`, `checks.<i>.rules.<j>.<field>` or `checks` (the set as a whole).

    A draft's checks are score checks and not required (its pass or fail stays the gate's threshold and findings),
    and have no rules: rules read a conversation's messages."""
    try:
        check_set = CheckSet.model_validate(document)
    except ValidationError as invalid:
        raise CriteriaInvalid(_check_errors(invalid)) from None
    errors: dict[str, list[str]] = {}
    if kind == ItemKind.DRAFT:
        for index, check in enumerate(check_set.checks):
            if check.kind != AnswerKind.SCORE:
                errors[f"checks.{index}.kind"] = [_DRAFT_CHECKS]
            if check.required:
                errors[f"checks.{index}.required"] = [
                    "A draft passes or fails by the gate's threshold and findings: its score checks are not required."
                ]
            if check.rules:
                errors[f"checks.{index}.rules"] = ["Rules read a conversation's messages: a draft's checks have none."]
    if errors:
        raise CriteriaInvalid(errors)
    return check_set


def _check_errors(invalid: ValidationError) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for error in invalid.errors():
        loc = ".".join(str(part) for part in error["loc"]) or "checks"  # the set's own rules name no field
        path = _RULE_PATH.sub(lambda m: m.group(1) + (m.group(2) or ""), loc)
        message = _check_message(error)
        # A check's own rule is said of the check as a whole; the editor shows it beside the field it names.
        field = getattr((error.get("ctx") or {}).get("error"), "field", None)
        if _CHECK_PATH.fullmatch(path) and field:
            path = f"{path}.{field}"
        if message not in errors.setdefault(path, []):
            errors[path].append(message)
    return errors


def _check_message(error: dict) -> str:
    """Pydantic's reason in words an editor can act on: a check set's own reasons, then those every document shares."""
    context = error.get("ctx") or {}
    match error["type"]:
        case "string_too_long":
            return f"at most {context['max_length']} characters"
        case "too_short" if error["loc"] == ("checks",):
            return "A version asks at least one check."
        case "too_long" if error["loc"] == ("checks",):
            return f"At most {MAX_CHECKS} checks: every one is asked in every judge call."
        case "too_short":
            return f"at least {context['min_length']} ({context['actual_length']} given)"
        case "too_long":
            return f"at most {context['max_length']} ({context['actual_length']} given)"
        case "enum":
            return f"must be one of {context['expected']}"
        case "union_tag_invalid":
            return f"a rule is one of {context['expected_tags']}"
    return editor_reason(error)


def _retired_with_examples(version: CriteriaVersion, checks: dict) -> dict[str, list[str]]:
    """A conversation check retired while the version still shows worked examples of it: refused, since the judge
    would read examples of a check it is no longer asked (the admin removes them first)."""
    if version.kind != ItemKind.CONVERSATION:
        return {}  # a draft's examples are of its pass or fail, not of a check
    kept = {check["key"] for check in checks["checks"]}
    shown = set(version.examples.values_list("check_name", flat=True))
    retired = sorted(shown - kept)
    if not retired:
        return {}
    names = ", ".join(retired)
    return {"checks": [f"Worked examples of {names} are shown with this version: remove them before retiring {names}."]}


def criteria_edit_lock(*, version: CriteriaVersion, revision: int | None) -> CriteriaVersion:
    """The version's row, locked for an edit in the caller's transaction: refused when it is published
    (CriteriaImmutable) or, given the `revision` the editor started from, when someone saved since
    (CriteriaConflict, naming them and when)."""
    locked = CriteriaVersion.objects.select_for_update().get(pk=version.pk)
    if locked.published_at is not None:
        raise CriteriaImmutable(f"{locked} is published; create a new version to change it")
    if revision is not None and locked.revision != revision:
        by = _name(locked.updated_by)
        raise CriteriaConflict(
            f"{by} saved {locked}{_at(locked.updated_at)} while you were editing; your changes were not saved.",
            by=by,
            at=locked.updated_at,
        )
    return locked


def criteria_publish(
    *,
    version: CriteriaVersion,
    actor: AbstractBaseUser | None = None,
    expected_active_id: int | None = None,
    api_key: ApiKey | None = None,
) -> CriteriaVersion:
    """Make `version` immutable and active, with one AuditEvent. Every counting review of its kind stops counting
    in the same commit: a review's state reads its criteria version's `is_active` (ReviewState).

    1. Lock every version of the org and kind, in id order: publications of one kind are serialised, so two at
       once cannot both deactivate the same old version and leave two active (or trip the one-active index).
    2. `expected_active_id` is the active version the publisher's plan was made against: if another publication
       got in first, refuse (CriteriaConflict): the plan read no longer says what this publication would do.
    3. A version whose judge is not configured is refused (UnknownJudge): every item would be an error under it.
    4. Count what stops counting, flip the flags, record the publication with that count.
    """
    with transaction.atomic():
        versions = list(
            CriteriaVersion.objects.select_for_update().filter(org_id=version.org_id, kind=version.kind).order_by("pk")
        )
        locked = next(v for v in versions if v.pk == version.pk)
        if locked.published_at is not None:
            raise CriteriaImmutable(f"{locked} is already published")
        judge_entry(locked.judge)
        active = next((v for v in versions if v.is_active), None)
        if expected_active_id is not None and active is not None and active.pk != expected_active_id:
            by = _publisher(active)
            raise CriteriaConflict(
                f"{by} published {active}{_at(active.published_at)} after you read the plan; {locked} was not "
                f"published. Read its plan again: it now replaces {active}.",
                by=by,
                at=active.published_at,
            )
        stale = Review.objects.counting().filter(org_id=locked.org_id, kind=locked.kind).count() if active else 0
        if active is not None:
            CriteriaVersion.objects.filter(pk=active.pk).update(is_active=False)
        locked.published_at = timezone.now()
        locked.is_active = True
        locked.regrade_total = Review.objects.filter(
            org_id=locked.org_id, kind=locked.kind, state__in=LIVE_STATES
        ).count()  # every live review is an earlier version's: this one had none
        locked.save(update_fields=["published_at", "is_active", "regrade_total"])
        audit_record(
            action="criteria.publish",
            org=locked.org,
            actor=actor,
            api_key=api_key,
            target=locked,
            detail={
                "kind": locked.kind,
                "number": locked.number,
                "replaces": active.number if active else None,
                "judge": locked.judge,
                "reviews_made_stale": stale,
            },
        )
    return locked


def _person(user: AbstractBaseUser | None) -> AbstractBaseUser | None:
    return user if user is not None and user.is_authenticated else None


def _at(moment: datetime | None) -> str:
    return f" at {moment:%Y-%m-%d %H:%M:%S} UTC" if moment else ""


def _name(user: AbstractBaseUser | None) -> str:
    return user.get_username() if user is not None else "someone"


def _publisher(version: CriteriaVersion) -> str:
    event = (
        AuditEvent.objects.filter(
            action="criteria.publish", object_type=version._meta.label_lower, object_id=str(version.pk)
        )
        .select_related("actor")
        .first()
    )
    return _name(event.actor if event else None)
