"""The demo seeds history for the criteria pages: an older conversation version and an unpublished draft version."""

import pytest

from grading.models import CriteriaVersion, ItemKind
from reviewer.demo import DRAFT_V2_BANNED, DRAFT_V2_THRESHOLD, demo_seed

pytestmark = pytest.mark.django_db


def versions(org, kind):
    return list(CriteriaVersion.objects.filter(org=org, kind=kind).order_by("number"))


def test_the_demo_seeds_an_older_conversation_version_and_an_unpublished_draft_version():
    org = demo_seed()
    old, active = versions(org, ItemKind.CONVERSATION)
    assert (old.is_active, old.published_at is not None, active.is_active, active.author.username) == (
        False, True, True, "casey"
    )  # fmt: skip
    assert active.rubric.startswith(old.rubric.rstrip()) and active.rubric != old.rubric
    v1, draft = versions(org, ItemKind.DRAFT)
    assert (v1.is_active, draft.published_at, draft.author.username) == (True, None, "casey")
    rules = draft.draft_rules()
    assert set(DRAFT_V2_BANNED) <= set(rules.banned_words.terms) and rules.threshold == DRAFT_V2_THRESHOLD


def test_seeding_twice_adds_no_version():
    org = demo_seed()
    before = list(CriteriaVersion.objects.filter(org=org).values_list("kind", "number", "rules", "rubric"))
    demo_seed()
    assert list(CriteriaVersion.objects.filter(org=org).values_list("kind", "number", "rules", "rubric")) == before
