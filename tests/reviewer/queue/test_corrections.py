"""Approve as corrected: an operator fixes a draft's body, sees the checks on the edit, and approves it; the corrected
revision is fingerprinted, graded by the gate and approved only when no hard check fails on it."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.core.evidence import draft_fingerprint
from grading.core.outcomes import CORRECTED
from grading.drafts.gate import draft_grade
from grading.models import AuditEvent, Correction, Decision, Draft, Review, ReviewState
from grading.reviews.services import review_audit_mark
from grading.reviews.versions import criteria_new_version, criteria_publish
from reviewer.models import Claim, Role
from reviewer.queue.services import claim_take
from tests.builders.corrected_drafts import BROKEN_BODY, FATAL_BODY, FIXED_BODY, waiting_with_finding
from tests.builders.drafts import draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.people import make_person
from tests.builders.queue_items import item_answer, resubmit, slots_ask

HTMX = {"HTTP_HX_REQUEST": "true"}
INJECTION = json.loads(
    (
        __import__("pathlib").Path(__file__).parents[2] / "resilience/injection/01-draft-body-instruction.json"
    ).read_text()
)["injection"]


def check_url(review: Review) -> str:
    return reverse("review_correction_check", args=[review.pk])


def correct_url(review: Review) -> str:
    return reverse("review_correct", args=[review.pk])


def correct(client, review: Review, body: str, *, fingerprint: str | None = None):
    return client.post(correct_url(review), {"body": body, "fingerprint": fingerprint or review.fingerprint})


def regrade(draft: Draft, fake_llm, *, overall: int = 6, **reply) -> Review:
    """The gate grades the draft as it is now, its judge the loopback fake (by default doubting it: 6 of 10)."""
    fake_llm.script(draft_reply(overall, **reply))
    return draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))


def assert_nothing_written(review: Review, body: str) -> None:
    draft = Draft.objects.get(pk=review.draft_id)
    assert draft.body == body and draft.fingerprint == review.fingerprint
    assert not Correction.objects.exists()
    assert Review.objects.get(pk=review.pk).state == ReviewState.WAITING


# --- the editor and its checks ----------------------------------------------------------------------------------------


def test_it_shows_the_holder_an_editor_with_the_findings_and_their_quoted_text(client_for, operator, org):
    review = waiting_with_finding(org)
    assert [f["code"] for f in review.findings] == ["internal_links_missing"]
    claim_take(user=operator, review_id=review.pk)
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert 'id="correction-editor"' in html and "Correct and approve" in html
    assert "findings on the body as judged" in html and "internal_links_missing" in html


def test_it_shows_no_editor_to_someone_who_does_not_hold_the_item(client_for, operator, org):
    review = waiting_with_finding(org)
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert 'id="correction-editor"' not in html


def test_it_runs_the_checks_on_the_edit_and_asks_no_judge(client_for, operator, org, fake_llm):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    client = client_for(operator)
    broken = client.post(check_url(review), {"body": BROKEN_BODY + "\nWe delve.", "fingerprint": review.fingerprint},
                         **HTMX)  # fmt: skip
    assert broken.status_code == 200
    html = broken.content.decode()
    assert (
        "2 findings on your edit" in html and "internal_links_missing" in html and '<q class="untrusted">delve' in html
    )
    fixed = client.post(check_url(review), {"body": FIXED_BODY, "fingerprint": review.fingerprint}, **HTMX)
    assert "The checks pass on your edit" in fixed.content.decode()
    assert fake_llm.chat_requests() == [] and not Correction.objects.exists()
    assert Draft.objects.get(pk=review.draft_id).body == BROKEN_BODY


def test_it_checks_without_htmx_on_the_whole_page_keeping_the_edit(client_for, operator, org):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    response = client_for(operator).post(check_url(review), {"body": FIXED_BODY, "fingerprint": review.fingerprint})
    html = response.content.decode()
    assert response.status_code == 200 and "The checks pass on your edit" in html
    assert "measuring-deflection" in html.split('id="correction-body"')[1].split("</textarea>")[0]


# --- approving as corrected -------------------------------------------------------------------------------------------


def test_it_makes_the_corrected_body_a_new_revision_with_its_fingerprint_and_diff(client_for, operator, org):
    review = waiting_with_finding(org)
    claim = claim_take(user=operator, review_id=review.pk)
    response = correct(client_for(operator), review, FIXED_BODY.replace("\n", "\r\n"))
    assert response.status_code == 302 and response["Location"] == reverse("review_detail", args=[review.pk])
    draft = Draft.objects.get(pk=review.draft_id)
    correction = Correction.objects.get()
    assert draft.body == FIXED_BODY  # the browser's CRLF line ends are the draft's LF again
    assert draft.fingerprint == draft_fingerprint(title=draft.title, body=FIXED_BODY, source_urls=draft.source_urls)
    assert (correction.kind, correction.state, correction.author, correction.review) == (
        Correction.Kind.DRAFT_BODY, Correction.State.GRADING, operator, review)  # fmt: skip
    assert (correction.original, correction.corrected) == (BROKEN_BODY, FIXED_BODY)
    assert (correction.evidence_fingerprint, correction.corrected_fingerprint) == (
        review.fingerprint,
        draft.fingerprint,
    )
    assert [line for line in correction.diff.splitlines() if line.startswith("+and [how we measure deflection]")]
    assert correction.diff.startswith(f"--- {draft.slug}/original\n+++ {draft.slug}/corrected\n")
    assert Review.objects.with_state().get(pk=review.pk).state_now == ReviewState.STALE  # the evidence moved on
    assert draft.grading_task_id  # owed a grading, as a resubmission is
    claim.refresh_from_db()
    assert claim.end == Claim.End.DECIDED
    event = AuditEvent.objects.get(action="correction.create")
    assert (event.actor, event.detail["corrected_fingerprint"]) == (operator, draft.fingerprint)


def test_the_gate_grades_the_revision_and_the_approval_stands_over_a_judges_doubt(client_for, operator, org, fake_llm):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    correct(client_for(operator), review, FIXED_BODY)
    regraded = regrade(review.draft, fake_llm, overall=5, passed=False)
    assert "measuring-deflection" in json.dumps(fake_llm.chat_requests()[0].body)
    assert regraded.criteria_version_id == review.criteria_version_id
    assert (regraded.route, regraded.reason, regraded.findings) == ("human", CORRECTED, [])
    assert "the gate alone would say fail" in regraded.detail and operator.username not in regraded.detail
    decision = Decision.objects.get(review=regraded)
    assert (decision.outcome, decision.decided_by, decision.basis) == ("approve", operator, Decision.Basis.ONE)
    assert Review.objects.get(pk=regraded.pk).state == ReviewState.DECIDED
    correction = Correction.objects.get()
    assert (correction.state, correction.regrade) == (Correction.State.APPROVED, regraded)
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert (
        "approved as corrected" in html and f'review <a href="{reverse("review_detail", args=[regraded.pk])}"' in html
    )
    trail = list(AuditEvent.objects.filter(action__startswith="correction.").values_list("action", flat=True))
    assert sorted(trail) == ["correction.approved", "correction.create"]


def test_a_hard_check_still_failing_refuses_it_and_the_item_waits_again(client_for, operator, org, fake_llm):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    correct(client_for(operator), review, FATAL_BODY)
    regraded = regrade(review.draft, fake_llm, overall=9)
    assert [f["code"] for f in regraded.findings] == ["h2_not_question"]
    assert not Decision.objects.exists()
    assert Correction.objects.get().state == Correction.State.REFUSED
    assert Review.objects.waiting().filter(pk=regraded.pk).exists()
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "A hard check still fails on the corrected revision (h2_not_question)" in html
    again = client_for(operator).get(reverse("review_detail", args=[regraded.pk])).content.decode()
    assert "A correction a hard check still fails" in again and "the gate alone would say fail" in again
    queue = client_for(operator).get(reverse("queue")).content.decode()
    assert "a person&#x27;s correction, and a hard check still fails" in queue


def test_an_injection_the_judge_obeys_does_not_approve_a_body_a_hard_check_fails(client_for, operator, org, fake_llm):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    hostile = FATAL_BODY + f"\n{INJECTION}\n"
    correct(client_for(operator), review, hostile)
    regraded = regrade(review.draft, fake_llm, overall=10, aeo=5, writing=5, org_fit=5, issues=[])
    prompt = json.dumps(fake_llm.chat_requests()[0].body)
    assert INJECTION in prompt  # read by the judge as the draft's text, inside its delimited block
    assert Correction.objects.get().state == Correction.State.REFUSED and not Decision.objects.exists()
    assert regraded.findings


# --- who may, and when ------------------------------------------------------------------------------------------------


def test_of_two_operators_the_first_wins_and_the_second_is_told_with_nothing_written(client_for, operator, org):
    review = waiting_with_finding(org)
    other = make_person("operator-b", org, Role.OPERATOR)
    claim_take(user=other, review_id=review.pk, now=timezone.now() - timedelta(hours=2))  # their lease ran out
    claim_take(user=operator, review_id=review.pk)
    assert correct(client_for(operator), review, FIXED_BODY).status_code == 302
    late = correct(client_for(other), review, BROKEN_BODY + "\nTheir own fix.\n")
    assert late.status_code == 409
    html = late.content.decode()
    assert f"{operator.username} corrected this draft" in html and "nothing was recorded" in html
    assert "Their own fix." in html  # what they wrote is kept for them
    assert Correction.objects.count() == 1 and Draft.objects.get(pk=review.draft_id).body == FIXED_BODY


def test_an_editor_loaded_before_the_pipeline_resubmitted_is_refused(client_for, operator, org):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    resubmit(review, body=BROKEN_BODY + "\nNew from the pipeline.\n")
    response = correct(client_for(operator), review, FIXED_BODY)
    assert response.status_code == 409 and "The pipeline resubmitted this draft" in response.content.decode()
    assert not Correction.objects.exists()


def test_it_refuses_someone_without_the_lease(client_for, operator, org):
    review = waiting_with_finding(org)
    response = correct(client_for(operator), review, FIXED_BODY)
    assert response.status_code == 409 and "claim it first" in response.content.decode()
    assert_nothing_written(review, BROKEN_BODY)


def test_an_unchanged_body_is_refused_naming_the_field(client_for, operator, org):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    response = correct(client_for(operator), review, BROKEN_BODY)
    assert (
        response.status_code == 400 and "body: the corrected body is the draft&#x27;s own" in response.content.decode()
    )
    assert_nothing_written(review, BROKEN_BODY)


def test_an_audit_item_is_not_corrected(client_for, operator, org):
    review = waiting_with_finding(org)
    Review.objects.filter(pk=review.pk).update(route="fail", reason="", state=ReviewState.CURRENT)
    review_audit_mark(review_ids=[review.pk])
    claim_take(user=operator, review_id=review.pk)
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert 'id="correction-editor"' not in html
    response = correct(client_for(operator), review, FIXED_BODY)
    assert response.status_code == 400 and "audit-sample item" in response.content.decode()
    assert not Correction.objects.exists()


def test_with_two_people_only_the_adjudicator_corrects_and_decides_for_the_item(client_for, operator, org, fake_llm):
    slots_ask(org, "draft", 2)
    review = waiting_with_finding(org)
    first, second = make_person("first", org, Role.OPERATOR), make_person("second", org, Role.OPERATOR)
    claim_take(user=first, review_id=review.pk)
    answering = correct(client_for(first), review, FIXED_BODY)
    assert answering.status_code == 409 and "the adjudicator may approve it as corrected" in answering.content.decode()
    assert not Correction.objects.exists()
    item_answer(first, review, outcome="approve")
    item_answer(second, review, outcome="reject", note="The link is missing.")
    claim_take(user=operator, review_id=review.pk)
    assert correct(client_for(operator), review, FIXED_BODY).status_code == 302
    regraded = regrade(review.draft, fake_llm)
    decision = Decision.objects.get(review=regraded)
    assert (decision.decided_by, decision.basis) == (operator, Decision.Basis.ADJUDICATED)


@pytest.mark.parametrize("person", ["anonymous", "other_org_operator", "stakeholder"])
def test_people_outside_the_queue_cannot_correct(client, client_for, org, person, request):
    review = waiting_with_finding(org)
    who = client if person == "anonymous" else client_for(request.getfixturevalue(person))
    for url in (correct_url(review), check_url(review)):
        response = who.post(url, {"body": FIXED_BODY, "fingerprint": review.fingerprint})
        assert response.status_code in (302, 403, 404)
    assert_nothing_written(review, BROKEN_BODY)


# --- hostile bodies, and escaping -------------------------------------------------------------------------------------


def test_a_nul_in_the_body_gets_a_400_naming_the_field_and_changes_nothing(client_for, operator, org):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    for url in (correct_url(review), check_url(review)):
        response = client_for(operator).post(url, {"body": FIXED_BODY + "\x00", "fingerprint": review.fingerprint})
        assert response.status_code == 400 and "body:" in response.content.decode()
    assert_nothing_written(review, BROKEN_BODY)


def test_a_body_over_the_limit_gets_a_413_and_changes_nothing(client_for, operator, org, settings):
    settings.MAX_DRAFT_BYTES = 5_000
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    huge = FIXED_BODY + "x" * 6_000
    for url in (correct_url(review), check_url(review)):
        response = client_for(operator).post(url, {"body": huge, "fingerprint": review.fingerprint})
        assert response.status_code == 413 and "MAX_DRAFT_BYTES" in response.content.decode()
    assert_nothing_written(review, BROKEN_BODY)


def test_markup_in_a_correction_is_shown_as_text_everywhere(client_for, operator, org):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    hostile = FIXED_BODY + '\n</textarea><script>alert(1)</script><img src=x onerror="alert(2)">\n'
    checked = client_for(operator).post(check_url(review), {"body": hostile, "fingerprint": review.fingerprint})
    assert correct(client_for(operator), review, hostile).status_code == 302
    page = client_for(operator).get(reverse("review_detail", args=[review.pk]))
    for html in (checked.content.decode(), page.content.decode()):
        assert "<script>alert(1)" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_criteria_published_before_the_gate_graded_it_overtake_the_approval(client_for, operator, org, fake_llm):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    correct(client_for(operator), review, FIXED_BODY)
    criteria_publish(version=criteria_new_version(org=org, kind="draft"))  # the approval was given under v1
    regraded = regrade(review.draft, fake_llm, overall=9)
    assert regraded.criteria_version_id != review.criteria_version_id and regraded.findings == []
    assert Correction.objects.get().state == Correction.State.OVERTAKEN and not Decision.objects.exists()
    assert Review.objects.waiting().filter(pk=regraded.pk).exists()  # a person decides it under the new version
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "Other criteria were published before the gate graded the corrected revision" in html
    assert "A hard check still fails" not in html


def test_while_places_are_open_the_adjudicators_correction_is_hidden_from_the_others(client_for, operator, org,
                                                                                    fake_llm):  # fmt: skip
    slots_ask(org, "draft", 2)
    review = waiting_with_finding(org)
    first, second = make_person("first", org, Role.OPERATOR), make_person("second", org, Role.OPERATOR)
    item_answer(first, review, outcome="approve")
    item_answer(second, review, outcome="reject", note="The link is missing.")
    claim_take(user=operator, review_id=review.pk)
    correct(client_for(operator), review, FATAL_BODY)
    regraded = regrade(review.draft, fake_llm, overall=9)  # refused: it waits for two answers again
    claim_take(user=first, review_id=regraded.pk)
    theirs = client_for(first).get(reverse("review_detail", args=[regraded.pk])).content.decode()
    assert 'id="corrections"' not in theirs and "corrected by" not in theirs.lower()
    assert operator.username not in theirs.split('id="trail"')[0]  # not before the trail, which names the corrector
    assert "approve_as_corrected" not in theirs  # the trail says who corrected the body, not what they decided
    panel = client_for(first).get(reverse("review_corrections", args=[regraded.pk]), **HTMX).content.decode()
    assert "corrected by" not in panel
    own = client_for(operator).get(reverse("review_detail", args=[regraded.pk])).content.decode()
    assert f"corrected by {operator.username}" in own  # a reader always sees their own


def test_a_body_an_earlier_review_read_is_refused_and_nothing_is_written(client_for, operator, org, fake_llm):
    draft = save_draft(org, FIXED_BODY)
    setup_org_memory(org)
    first = regrade(draft, fake_llm, overall=9)  # the pipeline's first revision, graded
    Review.objects.filter(pk=first.pk).update(state=ReviewState.SUPERSEDED)  # then it sent this one:
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    response = correct(client_for(operator), review, FIXED_BODY)
    assert response.status_code == 400 and "an earlier revision of this draft" in response.content.decode()
    assert_nothing_written(review, BROKEN_BODY)
