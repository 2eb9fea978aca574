"""A part of an org: the conversations of some applications, and drafts or not (the draft gate is an application of
its own). What a person's memberships cover (reviewer/access.py builds it), and so what every read for a person
is limited to: the queue, the item pages, the dashboards' figures, lists and exports."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q

from grading.models import ItemKind


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


def within(reaches: Iterable[Reach], prefix: str = "") -> Q:
    """The rows within any of `reaches` (nothing when there are none)."""
    q = Q(pk__in=[])
    for reach in reaches:
        q |= reach.rows(prefix)
    return q
