"""An item's human verdict from labels is read one way (`labels_verdict`) by trials scored against people and by the
dashboard: where two or more labellers labelled a check, the verdict the dashboard holds the judge against is the
trial's; where one did, the dashboard pairs the judge with that label, the trial's verdict; where they split, neither
has one."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grading.checks.definitions import CONVERSATION_DEFAULTS
from grading.figures.definitions import SEVERAL_PEOPLE
from grading.models import ItemKind, ReviewState, Route
from grading.reviews.human import LABELS, human_verdicts
from grading.reviews.rollups import _contributions_of
from tests.builders.figure_reviews import edge_draft, write_reviews

CHECKS = CONVERSATION_DEFAULTS.keys  # what a version asks that names no checks of its own

pytestmark = pytest.mark.django_db
labels = st.lists(st.tuples(st.sampled_from(CHECKS), st.sampled_from(["pass", "fail", "unknown"]), st.just(True)))
labelled = st.lists(labels.map(lambda given: given[:4]), min_size=1, max_size=4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=labelled)
def test_it_reads_an_items_human_verdict_from_labels_the_same_for_trials_and_the_dashboard(org, items):
    specs = [
        edge_draft(kind=ItemKind.CONVERSATION, state=ReviewState.CURRENT, route=Route.PASS, decision=None,
                   checks={check: {"verdict": "pass"} for check in CHECKS}, labels=given, answers=(2, []),
                   verdict_after=timedelta(seconds=60))
        for given in items
    ]  # fmt: skip
    person = get_user_model().objects.get_or_create(username="decider")[0]
    with transaction.atomic():
        written = write_reviews(org, specs, person)
        trial = human_verdicts(org_id=org.pk, kind=ItemKind.CONVERSATION, source=LABELS)
        for review, spec in zip(written, specs, strict=True):
            human = trial[review.conversation_id].checks if review.conversation_id in trial else {}
            against: dict[tuple[str, str], set[str]] = {}  # (metric, check) -> the people's side of each pair
            for key in _contributions_of([review.pk]):
                if key[5] in ("agree_people", "agree_label"):
                    against.setdefault((key[5], key[6]), set()).add(key[7].split(">")[1])
            for check in CHECKS:
                given = [verdict for name, verdict, _ in spec.labels if name == check]
                verdict = human.get(check)
                if len(given) >= SEVERAL_PEOPLE:
                    assert against.get(("agree_people", check), set()) == ({verdict} if verdict else set()), given
                elif given:
                    assert against[("agree_label", check)] == {verdict} == set(given)
                else:
                    assert verdict is None
        transaction.set_rollback(True)
