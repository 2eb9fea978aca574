"""What `manage.py demo` prints first, read off a seeding of an empty database: a module of its own, as the demo's
other tests read one seeding shared (tests/reviewer/conftest.py)."""

import logging

import pytest

from grading.demo import TIMED_OUT_DRAFT
from grading.models import Review
from reviewer.demo import DEMO_PEOPLE, demo_seed
from reviewer.management.commands.demo import first_contact

pytestmark = pytest.mark.django_db


@pytest.mark.slow
def test_the_demo_opens_with_where_who_the_key_and_the_judge_and_names_its_seeded_failure(caplog, settings):
    settings.JUDGES = settings.JUDGES | {"default": settings.JUDGES["default"] | {"base_url": ""}}
    with caplog.at_level(logging.WARNING):
        org = demo_seed()
    assert not caplog.records  # the seeded judge timeout is not logged as a failure of the demo

    lines = first_contact("127.0.0.1:8000", org.slug, "tg_key").splitlines()
    assert lines[0] == f"Tollgate demo: http://127.0.0.1:8000/  (org {org.slug})"
    assert [line.split()[1] for line in lines[1 : 1 + len(DEMO_PEOPLE)]] == [p.username for p in DEMO_PEOPLE]
    assert lines[1 + len(DEMO_PEOPLE)] == "  API key (shown once): tg_key"
    assert lines[2 + len(DEMO_PEOPLE)].startswith("  judge: offline heuristic judge")
    assert f"seeded example: draft {TIMED_OUT_DRAFT} met a judge timeout on purpose" in lines[3 + len(DEMO_PEOPLE)]
    timed_out = Review.objects.get(draft__external_id=TIMED_OUT_DRAFT, route="error")
    assert "seeded demo timeout" in timed_out.detail
