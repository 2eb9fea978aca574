"""A draft's review records how sure the judge was: of its verdict (`pass_fail`, from the overall score's
distribution) and of each check's answer, through the judge production builds (settings.JUDGES)."""

import pytest

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.drafts.gate import draft_grade
from grading.judge.backends import HeuristicDraftJudge
from grading.models import ItemKind
from tests.builders.checks import version_with_checks
from tests.builders.drafts import CLEAN_BODY, draft_verdict, save_draft, setup_org_memory
from tests.builders.judges import configure_judges, judge_config
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db

# Every sub-score's token came back certain (its only alternative itself).
CERTAIN_SUB_SCORES = {"aeo": 1.0, "writing": 1.0, "org_fit": 1.0}


@pytest.fixture
def judged_by_the_fake(settings, fake_llm, org):
    """The default judge answers at the loopback server, built as production builds it; the org has its memory."""
    configure_judges(settings, default=judge_config(fake_llm))
    setup_org_memory(org)
    return fake_llm


def graded(org, fake_llm, overall: int, alternatives: dict[str, float], body: str = CLEAN_BODY, **verdict):
    fake_llm.script(json_reply(draft_verdict(overall, **verdict), top_logprobs=alternatives, logprob_field="overall"))
    return draft_grade(draft_id=save_draft(org, body).pk)


def test_a_passed_drafts_confidence_is_its_scores_mass_at_or_above_the_threshold(org, judged_by_the_fake):
    review = graded(org, judged_by_the_fake, 8, {"8": 0.7, "9": 0.2, "6": 0.1})

    assert judged_by_the_fake.chat_requests()[0].body["logprobs"] is True
    assert review.route == "pass"
    # The pass threshold of v1 is 7: P(8) + P(9).
    assert review.confidences == pytest.approx({"pass_fail": 0.9} | CERTAIN_SUB_SCORES)
    assert review.confidence_source == "logprobs"


def test_a_failed_drafts_confidence_is_its_scores_mass_below_the_threshold(org, judged_by_the_fake):
    review = graded(org, judged_by_the_fake, 6, {"6": 0.8, "7": 0.1, "5": 0.1})

    assert review.route == "fail"
    assert review.confidences["pass_fail"] == pytest.approx(0.9)


def test_a_draft_a_finding_failed_keeps_the_judges_own_confidence(org, judged_by_the_fake):
    body = CLEAN_BODY.replace("Start with the questions", "Delve into the questions")

    review = graded(org, judged_by_the_fake, 9, {"9": 0.9, "6": 0.1}, body)

    assert review.route == "fail"
    assert review.confidences["pass_fail"] == pytest.approx(0.9)


def test_a_sub_score_the_findings_corrected_has_no_confidence(org, judged_by_the_fake):
    body = CLEAN_BODY.replace("Acme Logistics", "One logistics company")

    review = graded(org, judged_by_the_fake, 9, {"9": 1.0}, body, org_fit=5)

    assert review.sub_scores["org_fit"] == 1
    assert review.confidences == pytest.approx({"pass_fail": 1.0, "aeo": 1.0, "writing": 1.0})


def test_each_check_of_a_drafts_version_has_the_confidence_of_its_answer_unless_it_was_downgraded(
    org, judged_by_the_fake
):
    version_with_checks(org, ItemKind.DRAFT, CheckSet(checks=[
        CheckDefinition(key="clarity", name="Clarity", question="How clear?", kind=AnswerKind.SCORE, scale=10,
                        pass_from=6),
        CheckDefinition(key="cites_sources", name="Cites sources", question="Does every figure name its source?"),
        CheckDefinition(key="audience", name="Audience", question="Who for?", kind=AnswerKind.CATEGORY,
                        categories=["leaders", "agents"], required=False),
    ]))  # fmt: skip
    answer = {
        "overall": 8,
        "clarity": 8,
        "cites_sources": {"verdict": "pass", "quotes": ["Acme Logistics cut ticket volume by 38%"], "rationale": ""},
        "audience": {"verdict": "leaders", "quotes": ["Written for the board"], "rationale": "not in the draft"},
        "passed": True,
        "issues": [],
    }
    alternatives = {"cites_sources": {"pass": 0.75, "fail": 0.25}, "audience": {"leaders": 0.6, "agents": 0.4}}
    judged_by_the_fake.script(
        json_reply(answer, top_logprobs={"8": 0.9, "6": 0.1}, logprob_field="overall", verdict_logprobs=alternatives)
    )

    review = draft_grade(draft_id=save_draft(org).pk)

    # audience quotes nothing of the draft: downgraded to unknown, it is not the judge's answer and has no confidence.
    assert review.checks["audience"]["verdict"] == "unknown"
    assert review.confidences == pytest.approx({"pass_fail": 0.9, "clarity": 1.0, "cites_sources": 0.75})


def test_a_judge_server_that_returns_no_logprobs_leaves_the_review_without_confidences(org, judged_by_the_fake):
    judged_by_the_fake.returns_logprobs = False

    review = graded(org, judged_by_the_fake, 8, {"8": 0.6, "7": 0.4})

    assert (review.route, review.judge_score) == ("pass", 8)
    assert (review.confidences, review.confidence_source) == ({}, "")


def test_the_offline_heuristic_judge_gives_no_confidences(org):
    setup_org_memory(org)

    review = draft_grade(draft_id=save_draft(org).pk, judge=HeuristicDraftJudge())

    assert (review.confidences, review.confidence_source) == ({}, "")
