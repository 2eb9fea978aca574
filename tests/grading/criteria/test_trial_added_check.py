"""A trial of a version that adds a check (issue 39): scored against people on it for the trial alone, and the
trial says which checks it adds and which it drops."""

import pytest
from django.utils import timezone

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.criteria.scoring import NOT_ASKED, trial_rows, trial_score
from grading.models import CriteriaTrial, ItemKind, TrialSource
from grading.models.criteria import default_checks
from grading.reviews.versions import criteria_active, criteria_new_version
from tests.builders.own_checks import answered, asking, labelled, trial_review

pytestmark = pytest.mark.django_db

# Today's grounded and complete, usable dropped, and two checks added: a verdict and a score.
ADDING = CheckSet(
    checks=[
        *default_checks(ItemKind.CONVERSATION).checks[:2],
        CheckDefinition(key="cites_policy", name="Cites the policy", question="Does the reply cite the policy?"),
        CheckDefinition(key="helpful", name="Helpful", question="How helpful?", kind=AnswerKind.SCORE, required=False),
    ]
)


def test_a_trial_of_a_version_adding_a_check_scores_it_against_people_and_names_it(org):
    active = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    items = [answered(org, f"cv-{n}", {"grounded": "pass", "complete": "pass", "usable": "pass"}) for n in range(3)]
    version = asking(criteria_new_version(org=org, kind=ItemKind.CONVERSATION), ADDING)
    said = [("pass", "3"), ("fail", "4"), ("pass", "5")]  # the trial's cites_policy and helpful
    people = [("pass", "3"), ("pass", "4"), ("pass", "2")]
    reviews = []
    for item, (cites, helpful), (their_cites, their_helpful) in zip(items, said, people, strict=True):
        answers = {"grounded": "pass", "complete": "fail", "cites_policy": cites, "helpful": helpful}
        reviews.append(trial_review(version, item, answers))
        for labeller in ("ann", "bob"):
            labelled(item, labeller, grounded="pass", complete="pass", cites_policy=their_cites, helpful=their_helpful)
    trial = CriteriaTrial.objects.create(
        org=org,
        criteria_version=version,
        sample=[item.conversation_id for item in items],
        review_ids=[review.pk for review in reviews],
        judge_calls=3,
        judge_calls_made=3,
        source=TrialSource.LABELS,
        finished_at=timezone.now(),
    )

    score = trial_score(trial)
    answer = score.as_json()
    assert score.active_version == active and score.compared == 3
    assert list(answer["checks"]) == ["grounded", "complete", "cites_policy", "helpful"]
    assert answer["added_checks"] == ["cites_policy", "helpful"] and answer["dropped_checks"] == ["usable"]
    cites = answer["checks"]["cites_policy"]
    assert (cites["trial"]["n"], cites["trial"]["agreed"]) == (3, 2)  # the trial said fail where people said pass
    assert cites["active"]["n"] == 0 and cites["active"]["note"] == NOT_ASKED
    helpful = answer["checks"]["helpful"]["trial"]
    assert helpful["categories"] == ["1", "2", "3", "4", "5", "unknown"] and helpful["agreed"] == 2
    assert helpful["scores"]["n"] == 3 and helpful["scores"]["weighted_kappa"] is not None
    # Checks both ask are still compared side by side, and a changed answer is named.
    complete = answer["checks"]["complete"]
    assert (complete["trial"]["agreed"], complete["active"]["agreed"]) == (0, 3)
    assert {(c["check"], c["direction"]) for c in answer["changed"]} == {("complete", "away")}
    header, *rows = trial_rows(score)
    assert "cites_policy_trial" in header and "usable_trial" not in header and len(rows) == 3
