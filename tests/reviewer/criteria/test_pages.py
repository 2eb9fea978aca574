"""The criteria pages as a criteria admin uses them: versions, the editor and its per-field errors, conflicts, the
diff, the preview, trials and publishing after the plan."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from grading.models import CriteriaTrial, CriteriaVersion, Decision, GradingRun, ItemKind, JudgeSpend, Review
from grading.reviews.services import PersonVerdict
from grading.reviews.spend import spend_cap_set
from grading.reviews.versions import criteria_new_version, criteria_publish
from reviewer.models import Role
from reviewer.queue.services import claim_take, decision_create
from tests.builders.criteria import editor_data, graded_org
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def criteria(org, fake_llm, criteria_admin):
    return graded_org(org, fake_llm, criteria_admin)


@pytest.fixture
def admin_client(client_for, criteria_admin):
    return client_for(criteria_admin)


def text(response) -> str:
    """The page's words as read: tags gone, spaces collapsed, none before punctuation."""
    words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))
    return re.sub(r" ([:;,.)])", r"\1", words)


def test_the_index_lists_every_version_per_kind_with_the_active_one_and_its_current_reviews(admin_client, criteria):
    html = admin_client.get(reverse("criteria")).content.decode()
    draft_table = html[html.index('data-kind="draft"') : html.index('data-kind="conversation"')]
    rows = re.findall(r'<tr data-version="(\d+)"( class="active-version")?>.*?</tr>', draft_table, re.S)
    assert [(number, bool(active)) for number, active in rows] == [("2", False), ("1", True)]
    active_row = re.search(r'<tr data-version="1" class="active-version">(.*?)</tr>', draft_table, re.S).group(1)
    assert "<td>2</td>" in active_row  # the two graded drafts' current reviews
    assert "casey" in draft_table and "from v1" in draft_table


def test_a_published_version_cannot_be_changed_through_the_view_or_a_form_post(admin_client, criteria):
    published = criteria.active
    page = admin_client.get(reverse("criteria_version", args=[published.pk]))
    assert 'name="rubric"' not in page.content.decode() and "New version from v1" in text(page)
    before = CriteriaVersion.objects.filter(pk=published.pk).values().get()
    data = editor_data(criteria.draft_version, rubric="rewritten", banned_words="gizmo")
    response = admin_client.post(reverse("criteria_version", args=[published.pk]), data)
    assert response.status_code == 409 and "draft v1 is published and cannot change" in text(response)
    assert CriteriaVersion.objects.filter(pk=published.pk).values().get() == before


def test_a_draft_version_is_changed_through_the_editor(admin_client, criteria):
    version = criteria.draft_version
    data = editor_data(version)
    data["banned_words"] += "\nWidgetize"
    data |= {"threshold": "7.5", "rubric": "aeo: answer the heading's question first.\n"}
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 302
    version.refresh_from_db()
    rules = version.draft_rules()
    assert rules.banned_words.terms[-2:] == ["gizmo", "widgetize"] and rules.threshold == 7.5
    assert (version.rubric, version.revision) == ("aeo: answer the heading's question first.\n", 3)
    page = admin_client.get(response["Location"])
    assert "Saved draft v2 (revision 3)." in text(page)


def test_each_validation_error_is_shown_beside_its_field_and_nothing_is_saved(admin_client, criteria):
    version = criteria.draft_version
    data = editor_data(version)
    data["banned_words"] += "\nGIZMO\n!!!"
    data |= {
        "filler_phrases": "",
        "threshold": "11",
        "band": "-1",
        "internal_links_pattern": "/writing/ {slug}",
        "h2_openings": "How\nhow",
        "characters-2-sequence": "\t",
        "characters-2-name": "tab",
        "characters-2-substitute": " ",
        "components-0-template": "<Other />",
    }
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 400
    form = response.context["form"]
    assert form.errors == {
        "banned_words": [
            "'GIZMO' is listed twice (as 'gizmo' too).",
            "'!!!' has no letter or digit, so it can never be matched as a banned word (list punctuation under "
            "banned characters).",
        ],
        "filler_phrases": ["List at least one filler phrase: an empty list would switch this check off."],
        "h2_openings": ["'how' is listed twice (as 'How' too)."],
        "internal_links_pattern": [
            "The pattern does not compile into a link: it may not contain spaces, brackets, parentheses or "
            "backticks, which end a Markdown link."
        ],
        "threshold": ["must be at most 10"],
        "band": ["must be at least 0"],
    }
    assert form.characters.forms[2].errors == {
        "sequence": ["Whitespace can never be a banned character: prose reads every run of it as one space."]
    }
    assert form.components.forms[0].errors == {
        "__all__": ["the template for ArticleCallout must contain <ArticleCallout"]
    }
    html = response.content.decode()
    beside = html[html.index('name="threshold"') : html.index('name="band"')]
    assert "must be at most 10" in beside  # under its own field, before the next one
    assert "GIZMO" in html  # what the admin typed is kept
    version.refresh_from_db()
    assert version.revision == 2


