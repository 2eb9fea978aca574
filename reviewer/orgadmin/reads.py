"""Reads of the org admin's pages. Every read takes the admin's org ids, so a view that forgets to filter by org has
nothing to pass: another org's membership or key does not exist as far as the admin can tell."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F

from grading.models import ApiKey, AuditEvent, Org
from reviewer.access import orgs_for
from reviewer.models import Invitation, Membership, Role


def admin_org_ids(user) -> list[int]:
    """The orgs in which `user` is an org admin: the only orgs these pages read from or change."""
    return list(orgs_for(user, Role.ORG_ADMIN).values_list("pk", flat=True))


def admin_orgs(org_ids: Sequence[int]) -> list[Org]:
    return list(Org.objects.filter(pk__in=list(org_ids)).order_by("slug"))


def membership_for_admin(*, org_ids: Sequence[int], membership_id: int) -> Membership | None:
    return Membership.objects.filter(pk=membership_id, org_id__in=list(org_ids)).select_related("user", "org").first()


def invitation_for_admin(*, org_ids: Sequence[int], invitation_id: int) -> Invitation | None:
    return Invitation.objects.filter(pk=invitation_id, org_id__in=list(org_ids)).select_related("org").first()


def api_key_for_admin(*, org_ids: Sequence[int], api_key_id: int) -> ApiKey | None:
    return ApiKey.objects.filter(pk=api_key_id, org_id__in=list(org_ids)).select_related("org").first()


@dataclass(frozen=True)
class Member:
    person: AbstractBaseUser
    memberships: list[Membership]  # one per role, in the roles' order


def members_of(org: Org) -> list[Member]:
    """The org's people by username, each with their memberships."""
    order = {role: index for index, role in enumerate(Role.values)}
    people: dict[int, Member] = {}
    for membership in Membership.objects.filter(org=org).select_related("user").order_by("user__username"):
        people.setdefault(membership.user_id, Member(membership.user, [])).memberships.append(membership)
    for member in people.values():
        member.memberships.sort(key=lambda membership: order[membership.role])
    return list(people.values())


def invitations_of(org: Org) -> list[Invitation]:
    """The org's invitations waiting to be accepted, by address."""
    return list(Invitation.objects.filter(org=org).select_related("invited_by").order_by("email", "role"))


def api_keys_of(org: Org) -> list[ApiKey]:
    """Live keys first, newest first."""
    live_first = F("revoked_at").desc(nulls_first=True)
    return list(ApiKey.objects.filter(org=org).select_related("created_by").order_by(live_first, "-created_at"))


def last_rotation(org: Org) -> datetime | None:
    """When the org's webhook secret was last rotated from these pages; None: never (it is the org's first)."""
    return (
        AuditEvent.objects.filter(org=org, action="webhook_secret.rotate").order_by("-at").values_list("at", flat=True)
    ).first()
