"""Who may see what. Every view asks here (never only the template), so an htmx request for a
partial meets the same checks as the full page."""

from collections.abc import Callable, Iterable, Sequence
from functools import wraps
from typing import TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse

from grading.models import Org
from grading.models.reach import Reach
from reviewer.models import Membership, Role

EVERY_ROLE = tuple(Role)
T = TypeVar("T")


def orgs_for(user, *roles: Role) -> QuerySet[Org]:
    """The orgs in which `user` holds any of `roles`."""
    if not user.is_authenticated:
        return Org.objects.none()
    held = Membership.objects.filter(user=user, role__in=roles).values("org_id")
    return Org.objects.filter(pk__in=held).order_by("slug")


def setup_org_ids(user) -> list[int]:
    """The orgs whose queue `user` sets up (reviewer/setup/): those they are an org admin of, or lead whole (a lead of
    part of an org would change when the rest of it is due)."""
    if not user.is_authenticated:
        return []
    return setup_orgs_of(Membership.objects.filter(user=user))


def setup_orgs_of(memberships: Iterable[Membership]) -> list[int]:
    """`setup_org_ids` from one person's memberships in hand."""
    whole = [m for m in memberships if m.role == Role.ORG_ADMIN or (m.role == Role.LEAD and m.applications is None)]
    return sorted({membership.org_id for membership in whole})


def memberships_of(request: HttpRequest) -> list[Membership]:
    """The signed-in person's memberships, read once per request: the role check, the reach of the queue and the
    navigation read the same rows. (The views that change memberships redirect; the next request reads afresh.)"""
    if not request.user.is_authenticated:
        return []
    if not hasattr(request, "_memberships"):
        request._memberships = list(Membership.objects.filter(user=request.user).order_by("pk"))
    return request._memberships


def people_of(org_id: int) -> QuerySet:
    """The accounts with a membership of the org: the only people its admins, leads and keys can name or look up.
    Anyone else, of another org or of none, is as unknown to them as a name nobody has, and gets the same answer."""
    members = Membership.objects.filter(org_id=org_id).values("user_id")
    return get_user_model()._default_manager.filter(pk__in=members)


def org_asked(orgs: list[Org], slug: str | None) -> Org | None:
    """The org a page asks for by slug among `orgs` (the first when none is named); None when it is not among them."""
    if not slug:
        return orgs[0] if orgs else None
    return next((org for org in orgs if org.slug == slug), None)


def found(thing: T | None, what: str) -> T:
    """What a read of the asker's orgs found; nothing is a 404 saying there is no such `what` (another org's row is
    none, as far as the asker can tell)."""
    if thing is None:
        raise Http404(f"No such {what}.")
    return thing


def org_named(org_ids: Sequence[int], org_id: int) -> Org:
    """The org a form names, when it is one of `org_ids` (another org's is a 404, as an org that does not exist)."""
    return found(Org.objects.filter(pk=org_id, pk__in=list(org_ids)).first(), "org")


def reaches_of(user, *roles: Role) -> dict[int, Reach]:
    """Per org (by id), what `user`'s memberships of `roles` cover."""
    if not user.is_authenticated:
        return {}
    return reaches_from(Membership.objects.filter(user=user, role__in=roles).order_by("pk"))


def reaches_from(memberships: Iterable[Membership], *roles: Role) -> dict[int, Reach]:
    """`reaches_of` from one person's memberships in hand (`memberships_of`), those of `roles` (all when none)."""
    held = [membership for membership in memberships if not roles or membership.role in roles]
    return {org_id: reach for (_, org_id), reach in _reaches(held).items()}


def reaches_in(org_id: int, *roles: Role) -> dict[int, Reach]:
    """Per person (by user id), what their memberships of `roles` in the org cover."""
    memberships = Membership.objects.filter(org_id=org_id, role__in=roles).order_by("pk")
    return {user_id: reach for (user_id, _), reach in _reaches(memberships).items()}


def _reaches(memberships: Iterable[Membership]) -> dict[tuple[int, int], Reach]:
    """Per (user id, org id), the union of what the memberships cover (read in the order they were made)."""
    reaches: dict[tuple[int, int], Reach] = {}
    for membership in memberships:
        reach = Reach(
            membership.org_id,
            None if membership.applications is None else frozenset(membership.applications),
            membership.drafts or membership.applications is None,
        )
        key = (membership.user_id, membership.org_id)
        reaches[key] = reach if key not in reaches else _union(reaches[key], reach)
    return reaches


def _union(a: Reach, b: Reach) -> Reach:
    if not a.limited or not b.limited:
        return Reach(a.org_id)
    return Reach(a.org_id, a.applications | b.applications, a.drafts or b.drafts)


def roles_of(user) -> set[str]:
    if not user.is_authenticated:
        return set()
    return set(Membership.objects.filter(user=user).values_list("role", flat=True))


def role_required(*roles: Role) -> Callable:
    """Anonymous users go to the sign-in page; signed-in users without one of `roles` get 403."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @login_required
        @wraps(view)
        def guarded(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if not any(membership.role in roles for membership in memberships_of(request)):
                raise PermissionDenied("Your role does not include this page.")
            return view(request, *args, **kwargs)

        return guarded

    return decorator