def test_the_band_must_sit_below_the_threshold(admin_client, criteria):
    data = editor_data(criteria.draft_version) | {"threshold": "7", "band": "7"}
    response = admin_client.post(reverse("criteria_version", args=[criteria.draft_version.pk]), data)
    assert response.context["form"].errors == {
        "band": ["must be below the threshold and leave the band's start on the 1-10 scale: at most 6 with threshold 7"]
    }


def test_a_second_save_from_the_same_revision_is_refused_naming_who_saved_and_when(client, org, criteria):
    avery = make_person("avery", org, Role.CRITERIA_ADMIN)
    casey_client, avery_client = Client(), Client()
    casey_client.force_login(criteria.draft_version.author)
    avery_client.force_login(avery)
    url = reverse("criteria_version", args=[criteria.draft_version.pk])
    casey_form = editor_data(criteria.draft_version)  # both opened revision 2
    avery_form = editor_data(criteria.draft_version)
    casey_form["banned_words"] += "\nwidgetize"
    avery_form["banned_words"] += "\nthingamajig"
    assert avery_client.post(url, avery_form).status_code == 302
    refused = casey_client.post(url, casey_form)
    assert refused.status_code == 409
    saved = CriteriaVersion.objects.get(pk=criteria.draft_version.pk)
    assert f"avery saved draft v2 at {saved.updated_at:%Y-%m-%d %H:%M:%S} UTC while you were editing" in text(refused)
    assert "widgetize" in refused.content.decode()  # casey's typing is still in the editor
    terms = saved.draft_rules().banned_words.terms
    assert ("thingamajig" in terms, "widgetize" in terms, saved.revision) == (True, False, 3)
    # Told whose changes they are, casey may save again on top of them: the editor now carries revision 3.
    assert refused.context["form"]["revision"].value() == "3"
    assert casey_client.post(url, refused.context["form"].data).status_code == 302
    terms = CriteriaVersion.objects.get(pk=saved.pk).draft_rules().banned_words.terms
    assert ("thingamajig" in terms, "widgetize" in terms) == (False, True)


def test_a_new_version_clones_the_active_one_or_an_old_one(admin_client, criteria):
    response = admin_client.post(reverse("criteria_new"), {"org": criteria.org.pk, "kind": "conversation"})
    version = CriteriaVersion.objects.get(org=criteria.org, kind=ItemKind.CONVERSATION, number=2)
    assert response["Location"] == reverse("criteria_version", args=[version.pk])
    assert (version.rubric, version.based_on, version.published_at) == (
        criteria.conversation_active.rubric, criteria.conversation_active, None
    )  # fmt: skip
    criteria_publish(version=criteria.draft_version)
    admin_client.post(reverse("criteria_new"), {"org": criteria.org.pk, "kind": "draft", "source": criteria.active.pk})
    rollback = CriteriaVersion.objects.get(org=criteria.org, kind=ItemKind.DRAFT, number=3)
    assert (rollback.based_on, rollback.rules) == (criteria.active, criteria.active.rules)


def test_the_diff_page_shows_the_added_banned_word(admin_client, criteria):
    response = admin_client.get(reverse("criteria_diff"), {"old": criteria.active.pk, "new": criteria.draft_version.pk})
    html = response.content.decode()
    section = html[html.index('data-list="Banned words"') :]
    assert 'added: <code class="add">gizmo</code>' in section[: section.index("</div>")]
    assert "removed" not in section[: section.index("</div>")]


def test_the_preview_page_shows_the_changed_outcome_linked_to_its_draft(admin_client, criteria, fake_llm):
    response = admin_client.get(reverse("criteria_preview", args=[criteria.draft_version.pk]), {"n": 200})
    html = response.content.decode()
    assert "Read 2 drafts, 2 with a current review to compare with: 1 would change (1 route change)" in text(response)
    row = re.search(r'<tr data-draft="(\d+)">(.*?)</tr>', html, re.S)
    assert int(row.group(1)) == criteria.gizmo_draft.pk
    assert reverse("criteria_item", args=["draft", criteria.gizmo_draft.pk]) in row.group(2)
    assert "gizmo" in row.group(2) and 'class="pass">pass</span> → <span class="fail">fail' in row.group(2)
    assert fake_llm.chat_requests() == []


