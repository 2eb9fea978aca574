"""A trial started on the page runs in a real Celery worker against the loopback judge: exactly the counted calls."""

import pytest
from django.urls import reverse

from grading.drafts.gate import draft_grade
from grading.models import CriteriaTrial, ItemKind, Review
from grading.reviews.versions import criteria_new_version
from tests.builders.drafts import CLEAN_BODY, draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.processes import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_trial_started_on_the_page_makes_exactly_the_counted_judge_calls_in_the_worker(
    client_for, celery_worker, fake_llm, org, criteria_admin
):
    setup_org_memory(org)
    for n in range(3):
        draft = save_draft(org, CLEAN_BODY.replace("every month", f"every {n + 2} weeks"), external_id=f"d-{n}")
        fake_llm.script(draft_reply(8))
        draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT, author=criteria_admin)
    fake_llm.reset()
    fake_llm.set_default(draft_reply(6))
    client = client_for(criteria_admin)
    url = reverse("criteria_trial", args=[version.pk])
    assert "Run the trial: 2 judge calls" in client.get(url, {"k": 2}).content.decode()
    response = client.post(url, {"k": 2, "counted_calls": 2})
    trial = CriteriaTrial.objects.get()
    assert response["Location"] == reverse("criteria_trial_detail", args=[trial.pk])

    wait_until(lambda: CriteriaTrial.objects.get(pk=trial.pk).finished_at, message="the trial to finish")
    trial.refresh_from_db()
    assert len(fake_llm.chat_requests()) == trial.judge_calls_made == 2
    reviews = Review.objects.filter(pk__in=trial.review_ids)
    assert {(r.state, r.criteria_version_id, r.score) for r in reviews} == {("trial", version.pk, 6.0)}
    page = client.get(response["Location"]).content.decode()
    assert "Done" in page and 'hx-trigger="every 2s"' not in page
