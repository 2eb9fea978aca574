"""Drafts an operator corrects: one waiting in the queue with a finding (a missing internal link), as a corrected
revision the gate refused waits, the fix, and a body with a finding no repair makes."""

from datetime import timedelta

from django.utils import timezone

from grading.checks.checks import check_draft
from grading.core.outcomes import CORRECTED
from grading.models import ItemKind, Review, ReviewState, Route
from grading.reviews.services import published_draft_rules
from grading.reviews.versions import criteria_active
from tests.builders.drafts import CLEAN_BODY, SOURCE, save_draft, setup_org_memory
from tests.builders.queue_items import JUDGE

MISSING_LINK = "\nand [how we measure deflection](/writing/measuring-deflection)"
BROKEN_BODY = CLEAN_BODY.replace(MISSING_LINK, "")
FIXED_BODY = CLEAN_BODY
# A hard finding no repair makes: an H2 that is not a question (fatal).
FATAL_BODY = FIXED_BODY.replace("## What should a team publish first?", "## Publishing first")
PROOF_TERMS = ["Acme Logistics"]


def waiting_with_finding(org, body: str = BROKEN_BODY, *, callback_url: str | None = None) -> Review:
    """A draft (with org memory) whose live review waits for people with the findings the v1 checks give `body`:
    by default one, the missing second internal link."""
    setup_org_memory(org)
    draft = save_draft(org, body, callback_url=callback_url)
    criteria = criteria_active(org=org, kind=ItemKind.DRAFT)
    findings = check_draft(
        body=body, rules=published_draft_rules(criteria), source_urls=[SOURCE], proof_terms=PROOF_TERMS
    )
    finished = timezone.now() - timedelta(minutes=30)
    return Review.objects.create(
        org=org,
        kind=ItemKind.DRAFT,
        draft=draft,
        fingerprint=draft.fingerprint,
        criteria_version=criteria,
        judge=JUDGE,
        judge_key="judge-test",
        memory_snapshot="mem1:c83d",
        started_at=finished - timedelta(seconds=5),
        finished_at=finished,
        routed_at=finished,
        stages=1,
        route=Route.HUMAN,
        reason=CORRECTED,
        state=ReviewState.WAITING,
        score=6.0,
        judge_score=7.0,
        judge_passed=True,
        sub_scores={"aeo": 4, "writing": 4, "org_fit": 4},
        findings=[finding.as_json() for finding in findings],
        memory_used={"facts": [{"id": 1, "kind": "fact", "text": "Acme.", "proof_terms": PROOF_TERMS}]},
    )