def test_preview_and_trial_sizes_out_of_range_are_400s_naming_the_field(admin_client, criteria):
    preview = admin_client.get(reverse("criteria_preview", args=[criteria.draft_version.pk]), {"n": 0})
    assert preview.status_code == 400 and preview.context["form"].errors == {
        "n": ["Ensure this value is greater than or equal to 1."]
    }
    trial = admin_client.get(reverse("criteria_trial", args=[criteria.draft_version.pk]), {"k": 1000})
    assert trial.status_code == 400 and trial.context["form"].errors == {
        "k": ["At most 200 items (CRITERIA_TRIAL_MAX_ITEMS): each is a paid judge call."]
    }
    diff = admin_client.get(reverse("criteria_diff"), {"old": criteria.active.pk})
    assert diff.status_code == 400 and "new" in diff.content.decode()
    across = {"old": criteria.active.pk, "new": criteria.conversation_active.pk}
    assert admin_client.get(reverse("criteria_diff"), across).status_code == 404
    rules = admin_client.get(reverse("criteria_preview", args=[criteria.conversation_active.pk]), {"n": 0})
    assert rules.status_code == 400 and rules.context["form"].errors == {
        "n": ["Ensure this value is greater than or equal to 1."]
    }


def test_a_trial_is_counted_first_then_started_and_its_page_polls_until_done(admin_client, criteria, fake_llm):
    url = reverse("criteria_trial", args=[criteria.draft_version.pk])
    count = admin_client.get(url, {"k": 2})
    assert "2 items, 2 judge calls" in text(count) and "Run the trial: 2 judge calls" in text(count)
    assert fake_llm.chat_requests() == []
    stale = admin_client.post(url, {"k": 2, "counted_calls": 1})
    assert stale.status_code == 409 and "it now takes 2 judge calls, not 1" in text(stale)
    started = admin_client.post(url, {"k": 2, "counted_calls": 2})
    trial = CriteriaTrial.objects.latest("pk")
    assert started["Location"] == reverse("criteria_trial_detail", args=[trial.pk])
    assert (sorted(trial.sample), trial.judge_calls) == (sorted([criteria.draft.pk, criteria.gizmo_draft.pk]), 2)
    page = admin_client.get(started["Location"])
    assert "Running: 0 of 2 graded" in text(page) and 'hx-trigger="every 2s"' in page.content.decode()
    partial = admin_client.get(started["Location"], HTTP_HX_REQUEST="true", HTTP_HX_TARGET="trial-results")
    assert partial.content.decode().lstrip().startswith('<div id="trial-results"')
    assert "time left not known yet" in text(page)
    # One of two graded in the 400 s since it started: about as long again.
    CriteriaTrial.objects.filter(pk=trial.pk).update(
        review_ids=[Review.objects.filter(draft=criteria.draft).latest("pk").pk, None],
        requested_at=timezone.now() - timedelta(seconds=400),
    )
    assert "Running: 1 of 2 graded" in text(admin_client.get(started["Location"]))
    assert "about 6 min left" in text(admin_client.get(started["Location"]))
    # Stopped when lost, with an item not graded: done, and still 1 of 2.
    CriteriaTrial.objects.filter(pk=trial.pk).update(finished_at=timezone.now())
    assert "Done: 1 of 2 graded" in text(admin_client.get(started["Location"]))


def test_the_publish_page_shows_the_plan_and_publishing_re_grades_now(admin_client, criteria):
    url = reverse("criteria_publish", args=[criteria.draft_version.pk])
    plan = admin_client.get(url)
    plan_text = text(plan)
    assert "in all 2" in plan_text
    assert "Re-grading 2 drafts: about 2 judge calls" in plan_text
    assert "The next pass takes all 2" in plan_text
    response = admin_client.post(url, {"plan_active": criteria.active.pk, "regrade_now": "on"})
    assert response.status_code == 302
    version = CriteriaVersion.objects.get(pk=criteria.draft_version.pk)
    assert version.is_active and version.published_at is not None
    run = GradingRun.objects.get()
    assert (run.trigger, run.enqueued, run.backlog) == ("manual", 2, 0)
    page = admin_client.get(response["Location"])
    assert "Published draft v2" in text(page) and "A grading pass enqueued 2 items; 0 wait" in text(page)
    assert 'name="rubric"' not in page.content.decode()


