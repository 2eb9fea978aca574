"""Claim next's scan, written as SQL (reviewer/queue/reads.py), passes over exactly the items reserved for others:
its form of the reservation rule says what `reservation_of` (Python, under the lock) says, for every person, item
and time."""

from datetime import timedelta
from itertools import product

import pytest
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.utils import timezone

from grading.models import Review
from reviewer.models import AssignmentRule, Pool, Role
from reviewer.queue.assignments import assignment_set, reservation_of, rules_for
from reviewer.queue.reads import reserved_for_others_sql
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


def test_the_scans_sql_and_the_check_under_the_lock_agree_for_every_person_item_and_time(org):
    """Over items of both kinds and two applications, two reasons and the audit sample, rules of every shape (a
    person, a pool, with hours and without), assignments by hand (ended or not), each person, and three moments."""
    people = {name: make_person(name, org, Role.OPERATOR) for name in ("ann", "bob", "cy")}
    people["lee"] = make_person("lee", org, Role.LEAD)
    pool = Pool.objects.create(org=org, name="billing")
    pool.members.add(people["ann"], people["bob"])
    items = [conversation_item(org, f"cv-{n}", application=app, minutes_ago=20 + 50 * n)
             for n, app in enumerate(["billing", "onboarding", "billing"])]  # fmt: skip
    items += [draft_item(org, f"d-{n}", reason=reason, minutes_ago=20 + 50 * n)
              for n, reason in enumerate(["band", "spread", "band"])]  # fmt: skip
    Review.objects.filter(pk=items[2].pk).update(audit=True)
    AssignmentRule.objects.create(org=org, position=1, reason="audit", person=people["bob"])
    AssignmentRule.objects.create(org=org, position=2, kind="draft", reason="band", pool=pool, hours=1)
    AssignmentRule.objects.create(org=org, position=3, application="onboarding", person=people["cy"], hours=2)
    AssignmentRule.objects.create(org=org, position=4, kind="draft", person=people["ann"])
    AssignmentRule.objects.create(org=org, position=5, person=people["cy"])  # any item the others leave
    now = timezone.now()
    assignment_set(review_id=items[3].pk, person=people["cy"], by=people["lee"])
    assignment_set(review_id=items[4].pk, pool=pool, until=now + timedelta(minutes=30), by=people["lee"])
    reviews = list(Review.objects.filter(pk__in=[r.pk for r in items]))
    seen = set()
    for person, moment in product(people.values(), (now, now + timedelta(minutes=45), now + timedelta(hours=3))):
        expected = set()
        for review in reviews:
            reservation = reservation_of(review, moment)
            if reservation is not None and not reservation.allows(person.pk):
                expected.add(review.pk)
        sql, params = reserved_for_others_sql(rules_for(org.pk), user_id=person.pk, now=moment)
        reserved = RawSQL(sql, params, output_field=BooleanField())  # noqa: S611 - every value a parameter
        passed_over = set(
            Review.objects.filter(pk__in=[r.pk for r in items]).filter(reserved).values_list("pk", flat=True)
        )
        assert passed_over == expected, (person.username, moment - now)
        seen.add(frozenset(expected))
    assert len(seen) > 3  # the cases differ: the test reads more than one answer
