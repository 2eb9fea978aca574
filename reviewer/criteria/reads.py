"""Reads of the criteria pages. Every read takes the criteria admin's org ids, so a view that forgets to filter by
org has nothing to pass; another org's version, trial or item does not exist as far as the admin can tell."""

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import BooleanField, Count, ExpressionWrapper, Q, QuerySet

from grading.core.sql_expressions import JsonArrayLength
from grading.models import Conversation, CriteriaTrial, CriteriaVersion, Draft, ItemKind, Label, Org, Review
from grading.reviews.examples import EXAMPLES_MAX
from grading.reviews.human import human_verdict_of
from reviewer.access import orgs_for
from reviewer.models import Role


def admin_org_ids(user) -> list[int]:
    """The orgs in which `user` is a criteria admin: the only orgs these pages read from."""
    return list(orgs_for(user, Role.CRITERIA_ADMIN).values_list("pk", flat=True))


@dataclass(frozen=True)
class KindVersions:
    org: Org
    kind: str
    versions: list[CriteriaVersion]  # newest first, each with `current_reviews`

    @property
    def active(self) -> CriteriaVersion | None:
        return next((v for v in self.versions if v.is_active), None)


def versions_by_kind(*, org_ids: Sequence[int]) -> list[KindVersions]:
    """Per org and kind, every version (history is kept forever), newest first, with how many current reviews
    each holds (only the active one can hold any: ReviewState)."""
    versions = list(
        CriteriaVersion.objects.filter(org_id__in=list(org_ids))
        .select_related("org", "author", "based_on", "updated_by")
        .order_by("org__slug", "kind", "-number")
    )
    held = dict(
        Review.objects.counting()
        .filter(criteria_version__in=[v.pk for v in versions if v.is_active])
        .values_list("criteria_version")
        .annotate(n=Count("pk"))
    )
    groups: dict[tuple[int, str], KindVersions] = {}
    for version in versions:
        version.current_reviews = held.get(version.pk, 0)
        group = groups.setdefault((version.org_id, version.kind), KindVersions(version.org, version.kind, []))
        group.versions.append(version)
    return list(groups.values())


def version_for_admin(*, org_ids: Sequence[int], version_id: int) -> CriteriaVersion | None:
    return (
        CriteriaVersion.objects.filter(pk=version_id, org_id__in=list(org_ids))
        .select_related("org", "author", "based_on", "updated_by")
        .first()
    )


def versions_of_kind(version: CriteriaVersion) -> QuerySet[CriteriaVersion]:
    """The versions a version can be compared with: its org's of the same kind."""
    return CriteriaVersion.objects.filter(org_id=version.org_id, kind=version.kind).order_by("-number")


def trials_of(version: CriteriaVersion) -> list[CriteriaTrial]:
    return list(CriteriaTrial.objects.filter(criteria_version=version).select_related("requested_by").order_by("-pk"))


def trial_for_admin(*, org_ids: Sequence[int], trial_id: int) -> CriteriaTrial | None:
    return (
        CriteriaTrial.objects.filter(pk=trial_id, org_id__in=list(org_ids))
        .select_related("criteria_version__org", "requested_by")
        .first()
    )


def trial_page_for_admin(*, org_ids: Sequence[int], trial_id: int) -> CriteriaTrial | None:
    """The trial as its page reads it: how many items it has (`items_total`) and whether any is not graded yet
    (`items_ungraded`), from the database, its two arrays of every item (`sample`, `review_ids`) left unread. A
    finished trial's page shows a page of its items, read by position with its stored figures
    (grading/criteria/scoring.py); a recount reads them whole (`CriteriaTrial.items_read`)."""
    return (
        CriteriaTrial.objects.filter(pk=trial_id, org_id__in=list(org_ids))
        .select_related("criteria_version__org", "requested_by")
        .defer("sample", "review_ids")
        .annotate(
            items_total=JsonArrayLength("sample"),
            items_ungraded=ExpressionWrapper(Q(review_ids__contains=[None]), output_field=BooleanField()),
        )
        .first()
    )


def item_for_admin(*, org_ids: Sequence[int], kind: str, item_id: int) -> Draft | Conversation | None:
    model = Draft if kind == ItemKind.DRAFT else Conversation
    return model.objects.filter(pk=item_id, org_id__in=list(org_ids)).select_related("org").first()


def item_reviews(item: Draft | Conversation, limit: int = 50) -> list[Review]:
    """The item's reviews, newest first, each with the state every reader must show (`state_now`): the one that
    counts, history, and trial reviews marked as trials."""
    field = "draft" if isinstance(item, Draft) else "conversation"
    return list(
        Review.objects.with_state()
        .filter(**{field: item})
        .select_related("criteria_version")
        .order_by("-finished_at", "-pk")[:limit]
    )


# --- worked examples: the editor's section, and the control on an item's pages ---------------------------------


def examples_context(version: CriteriaVersion) -> dict:
    """The version editor's examples section."""
    return {
        "examples": list(version.examples.order_by("position", "pk").select_related("added_by")),
        "examples_max": EXAMPLES_MAX,
    }


@dataclass(frozen=True)
class ExampleTargets:
    """The "add as example" control for one item: its kind and id, the checks it has a human verdict on (empty on a
    list, where the service tells), and the org's unpublished versions of its kind."""

    kind: str
    item_id: int
    checks: list[tuple[str, str]]  # (check, the human verdict)
    versions: list[CriteriaVersion]


def example_targets(user, subject: Draft | Conversation) -> ExampleTargets | None:
    """The control for an item's page, for a criteria admin of its org when the item has a human verdict on its
    present evidence and the org has an unpublished version of its kind to add it to; None otherwise."""
    if subject.org_id not in admin_org_ids(user):
        return None
    kind = ItemKind.DRAFT if isinstance(subject, Draft) else ItemKind.CONVERSATION
    versions = unpublished_versions(org_id=subject.org_id, kind=kind)
    human = human_verdict_of(subject) if versions else None
    if human is None:
        return None
    # Every check people answered (a conversation's pass_fail label is no check of its versions); the version it is
    # added to refuses one it does not ask (criteria_example_add).
    answered = human.checks.items()
    checks = [(check, said) for check, said in answered if kind == ItemKind.DRAFT or check != Label.PASS_FAIL]
    return ExampleTargets(kind=kind, item_id=subject.pk, checks=checks, versions=versions)


def unpublished_versions(*, org_id: int, kind: str) -> list[CriteriaVersion]:
    return list(CriteriaVersion.objects.filter(org_id=org_id, kind=kind, published_at__isnull=True).order_by("-number"))
