"""Who may see what. Every view asks here (never only the template), so an htmx request for a
partial meets the same checks as the full page."""

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from grading.models import Org
from grading.reach import Reach
from reviewer.models import Membership, Role

EVERY_ROLE = tuple(Role)


def orgs_for(user, *roles: Role) -> QuerySet[Org]:
    """The orgs in which `user` holds any of `roles`."""
    if not user.is_authenticated:
        return Org.objects.none()
    held = Membership.objects.filter(user=user, role__in=roles).values("org_id")
    return Org.objects.filter(pk__in=held).order_by("slug")


def reaches_of(user, *roles: Role) -> dict[int, Reach]:
    """Per org (by id), what `user`'s memberships of `roles` cover."""
    if not user.is_authenticated:
        return {}
    reaches: dict[int, Reach] = {}
    for membership in Membership.objects.filter(user=user, role__in=roles).order_by("pk"):
        reach = Reach(
            membership.org_id,
            None if membership.applications is None else frozenset(membership.applications),
            membership.drafts or membership.applications is None,
        )
        held = reaches.get(membership.org_id)
        reaches[membership.org_id] = reach if held is None else _union(held, reach)
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
            if not Membership.objects.filter(user=request.user, role__in=roles).exists():
                raise PermissionDenied("Your role does not include this page.")
            return view(request, *args, **kwargs)

        return guarded

    return decorator
