"""A version's own checks (issue 39) in every figure: the dashboard counts each check's answers, imported labels on
them feed the judge-against-people and people-against-people figures (equal to a recount from the rows), a score
check adds weighted kappa and ordinal alpha (against a hand-worked example), and the export, the evaluation records
and the page carry them."""

import csv
import io
from collections import Counter, defaultdict

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.dashboard.figures import dashboard_figures, scope_for
from grading.delivery.evaluations import evaluation_records
from grading.figures.agreement import agreement_of
from grading.figures.raters import people_agreement, score_agreement
from grading.models import CriteriaVersion, EvaluationExport, ItemKind, Label, Review
from grading.reviews.rollups import rollups_rebuild
from grading.reviews.versions import criteria_active, criteria_new_version
from reviewer.dashboards import reads
from tests.builders.own_checks import OWN_CHECKS, answered, asking, decided, labelled

pytestmark = pytest.mark.django_db

# What the judge answered on six conversations: grounded, cites_policy, intent, helpful.
MACHINE = {
    1: ("pass", "pass", "billing", "1"),
    2: ("pass", "fail", "refund", "2"),
    3: ("fail", "pass", "refund", "3"),
    4: ("pass", "fail", "other", "4"),
    5: ("pass", "pass", "billing", "5"),
    6: ("unknown", "fail", "unknown", "unknown"),
}
# Two labellers on the checks of its own: they split on cites_policy of item 3 and on the intent of item 4.
ANN = {1: ("pass", "billing", "1"), 2: ("fail", "refund", "3"), 3: ("fail", "billing", "3"),
       4: ("fail", "other", "3"), 5: ("pass", "billing", "5"), 6: ("fail", "refund", "2")}  # fmt: skip
BOB = {**ANN, 3: ("pass", "billing", "3"), 4: ("fail", "refund", "3")}
OWN = ("cites_policy", "intent", "helpful")


@pytest.fixture
def graded(org) -> dict[int, Review]:
    asking(criteria_active(org=org, kind=ItemKind.CONVERSATION))
    reviews = {}
    for n, answers in MACHINE.items():
        reviews[n] = answered(org, f"cv-{n}", dict(zip(OWN_CHECKS.keys, answers, strict=True)))
        for labeller, said in (("ann", ANN[n]), ("bob", BOB[n])):
            labelled(reviews[n], labeller, **dict(zip(OWN, said, strict=True)))
    rollups_rebuild(org_id=org.pk)
    return reviews


def _same(figures: dict, expected: dict) -> bool:
    """Equal, each number to within rounding (a jackknife sums its items in the order it reads them)."""
    if isinstance(expected, dict):
        return (
            isinstance(figures, dict)
            and figures.keys() == expected.keys()
            and all(_same(figures[key], value) for key, value in expected.items())
        )
    if isinstance(expected, list):
        return isinstance(figures, list) and len(figures) == len(expected) and all(map(_same, figures, expected))
    return figures == pytest.approx(expected) if isinstance(expected, float) else figures == expected


def _recounted(org, check: str) -> tuple[Counter, Counter, Counter]:
    """From the rows: the machine's answer against each label, against the labellers' agreed answer, and each
    item's labels as answer -> count."""
    each, agreed, patterns = Counter(), Counter(), defaultdict(Counter)
    machine = {r.conversation_id: r.checks[check]["verdict"] for r in Review.objects.counting().filter(org=org)}
    for label in Label.objects.filter(org=org, check_name=check):
        each[(machine[label.conversation_id], label.verdict)] += 1
        patterns[label.conversation_id][label.verdict] += 1
    for item, counts in patterns.items():
        if len(counts) == 1:
            agreed[(machine[item], next(iter(counts)))] += 1
    return each, agreed, patterns


def test_labels_on_a_versions_own_checks_feed_the_agreement_figures_equal_to_a_recount_from_the_rows(org, graded):
    figures = dashboard_figures(scope_for(org))
    agreement = figures["agreement"]["conversation"]
    assert [check["key"] for check in agreement["asked"]] == list(OWN_CHECKS.keys)
    for check in OWN:
        answers = OWN_CHECKS[check].answers
        each, agreed, patterns = _recounted(org, check)
        judged = agreement["samples"]["label"]["checks"][check]
        assert _same({k: v for k, v in judged.items() if k != "scores"}, agreement_of(answers, each).as_json()), check
        people = agreement["people"]["label"]["checks"][check]
        histogram = Counter(tuple(counts[a] for a in answers) for counts in patterns.values())
        mine = {k: v for k, v in people.items() if k not in ("judge", "pairs", "scores")}
        assert _same(mine, people_agreement(answers, histogram).as_json()), check
        assert _same(
            {k: v for k, v in people["judge"].items() if k != "scores"}, agreement_of(answers, agreed).as_json()
        )
    intent = agreement["people"]["label"]["checks"]["intent"]
    assert intent["categories"] == ["billing", "refund", "other", "unknown"]
    assert (intent["items"], intent["unanimous"]) == (6, 5)  # they split on item 4's intent
    assert agreement["samples"]["label"]["checks"]["cites_policy"]["n"] == 12  # two labels on each of six items
    assert "all_checks" in agreement["samples"]["label"]["checks"]  # the verdict checks pooled (grounded, cites)


