"""How many people decide a review: the criteria version's rule (`slots_of`), the one form every reader asks (the
claim under the row lock, and claim next for the rows it reads). A share is exactly that share of consecutive
reviews, whatever the machine said."""

import pytest

from grading.models import ItemKind, Review, SlotsFor
from grading.reviews.versions import criteria_active
from tests.builders.queue_items import bulk_draft_items

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("slots", "slots_for", "share"),
    [(1, SlotsFor.PEOPLE, 0), (3, SlotsFor.PEOPLE, 0), (2, SlotsFor.AUDIT, 0), (2, SlotsFor.SHARE, 0),
     (2, SlotsFor.SHARE, 30), (4, SlotsFor.SHARE, 100)],
)  # fmt: skip
def test_it_asks_the_people_its_rule_names_and_a_share_is_exactly_that_share(org, slots, slots_for, share):
    reviews = bulk_draft_items(org, 120)
    Review.objects.filter(pk__in=[r.pk for r in reviews[::3]]).update(audit=True)
    version = criteria_active(org=org, kind=ItemKind.DRAFT)
    version.slots, version.slots_for, version.slots_share = slots, slots_for, share
    asked = {r.pk: version.slots_of(review_id=r.pk, audit=r.audit) for r in Review.objects.filter(org=org)}
    picked = {r.pk for r in Review.objects.filter(org=org) if asked[r.pk] == slots}
    if slots_for == SlotsFor.PEOPLE or slots == 1:
        assert set(asked.values()) == {slots}
    elif slots_for == SlotsFor.AUDIT:
        assert picked == set(Review.objects.filter(org=org, audit=True).values_list("pk", flat=True))
    if slots_for == SlotsFor.SHARE:  # a fixed share: exactly that many of 100 consecutive reviews
        window = sorted(asked)[:100]
        assert sum(asked[pk] == slots for pk in window) == (share if slots > 1 else 0)
