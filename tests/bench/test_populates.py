"""Each benchmark's bulk populate runs against today's schema, at a tiny scale. They insert rows by plain SQL that
names its columns, so a migration adding a column without a database default breaks them, and no other test would
say so: bench_criteria and bench_publish broke that way, then bench_queue, bench_dashboard and bench_slices (migration
0037's `sent`), each found only by the next person who ran them."""

import pytest

from bench import bench_criteria, bench_dashboard, bench_erasure, bench_queue
from grading.models import Conversation, Review


@pytest.mark.django_db(transaction=True)  # the populates VACUUM what they wrote
@pytest.mark.parametrize(
    "populate",
    [
        pytest.param(lambda org: bench_dashboard._populate(org, 40), id="bench_dashboard"),
        pytest.param(lambda org: bench_dashboard._populate(org, 40, sliced=True), id="bench_slices"),
        pytest.param(lambda org: bench_queue._populate(org, 20, 40), id="bench_queue"),
        pytest.param(lambda org: bench_criteria._populate(org, 20, 40), id="bench_criteria"),
        pytest.param(lambda org: bench_erasure._populate(org, 20), id="bench_erasure"),
    ],
)
def test_a_benchmarks_populate_writes_its_rows_into_todays_schema(populate, org):
    populate(org)
    assert Conversation.objects.filter(org=org).exists()
    assert Review.objects.filter(org=org).exists()
