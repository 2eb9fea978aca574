"""Who may see what. Every view asks here (never only the template), so an htmx request for a
partial meets the same checks as the full page."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse

from grading.models import ItemKind, Org
from reviewer.models import Membership, Role

EVERY_ROLE = tuple(Role)


def orgs_for(user, *roles: Role) -> QuerySet[Org]:
    """The orgs in which `user` holds any of `roles`."""
    if not user.is_authenticated:
        return Org.objects.none()
    held = Membership.objects.filter(user=user, role__in=roles).values("org_id")
    return Org.objects.filter(pk__in=held).order_by("slug")


@dataclass(frozen=True)
class Reach:
    """What a person's memberships of some roles cover in one org: every application (`applications` None), or the
    conversations of some applications and, if `drafts`, the drafts. The union of those memberships."""

    org_id: int
    applications: frozenset[str] | None = None
    drafts: bool = True

    @property
    def limited(self) -> bool:
        return self.applications is not None

    def covers(self, kind: str, application: str) -> bool:
        """Whether an item of `kind` filed under `application` (a review's `application`) is within reach."""
        if kind == ItemKind.DRAFT:
            return self.drafts or not self.limited
        return not self.limited or application in self.applications

    def kinds(self) -> tuple[str, ...]:
        """The kinds of item within reach."""
        if not self.limited or self.drafts and self.applications:
            return tuple(ItemKind)
        return (ItemKind.DRAFT,) if self.drafts else (ItemKind.CONVERSATION,)

    def rows(self, prefix: str = "") -> Q:
        """The rows within reach, of a model with `org`, `kind` and `application` (a review), or of one related to
        it through `prefix` (`review__`)."""
        in_org = Q(**{f"{prefix}org_id": self.org_id})
        if not self.limited:
            return in_org
        within = Q(**{f"{prefix}kind": ItemKind.CONVERSATION, f"{prefix}application__in": sorted(self.applications)})
        if self.drafts:
            within |= Q(**{f"{prefix}kind": ItemKind.DRAFT})
        return in_org & within


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


def within(reaches: Iterable[Reach], prefix: str = "") -> Q:
    """The rows within any of `reaches` (nothing when there are none)."""
    q = Q(pk__in=[])
    for reach in reaches:
        q |= reach.rows(prefix)
    return q


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
