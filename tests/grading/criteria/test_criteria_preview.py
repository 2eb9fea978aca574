"""The preview: a draft version's deterministic checks over recent drafts against their current reviews, with no
judge call and nothing written."""

import pytest

from grading.checks.checks import check_draft
from grading.criteria.impact import criteria_preview
from grading.drafts.gate import draft_grade
from grading.models import AuditEvent, CriteriaVersion, Draft, ItemKind, Review
from grading.reviews.memory import retrieve_memory
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_update
from tests.builders.drafts import CLEAN_BODY, draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.judges import configure_judges, judge_config

pytestmark = pytest.mark.django_db

BODIES = {
    "clean": (CLEAN_BODY, 8),
    "gizmo": (CLEAN_BODY.replace("Start with the questions", "Start with the gizmo questions"), 8),
    "dash": (CLEAN_BODY.replace("When answers go stale.", "When answers go stale \u2014 and they do."), 8),
    "delve": (CLEAN_BODY.replace("Start with the questions", "Delve into the questions"), 8),
    "marginal": (CLEAN_BODY.replace("Review them every month.", "Review them every week."), 7),
}


@pytest.fixture
def graded(org, fake_llm):
    """Five drafts graded under v1 by the production judge client against the loopback server."""
    setup_org_memory(org)
    judge = llm_draft_judge(fake_llm)
    for name, (body, score) in BODIES.items():
        draft = save_draft(org, body, external_id=name)
        fake_llm.script(draft_reply(score))
        draft_grade(draft_id=draft.pk, judge=judge)
    fake_llm.reset()
    return {d.external_id: d for d in Draft.objects.filter(org=org)}


def stricter_version(org) -> CriteriaVersion:
    """v2: "gizmo" banned, "delve" allowed again, threshold 7.5 with the same band."""
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    rules = version.draft_rules().model_dump(mode="json")
    rules["banned_words"]["terms"] = [t for t in rules["banned_words"]["terms"] if t != "delve"] + ["gizmo"]
    rules["threshold"] = 7.5
    return criteria_update(version=version, rules=rules)


def keys(findings) -> set[tuple[str, str]]:
    return {(f["code"], f["subject"]) if isinstance(f, dict) else (f.code, f.subject) for f in findings}


def test_it_shows_new_findings_findings_gone_and_route_changes_linked_to_each_draft(org, graded):
    assert {name: Review.objects.counting().get(draft=d).route for name, d in graded.items()} == {
        "clean": "pass", "gizmo": "pass", "dash": "pass", "delve": "fail", "marginal": "pass",
    }  # fmt: skip
    preview = criteria_preview(version=stricter_version(org))
    rows = {row.draft.external_id: row for row in preview.rows}
    assert set(rows) == {"gizmo", "delve", "marginal"}  # the repaired dash is repaired under v2 as well
    assert keys(rows["gizmo"].new_findings) == {("banned_word", "gizmo")} and rows["gizmo"].gone_findings == []
    assert (rows["gizmo"].route_before, rows["gizmo"].route_after) == ("pass", "fail")
    assert rows["delve"].new_findings == [] and keys(rows["delve"].gone_findings) == {("banned_word", "delve")}
    assert (rows["delve"].route_before, rows["delve"].route_after) == ("fail", "pass")
    assert (rows["marginal"].new_findings, rows["marginal"].gone_findings) == ([], [])
    assert (rows["marginal"].route_before, rows["marginal"].route_after) == ("pass", "human")  # 7 is in [7.0, 7.5)
    assert (preview.read, preview.compared, preview.unchanged, preview.route_changes) == (5, 5, 2, 3)
    assert (rows["gizmo"].draft.pk, rows["gizmo"].draft.title) == (graded["gizmo"].pk, graded["gizmo"].title)


@pytest.mark.parametrize("chunk", [500, 2], ids=["one read", "three reads"])
def test_its_changed_findings_equal_a_direct_recomputation_of_the_checks(org, graded, chunk, monkeypatch):
    monkeypatch.setattr("grading.criteria.impact.PREVIEW_CHUNK", chunk)
    v1 = criteria_active(org=org, kind=ItemKind.DRAFT)
    v2 = stricter_version(org)
    preview = criteria_preview(version=v2)
    assert (preview.read, preview.compared) == (5, 5)
    shown = {row.draft.pk: (keys(row.new_findings), keys(row.gone_findings)) for row in preview.rows}
    proof_terms = retrieve_memory(org=org, text="").proof_terms  # what the gate reads: facts do not vary
    for draft in graded.values():
        # Fatal findings are never repaired, so under each version they are what its review would list.
        old, new = (
            {(f.code, f.subject) for f in check_draft(body=draft.body, rules=version.draft_rules(),
             source_urls=draft.source_urls, proof_terms=proof_terms) if f.severity == "fatal"}
            for version in (v1, v2)
        )  # fmt: skip
        assert shown.get(draft.pk, (set(), set())) == (new - old, old - new), draft.external_id


def test_it_calls_no_judge_and_writes_nothing(org, graded, fake_llm, settings):
    configure_judges(settings, default=judge_config(fake_llm))  # any judge built from settings would reach it
    version = stricter_version(org)

    def rows_now():
        return Review.objects.count(), AuditEvent.objects.count(), list(Review.objects.values_list("pk", "state"))

    before = rows_now()
    assert criteria_preview(version=version).rows
    assert fake_llm.chat_requests() == []
    assert rows_now() == before


def test_it_reads_the_last_n_drafts_and_skips_drafts_with_no_current_review(org, graded):
    ungraded = save_draft(org, CLEAN_BODY.replace("Start with", "Begin with"), external_id="new")
    preview = criteria_preview(version=stricter_version(org), limit=3)
    assert (preview.read, preview.compared) == (3, 2)  # the newest three, one of them never graded
    assert ungraded.pk not in {row.draft.pk for row in preview.rows}


def test_a_repair_the_current_review_could_not_make_is_not_counted_as_made(org, fake_llm):
    """With no sibling article to link, the internal-links repair was skipped: the finding remains, and the preview
    does not claim it would be gone."""
    links = (
        "See [our ticket triage guide](/writing/ticket-triage)\n"
        "and [how we measure deflection](/writing/measuring-deflection)."
    )
    assert links in CLEAN_BODY
    body = CLEAN_BODY.replace(links, "See our guides.")
    draft = save_draft(org, body, external_id="lonely")
    fake_llm.script(draft_reply(8))
    review = draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    assert keys(review.findings) >= {("internal_links_missing", "")}
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    assert criteria_preview(version=version).rows == []


def test_drafts_whose_checks_run_past_the_budget_are_counted_as_unchecked_and_not_compared(org, graded, settings):
    settings.PREVIEW_CPU_BUDGET_SECONDS = 0.000_001  # spent before the first draft is checked
    preview = criteria_preview(version=stricter_version(org))
    assert (preview.compared, preview.unchecked, preview.rows, preview.unchanged) == (5, 5, [], 0)