def test_decisions_on_a_versions_own_checks_feed_the_audit_samples_figures_equal_to_a_recount(org, graded, operator):
    # People decide the first four items of the audit sample: a decision answers every check the version asks.
    said = {1: ("pass", "pass", "billing", "1"), 2: ("pass", "pass", "billing", "3"),
            3: ("fail", "pass", "refund", "3"), 4: ("pass", "fail", "other", "5")}  # fmt: skip
    for n, answers in said.items():
        decided(graded[n], operator, dict(zip(OWN_CHECKS.keys, answers, strict=True)))
    rollups_rebuild(org_id=org.pk)
    audit = dashboard_figures(scope_for(org))["agreement"]["conversation"]["samples"]["audit"]["checks"]
    for i, check in enumerate(OWN_CHECKS.keys):
        pairs = Counter((MACHINE[n][i], answers[i]) for n, answers in said.items())
        figures = {k: v for k, v in audit[check].items() if k != "scores"}
        assert _same(figures, agreement_of(OWN_CHECKS[check].answers, pairs).as_json()), check
    assert (audit["intent"]["n"], audit["intent"]["agreed"]) == (4, 3)  # item 2: the judge said refund, people billing
    assert audit["helpful"]["scores"]["n"] == 4


def test_a_score_checks_weighted_kappa_and_ordinal_alpha_are_those_worked_by_hand(org, graded):
    helpful = dashboard_figures(scope_for(org))["agreement"]["conversation"]["people"]["label"]["checks"]["helpful"]
    # The judge against the labellers' agreed score: (1,1) (2,3) (3,3) (4,3) (5,5), and unknown against 2.
    judge = helpful["judge"]
    assert (judge["n"], judge["agreed"]) == (6, 3)  # exact agreement counts the unknown, and 2 against 3 as a miss
    scores = judge["scores"]
    assert scores["n"] == 5  # the unknown is no score
    # Quadratic weights: observed disagreement (0+1+0+1+0)/5 = 0.4; expected, machine 1..5 once each against
    # people 1 once, 3 three times, 5 once: (28+13+8+13+28)/25 = 3.6; kappa = 1 - 0.4/3.6 = 8/9.
    assert scores["weighted_kappa"] == pytest.approx(8 / 9)
    # Ordinal alpha: coincidences o23 = o32 = o34 = o43 = 1, margins n = (2, 1, 4, 1, 2), delta(2,3) = delta(3,4)
    # = (5 - 2.5)^2 = 6.25; observed 4 x 6.25 = 25; expected sum of n_c n_k delta_ck over c != k = 1530;
    # alpha = 1 - (10 - 1) x 25 / 1530.
    assert scores["krippendorff_alpha"] == pytest.approx(1 - 9 * 25 / 1530)
    assert scores["krippendorff_alpha_level"] == "ordinal" and scores["weighted_kappa_weights"] == "quadratic"
    assert helpful["scores"]["krippendorff_alpha"] == pytest.approx(1.0)  # ann and bob gave the same scores


def test_a_versions_own_checks_are_counted_on_the_dashboard_and_shown_with_their_names(
    org, graded, client_for, stakeholder
):
    quality = dashboard_figures(scope_for(org))["quality"]
    assert quality["checks"]["intent"] == {"billing": 2, "refund": 2, "other": 1, "unknown": 1}
    assert quality["checks"]["helpful"] == {"1": 1, "2": 1, "3": 1, "4": 1, "5": 1, "unknown": 1}
    assert quality["checks"]["cites_policy"] == {"pass": 3, "fail": 3, "unknown": 0}
    assert "complete" not in quality["checks"]  # the version does not ask it
    page = client_for(stakeholder).get(reverse("dashboard"), {"org": org.slug}).content.decode()
    assert "Cites the policy" in page and "billing · refund · other · unknown" in page
    listed = client_for(stakeholder).get(
        reverse("dashboard_reviews"), {"org": org.slug, "check": "intent", "verdict": "billing"}
    )
    assert listed.status_code == 200
    shown = listed.content.decode()
    assert "cv-1" in shown and "cv-5" in shown and "cv-2" not in shown  # the judge said billing of 1 and 5