def test_the_publish_plan_gives_one_token_estimate_and_checks_the_spend_caps_against_it(admin_client, org, criteria):
    # The drafts' own reviews took 1,000 tokens each; this judge's ledger mean over the week is 20 a call (a
    # conversation's small stages): the re-grade of two drafts is about 2,000 tokens, not 40.
    usage = {"prompt_tokens": 900, "completion_tokens": 100, "total_tokens": 1000}
    Review.objects.filter(org=org, kind=ItemKind.DRAFT).exclude(state="trial").update(usage=usage)
    JudgeSpend.objects.filter(org=org).delete()
    JudgeSpend.objects.create(
        org=org, criteria_version=criteria.active, judge=criteria.active.judge, day=timezone.now().date(), calls=1,
        prompt_tokens=10, completion_tokens=10,
    )  # fmt: skip
    spend_cap_set(org=org, version=None, period="week", tokens=1500, cost_micros=None, actor=None)
    page = admin_client.get(reverse("criteria_publish", args=[criteria.draft_version.pk]))
    words = text(page)
    assert "about 2 judge calls and 2000 tokens" in words
    assert set(re.findall(r"(\d+) tokens", words)) == {"2000", "1000"}  # the estimate, and its basis per review
    assert "About 2000 tokens would pass the per week spend cap of org: 20 of 1500 spent" in words


def test_publishing_after_someone_else_published_is_refused_and_says_who(admin_client, org, criteria):
    avery = make_person("avery", org, Role.CRITERIA_ADMIN)
    other = CriteriaVersion.objects.create(
        org=org, kind=ItemKind.DRAFT, number=3, rubric=criteria.active.rubric, rules=criteria.active.rules
    )
    url = reverse("criteria_publish", args=[criteria.draft_version.pk])
    admin_client.get(url)  # casey reads the plan against v1
    criteria_publish(version=other, actor=avery, expected_active_id=criteria.active.pk)
    response = admin_client.post(url, {"plan_active": criteria.active.pk})
    assert response.status_code == 409 and "avery published draft v3" in text(response)
    assert not CriteriaVersion.objects.get(pk=criteria.draft_version.pk).is_active


def test_it_refuses_a_trial_while_one_of_the_version_runs_and_links_to_it(admin_client, criteria):
    url = reverse("criteria_trial", args=[criteria.draft_version.pk])
    assert admin_client.post(url, {"k": 1, "counted_calls": 1}).status_code == 302
    running = CriteriaTrial.objects.latest("pk")
    refused = admin_client.post(url, {"k": 1, "counted_calls": 1})
    assert refused.status_code == 409
    assert "A trial of draft v2 is still running" in text(refused) and "Nothing was started" in text(refused)
    assert reverse("criteria_trial_detail", args=[running.pk]) in refused.content.decode()
    assert CriteriaTrial.objects.count() == 2  # the fixture's, done, and the running one


def test_it_refuses_a_trial_beyond_the_orgs_trials_per_hour(admin_client, criteria, settings):
    settings.CRITERIA_TRIALS_PER_ORG_PER_HOUR = 1
    conversation_version = criteria_new_version(org=criteria.org, kind=ItemKind.CONVERSATION)
    refused = admin_client.post(reverse("criteria_trial", args=[conversation_version.pk]), {"k": 1, "counted_calls": 1})
    assert refused.status_code == 429
    assert "started 1 trials in the last hour, the most CRITERIA_TRIALS_PER_ORG_PER_HOUR allows (1)" in text(refused)
    assert CriteriaTrial.objects.count() == 1


def test_the_item_page_shows_every_review_with_trial_reviews_marked(admin_client, criteria, fake_llm):
    from grading.criteria.trials import trial_item_grade
    from tests.builders.drafts import draft_reply, llm_draft_judge

    fake_llm.set_default(draft_reply(6))
    review = trial_item_grade(trial_id=criteria.trial.pk, index=0, draft_judge=llm_draft_judge(fake_llm))
    response = admin_client.get(reverse("criteria_item", args=["draft", review.draft_id]))
    rows = dict(re.findall(r'<tr data-review="(\d+)">(.*?)</tr>', response.content.decode(), re.S))
    assert "<td>trial</td>" in rows[str(review.pk)] and "draft v2 · trial" in rows[str(review.pk)]
    current = text(response)[: text(response).index("Every review")]
    assert "draft v1" in current and "trial" not in current


