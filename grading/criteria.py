"""Criteria versions: the seeded v1 of each kind, the active version, and publication (DESIGN 2 and 7)."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from grading.audit import audit_record
from grading.models import CriteriaVersion, ItemKind, Org
from grading.rules import DraftRules, default_rules

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


def _defaults(kind: str) -> dict:
    """The seeded v1 of a kind."""
    if kind == ItemKind.DRAFT:
        return {"rubric": DRAFT_RUBRIC_V1, "rules": default_rules().model_dump(mode="json")}
    return {"rubric": CONVERSATION_RUBRIC_V1}


class CriteriaImmutable(Exception):
    """A published criteria version cannot change; edit a new draft version instead."""


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


def criteria_new_version(*, org: Org, kind: str, author: AbstractBaseUser | None = None) -> CriteriaVersion:
    """A new unpublished version cloned from the active one."""
    active = criteria_active(org=org, kind=kind)
    latest = CriteriaVersion.objects.filter(org=org, kind=kind).order_by("-number").first()
    return CriteriaVersion.objects.create(
        org=org,
        kind=kind,
        number=latest.number + 1,
        rubric=active.rubric,
        rules=active.rules,
        author=author if author is not None and author.is_authenticated else None,
    )


def criteria_update(*, version: CriteriaVersion, **changes) -> CriteriaVersion:
    if version.published_at is not None:
        raise CriteriaImmutable(f"{version} is published; create a new version to change it")
    if version.kind == ItemKind.DRAFT and "rules" in changes:
        rules = DraftRules.model_validate(changes["rules"])  # invalid rules never reach a published version
        changes["rules"] = rules.model_dump(mode="json")
    for field, value in changes.items():
        setattr(version, field, value)
    version.save(update_fields=list(changes))
    return version


def criteria_publish(*, version: CriteriaVersion, actor: AbstractBaseUser | None = None) -> CriteriaVersion:
    """Make `version` immutable and active. Every counting review of its kind stops counting in the same
    commit: a review's state reads its criteria version's `is_active` (ReviewState)."""
    with transaction.atomic():
        locked = CriteriaVersion.objects.select_for_update().get(pk=version.pk)
        if locked.published_at is not None:
            raise CriteriaImmutable(f"{locked} is already published")
        CriteriaVersion.objects.filter(org=locked.org, kind=locked.kind, is_active=True).update(is_active=False)
        locked.published_at = timezone.now()
        locked.is_active = True
        locked.save(update_fields=["published_at", "is_active"])
        audit_record(
            action="criteria.publish", org=locked.org, actor=actor, target=locked, detail={"kind": locked.kind}
        )
    return locked