def test_the_export_has_a_column_for_each_check_the_version_asks(org, graded, client_for, stakeholder):
    response = client_for(stakeholder).get(reverse("dashboard_export"), {"org": org.slug, "format": "csv"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert {f"check_{key}" for key in OWN_CHECKS.keys} <= set(rows[0])
    by_item = {row["item"]: row for row in rows}
    assert [by_item["cv-3"][f"check_{key}"] for key in OWN_CHECKS.keys] == list(MACHINE[3])
    assert reads.checks_asked(org, ItemKind.CONVERSATION) == OWN_CHECKS.keys
    assert "check_complete" not in rows[0]  # no version of the org asks it


def test_each_check_the_version_asks_is_one_evaluation_record_a_score_by_its_value(org, graded):
    review = Review.objects.select_related("criteria_version", "conversation").get(pk=graded[2].pk)
    records = {}
    for record in evaluation_records(review, EvaluationExport.Event.REVIEW):
        attributes = {kv.key: kv.value for kv in record.attributes}
        records[attributes["gen_ai.evaluation.name"].string_value] = attributes
    assert list(records) == list(OWN_CHECKS.keys)
    assert records["cites_policy"]["gen_ai.evaluation.score.label"].string_value == "fail"
    assert records["cites_policy"]["gen_ai.evaluation.score.value"].double_value == 0.0
    assert records["intent"]["gen_ai.evaluation.score.label"].string_value == "refund"
    assert "gen_ai.evaluation.score.value" not in records["intent"]
    assert records["helpful"]["gen_ai.evaluation.score.value"].double_value == 2.0
    assert "gen_ai.evaluation.score.label" not in records["helpful"]


def test_score_agreement_leaves_out_answers_that_are_not_scores_of_the_scale():
    figures = score_agreement(5, {("1", "1"): 2, ("unknown", "3"): 4, ("6", "6"): 1, ("2", "2"): 1})
    assert figures.n == 3 and figures.weighted_kappa == pytest.approx(1.0)


def test_weeks_graded_under_an_earlier_version_are_read_with_the_checks_it_asked(org, client_for, stakeholder):
    first = criteria_active(org=org, kind=ItemKind.CONVERSATION)  # today's three checks
    answered(org, "cv-old", {"grounded": "pass", "complete": "fail", "usable": "pass"})
    second = asking(criteria_new_version(org=org, kind=ItemKind.CONVERSATION))
    CriteriaVersion.objects.filter(pk=first.pk).update(is_active=False)
    CriteriaVersion.objects.filter(pk=second.pk).update(is_active=True, published_at=timezone.now())
    answered(org, "cv-new", dict(zip(OWN_CHECKS.keys, MACHINE[2], strict=True)))
    rollups_rebuild(org_id=org.pk)

    quality = dashboard_figures(scope_for(org))["quality"]
    assert quality["criteria_version"] == second.number and set(quality["checks"]) == set(OWN_CHECKS.keys)
    [earlier] = quality["earlier_versions"]
    assert earlier["criteria_version"] == first.number and earlier["reviews"] == 1 and earlier["weeks"]
    assert [check["key"] for check in earlier["asked"]] == ["grounded", "complete", "usable"]
    assert earlier["checks"]["complete"] == {"pass": 0, "fail": 1, "unknown": 0}
    page = client_for(stakeholder).get(reverse("dashboard"), {"org": org.slug}).content.decode()
    assert "quality-earlier-versions" in page and "Complete: pass 0 · fail 1 · unknown 0" in page


def test_the_longest_keys_and_categories_a_version_may_ask_are_counted_whole(org):
    """A check keyed with 32 characters whose eight categories are as long, labelled by nine people who each gave
    another answer: every counter keeps its key whole, and the figures equal a recount from the rows."""
    key = "k" * 31 + "1"
    categories = [f"{n}" * 32 for n in "abcdefgh"]
    longest = CheckSet(
        checks=[
            CheckDefinition(key=key, name="Long", question="Which?", kind=AnswerKind.CATEGORY, categories=categories,
                            required=False)
        ]
    )  # fmt: skip
    asking(criteria_active(org=org, kind=ItemKind.CONVERSATION), longest)
    review = answered(org, "cv-long", {key: categories[-1]})
    for n, answer in enumerate([*categories, "unknown"]):
        labelled(review, f"labeller-{n}", **{key: answer})
    rollups_rebuild(org_id=org.pk)

    agreement = dashboard_figures(scope_for(org))["agreement"]["conversation"]
    answers = longest[key].answers
    each, _agreed, patterns = _recounted(org, key)
    histogram = Counter(tuple(counts[a] for a in answers) for counts in patterns.values())
    people = agreement["people"]["label"]["checks"][key]
    assert _same({k: v for k, v in people.items() if k not in ("judge", "pairs", "scores")},
                 people_agreement(answers, histogram).as_json())  # fmt: skip
    judged = agreement["samples"]["label"]["checks"][key]
    assert _same({k: v for k, v in judged.items() if k != "scores"}, agreement_of(answers, each).as_json())