def test_a_conversation_version_is_a_rubric_edited_on_its_own(admin_client, criteria):
    from grading.reviews.versions import criteria_new_version

    version = criteria_new_version(org=criteria.org, kind=ItemKind.CONVERSATION)
    url = reverse("criteria_version", args=[version.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="rubric"' in page and 'name="banned_words"' not in page
    empty = admin_client.post(url, {"revision": 1, "rubric": "   "})
    assert empty.status_code == 400
    assert empty.context["form"].errors == {"rubric": ["The judge needs a rubric: say what each check means."]}
    assert admin_client.post(url, {"revision": 1, "rubric": "grounded: cite the tool result.\n"}).status_code == 302
    version.refresh_from_db()
    assert (version.rubric, version.rules, version.revision) == ("grounded: cite the tool result.\n", {}, 2)


def test_a_refused_save_lists_every_error_at_the_top_with_where_it_is(admin_client, criteria):
    version = criteria.draft_version
    data = editor_data(version) | {"band": "-1", "characters-2-sequence": "\t", "characters-2-name": "tab"}
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 400
    html = response.content.decode()
    summary = html.split('id="editor-errors"', 1)[1].split("</div>", 1)[0]
    assert html.index('id="editor-errors"') < html.index("Judge rubric")  # above the fold, before the first field
    assert "Not saved: 2 things to fix" in summary and "must be at least 0" in summary
    assert "banned characters, row 3, sequence: Whitespace can never be a banned character" in summary


def test_the_preview_says_what_people_decided_beside_a_route_to_people(admin_client, criteria, criteria_admin):
    review = Review.objects.counting().get(draft=criteria.gizmo_draft)
    Review.objects.filter(pk=review.pk).update(route="human")
    Decision.objects.create(
        org=review.org, review=review, outcome="approve", decided_by=criteria_admin, decided_at=timezone.now()
    )
    response = admin_client.get(reverse("criteria_preview", args=[criteria.draft_version.pk]), {"n": 200})
    row = re.search(rf'<tr data-draft="{criteria.gizmo_draft.pk}">(.*?)</tr>', response.content.decode(), re.S)
    assert 'class="human">human</span> <span class="sub people-said">(people: approve)</span> →' in row.group(1)


def test_the_publish_plan_says_how_many_peoples_decisions_stop_counting(admin_client, org, operator):
    decided, _ = conversation_item(org, "cv-decided"), conversation_item(org, "cv-waiting")
    claim_take(user=operator, review_id=decided.pk)
    checks = {"grounded": "pass", "complete": "pass", "usable": "pass"}
    decision_create(
        user=operator,
        review_id=decided.pk,
        fingerprint=decided.fingerprint,
        verdict=PersonVerdict(checks=checks, note="ok"),
    )
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    response = admin_client.get(reverse("criteria_publish", args=[version.pk]))
    assert response.context["plan"].decided == 1
    assert "1 of these reviews carry a person's decision: it stops counting" in text(response)


def test_it_shows_the_forms_and_the_services_errors_in_one_round_each_at_its_field(admin_client, criteria):
    version = criteria.draft_version
    # "many" is no number (the form's own check); 11 is a number the rules document refuses (the service's).
    data = editor_data(version) | {"h2_min_count": "many", "threshold": "11", "filler_phrases": ""}
    response = admin_client.post(reverse("criteria_version", args=[version.pk]), data)
    assert response.status_code == 400
    form = response.context["form"]
    assert form.errors == {
        "h2_min_count": ["Enter a whole number."],
        "threshold": ["must be at most 10"],
        "filler_phrases": ["List at least one filler phrase: an empty list would switch this check off."],
    }
    html = response.content.decode()
    summary = html.split('id="editor-errors"', 1)[1].split("</div>", 1)[0]
    assert "Not saved: 3 things to fix" in summary
    assert "h2 min count: Enter a whole number." in summary and "threshold: must be at most 10" in summary
    beside = html[html.index('name="threshold"') : html.index('name="band"')]
    assert "must be at most 10" in beside
    version.refresh_from_db()
    assert version.revision == 2


def test_a_field_the_form_refused_gets_no_second_error_from_the_service(admin_client, criteria):
    data = editor_data(criteria.draft_version) | {"threshold": "high", "band": "0.5"}
    response = admin_client.post(reverse("criteria_version", args=[criteria.draft_version.pk]), data)
    assert response.context["form"].errors == {"threshold": ["Enter a number."]}
