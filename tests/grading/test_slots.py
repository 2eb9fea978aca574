"""How many people decide a review: the criteria version's rule in Python (`slots_of`, read under the row lock) and
as SQL (`slots_expression`, the queue's scan) give the same answer for every rule."""

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
def test_the_rule_reads_the_same_in_python_and_in_sql(org, slots, slots_for, share):
    reviews = bulk_draft_items(org, 120)
    Review.objects.filter(pk__in=[r.pk for r in reviews[::3]]).update(audit=True)
    version = criteria_active(org=org, kind=ItemKind.DRAFT)
    version.slots, version.slots_for, version.slots_share = slots, slots_for, share
    in_sql = dict(Review.objects.filter(org=org).annotate(n=version.slots_expression()).values_list("pk", "n"))
    in_python = {r.pk: version.slots_of(review_id=r.pk, audit=r.audit) for r in Review.objects.filter(org=org)}
    assert in_sql == in_python
    if slots_for == SlotsFor.SHARE:  # a fixed share: exactly that many of 100 consecutive reviews
        window = sorted(in_python)[:100]
        assert sum(in_python[pk] == slots for pk in window) == (share if slots > 1 else 0)
