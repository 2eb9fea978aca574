"""The queue page and the item pages: who may see them, what they list, filters, paging, partials and SQL counts."""

import re
from collections import Counter
from dataclasses import replace

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from grading.core.outcomes import HUMAN_REASONS
from grading.models import Decision, ItemKind, Review, ReviewState
from grading.reviews.services import PersonVerdict
from grading.reviews.versions import criteria_active
from reviewer.models import Claim, Membership
from reviewer.queue.display import queue_page
from reviewer.queue.reads import QueueFilters, operator_reaches
from reviewer.queue.services import claim_take, decision_create
from tests.builders.conversations import message
from tests.builders.people import make_person
from tests.builders.queue_items import (
    DRAFT_BODY,
    JUDGE,
    bulk_draft_items,
    continue_conversation,
    conversation_item,
    draft_item,
    resubmit,
)
from tests.builders.releases import build_releases

HTMX_LIST = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "queue-list"}


def item_urls(review: Review) -> dict[str, tuple[str, str]]:
    return {
        "open": ("get", reverse("review_detail", args=[review.pk])),
        "claim": ("post", reverse("review_claim", args=[review.pk])),
        "release": ("post", reverse("review_release", args=[review.pk])),
        "heartbeat": ("post", reverse("review_heartbeat", args=[review.pk])),
        "decide": ("post", reverse("review_decide", args=[review.pk])),
    }


# --- who may see it -------------------------------------------------------------------------------------------


def test_anonymous_is_sent_to_sign_in_from_every_queue_url(client, org):
    review = draft_item(org)
    urls = [("get", reverse("queue")), ("post", reverse("queue_claim_next")), *item_urls(review).values()]
    for method, url in urls:
        response = getattr(client, method)(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login")), url


@pytest.mark.parametrize("persona", ["criteria_admin", "stakeholder", "roleless"])
def test_people_without_the_operator_role_are_forbidden_everywhere(request, client_for, org, persona):
    review = draft_item(org)
    client = client_for(request.getfixturevalue(persona))
    urls = [("get", reverse("queue")), ("post", reverse("queue_claim_next")), *item_urls(review).values()]
    for method, url in urls:
        assert getattr(client, method)(url).status_code == 403, url
    assert not Claim.objects.exists()


def test_it_lists_items_of_both_kinds_with_counts_per_reason(client_for, operator, org):
    draft_item(org, "a-draft", reason="band")
    draft_item(org, "another-draft", reason="judge_contradiction", score=7.4)
    conversation_item(org, "cv-77")
    html = client_for(operator).get(reverse("queue")).content.decode()
    assert "a-draft" in html and "another-draft" in html and "cv-77" in html
    assert "score in the marginal band 1" in html
    assert "a check came back unknown 1" in html
    assert "judge contradicts itself 1" in html
    assert "spread straddles the threshold 0" in html
    assert "<b>3</b> waiting" in html


def test_it_lists_drafts_first_then_oldest_first(operator, org):
    old_conversation = conversation_item(org, "cv-old", minutes_ago=500)
    new_draft = draft_item(org, "new-draft", minutes_ago=5)
    old_draft = draft_item(org, "old-draft", minutes_ago=50)
    page = queue_page(user=operator)
    assert [row.review_id for row in page.rows] == [old_draft.pk, new_draft.pk, old_conversation.pk]


def test_decided_and_stale_reviews_are_not_listed(operator, org):

    decided, stale = draft_item(org, "decided"), draft_item(org, "stale")
    waiting = draft_item(org, "waiting")
    claim_take(user=operator, review_id=decided.pk)
    decision_create(
        user=operator, review_id=decided.pk, fingerprint=decided.fingerprint, verdict=PersonVerdict(outcome="approve")
    )
    resubmit(stale)
    page = queue_page(user=operator)
    assert [row.review_id for row in page.rows] == [waiting.pk]
    assert page.total == 1


def test_it_filters_by_kind_application_reason_and_criteria(client_for, operator, org):
    draft = draft_item(org, "only-draft", reason="spread")
    billing = conversation_item(org, "cv-billing", application="billing")
    onboarding = conversation_item(org, "cv-onboarding", application="onboarding")
    client = client_for(operator)

    def listed(**query) -> set[int]:
        response = client.get(reverse("queue"), query)
        return {row.review_id for row in response.context["page"].rows}

    assert listed() == {draft.pk, billing.pk, onboarding.pk}
    assert listed(kind="draft") == {draft.pk}
    assert listed(kind="conversation") == {billing.pk, onboarding.pk}
    assert listed(application="onboarding") == {onboarding.pk}
    assert listed(reason="spread") == {draft.pk}
    assert listed(reason="unknown_check") == {billing.pk, onboarding.pk}
    assert listed(criteria=criteria_active(org=org, kind=ItemKind.DRAFT).pk) == {draft.pk}
    assert listed(kind="nonsense", reason="nonsense") == {draft.pk, billing.pk, onboarding.pk}
    html = client.get(reverse("queue")).content.decode()
    assert '<option value="billing">billing</option>' in html and '<option value="onboarding">' in html


def test_it_pages_by_keyset_without_losing_or_repeating_items(operator, org):
    reviews = bulk_draft_items(org, 7)
    expected = [r.pk for r in sorted(reviews, key=lambda r: (r.finished_at, r.pk))]
    seen, after = [], None
    while True:
        page = queue_page(user=operator, after=after, page_size=3)
        seen += [row.review_id for row in page.rows]
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert seen == expected
    back = queue_page(user=operator, before=expected[3], page_size=3)
    assert [row.review_id for row in back.rows] == expected[:3]
    assert back.previous_cursor is None


def test_a_cursor_naming_an_item_out_of_reach_pages_nothing_past_it(operator, org, other_org):
    """A cursor is a review id in a link anyone can edit: one naming another org's item, or an application the
    person's membership does not cover, is ignored (the first page), so its place in the queue is not told."""
    conversation_item(org, "cv-billing", application="billing", minutes_ago=30)
    onboarding = conversation_item(org, "cv-onboarding", application="onboarding", minutes_ago=20)
    conversation_item(org, "cv-billing-2", application="billing", minutes_ago=10)
    theirs = conversation_item(other_org, "globex-cv", application="billing", minutes_ago=25)
    scoped = make_person("scoped-operator")
    Membership.objects.create(user=scoped, org=org, role="operator", applications=["billing"], drafts=False)
    first = queue_page(user=scoped, page_size=1)

    for cursor in (theirs.pk, onboarding.pk):
        page = queue_page(user=scoped, after=cursor, page_size=1)

        assert [row.review_id for row in page.rows] == [row.review_id for row in first.rows]
        assert page.previous_cursor is None
    assert [row.review_id for row in queue_page(user=operator, after=onboarding.pk).rows] == [
        row.review_id for row in queue_page(user=operator).rows[2:]
    ]


def test_the_next_page_link_keeps_the_filters(client_for, operator, org, monkeypatch):
    monkeypatch.setattr("reviewer.queue.reads.PAGE_SIZE", 2)
    monkeypatch.setattr(queue_page, "__kwdefaults__", {**queue_page.__kwdefaults__, "page_size": 2})
    reviews = bulk_draft_items(org, 3)
    response = client_for(operator).get(reverse("queue"), {"kind": "draft"})
    oldest_two = sorted(reviews, key=lambda r: r.finished_at)[:2]
    assert response.context["next_url"] == f"{reverse('queue')}?kind=draft&after={oldest_two[-1].pk}"


def test_htmx_asks_for_the_list_alone(client_for, operator, org):
    draft_item(org, "listed-draft")
    response = client_for(operator).get(reverse("queue"), **HTMX_LIST)
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="queue-list"')
    assert "listed-draft" in html and "<html" not in html


def test_the_page_and_the_htmx_list_show_the_rows_the_queue_reads_in_its_order(client_for, operator, org):
    conversation_item(org, "cv-old", application="support", minutes_ago=500)
    conversation_item(org, "cv-new", application="billing", minutes_ago=5)
    draft_item(org, "new-draft", minutes_ago=5)
    held = draft_item(org, "old-draft", minutes_ago=50)
    claim_take(user=make_person("sam-op", org, "operator"), review_id=held.pk)
    expected = [(row.review_id, row.title, row.held_by) for row in queue_page(user=operator).rows]
    assert [title for _, title, _ in expected] == ["old-draft", "new-draft", "cv-old", "cv-new"]
    client = client_for(operator)
    for html in (
        client.get(reverse("queue")).content.decode(),
        client.get(reverse("queue"), **HTMX_LIST).content.decode(),
    ):
        shown = re.findall(
            r'<tr data-row="(\d+)".*?<bdi class="untrusted">(.*?)</bdi>.*?data-label="held by">([^<]*)', html, re.S
        )
        assert [(int(pk), title, held_by) for pk, title, held_by in shown] == expected


def test_a_queue_page_reads_the_persons_memberships_once(client_for, operator, org):
    draft_item(org, "a-draft")
    client = client_for(operator)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse("queue")).status_code == 200
    assert sum('FROM "reviewer_membership"' in query["sql"] for query in queries.captured_queries) == 1


def test_the_queue_shows_who_holds_what(client_for, operator, org):
    review = draft_item(org, "held-draft")
    colleague = make_person("sam-op", org, "operator")
    claim_take(user=colleague, review_id=review.pk)
    response = client_for(operator).get(reverse("queue"))
    assert response.context["page"].held_by_others == 1
    assert "sam-op" in response.content.decode()


# --- org isolation --------------------------------------------------------------------------------------------


def test_an_operator_of_another_org_cannot_list_open_claim_or_decide(client_for, org, other_org_operator):
    review = draft_item(org, "northwind-secret")
    client = client_for(other_org_operator)
    assert "northwind-secret" not in client.get(reverse("queue")).content.decode()
    assert "northwind-secret" not in client.get(reverse("queue"), **HTMX_LIST).content.decode()
    assert "northwind-secret" not in client.get(reverse("queue"), {"after": review.pk}).content.decode()
    assert "northwind-secret" not in client.get(reverse("queue"), {"before": review.pk}).content.decode()
    for name, (method, url) in item_urls(review).items():
        data = {"outcome": "approve", "fingerprint": review.fingerprint, "note": "x"}
        assert getattr(client, method)(url, data if method == "post" else None).status_code == 404, name
        htmx = getattr(client, method)(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="actions")
        assert htmx.status_code == 404, name
    client.post(reverse("queue_claim_next"))
    assert not Claim.objects.exists()
    assert not Decision.objects.exists()


def test_an_operator_of_two_orgs_sees_both_and_the_other_org_still_sees_only_its_own(client_for, org, other_org):
    mine, theirs = draft_item(org, "in-northwind"), draft_item(other_org, "in-globex")
    both = make_person("pat", org, "operator")
    Membership.objects.create(user=both, org=other_org, role="operator")
    assert {reach.org_id for reach in operator_reaches(both)} == {org.pk, other_org.pk}
    page = queue_page(user=both)
    assert {row.review_id for row in page.rows} == {mine.pk, theirs.pk}
    only_globex = make_person("gil", other_org, "operator")
    assert [r.review_id for r in queue_page(user=only_globex).rows] == [theirs.pk]


# --- item pages -----------------------------------------------------------------------------------------------


def test_the_draft_page_shows_scores_issues_memory_identity_and_the_article(client_for, operator, org):
    review = draft_item(
        org,
        findings=[
            {
                "code": "banned_word",
                "message": "banned word: delve",
                "severity": "fatal",
                "spans": [[DRAFT_DELVE, DRAFT_DELVE + 5]],
                "subject": "delve",
            }
        ],  # fmt: skip
        repairs={"diff": "--- a\n+++ b\n-Support teams — drown\n+Support teams, drown", "body": None, "applied": []},
    )
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "Score 6.7 against threshold 7.0" in html
    assert "AEO compliance" in html and "Writing quality" in html and "Org fit" in html  # the version's check names
    assert "The opening warms up for a paragraph" in html and "Answer in the first two sentences." in html
    assert '<mark class="fatal" title="banned word: delve">delve</mark>' in html
    assert '<mark class="proof" title="proof point: Acme Logistics">Acme Logistics</mark>' in html
    assert '<span class="comp">&lt;ArticleCallout&gt;</span>' in html
    assert '<span class="del">-Support teams — drown</span>' in html
    assert "Lead with the answer." in html and "Write for support leads." in html
    assert review.fingerprint in html and "mem1:c83d" in html and "openai · judge-test · prompt 5be0c2d1" in html
    assert "Claim this" in html


DRAFT_DELVE = DRAFT_BODY.index("delve")


def test_the_conversation_page_shows_checks_quotes_the_path_and_folded_branches(client_for, operator, org):
    review = conversation_item(org, extra=[message("m9", "user", "hidden note", "m4", 8, hidden=True)])
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "Why a person is needed" in html
    assert 'Complete · <span class="unknown">unknown</span> · quoted evidence' in html  # the check's name
    assert "Please refund order 1182, it arrived broken." in html
    assert 'tool_call <bdi class="untrusted">refund</bdi> · <bdi class="untrusted">call_1</bdi>' in html
    assert "&quot;order&quot;: 1182" in html
    assert "&quot;status&quot;: &quot;refunded&quot;" in html
    assert "1 abandoned branch after m3 (1 message). Not evidence." in html
    assert "I could not do that." in html  # folded, not gone
    assert "4 messages on the active path" in html
    assert "1 (the whole path in one call)" in html and "3,912 in · 286 out" in html


def test_an_item_that_changed_since_says_why_and_offers_no_decision(client_for, operator, org):
    review = draft_item(org)

    resubmit(review)
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "This item left the queue" in html and "resubmitted the draft" in html
    assert "Claim this" not in html and "Approve" not in html


# --- SQL counts -----------------------------------------------------------------------------------------------


def count_queries(client, url: str, **extra) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url, **extra).status_code == 200
    return len(queries)


def test_the_queue_page_runs_the_same_queries_for_one_item_or_many(client_for, operator, org):
    client = client_for(operator)
    draft_item(org, "first")
    conversation_item(org, "cv-first")
    one = count_queries(client, reverse("queue"))
    one_partial = count_queries(client, reverse("queue"), **HTMX_LIST)
    bulk_draft_items(org, 60)
    for n in range(5):
        conversation_item(org, f"cv-{n}", application=f"app-{n}")
    colleague = make_person("sam-op", org, "operator")
    for review in Review.objects.filter(kind="draft")[:5]:
        claim_take(user=colleague, review_id=review.pk)
    assert count_queries(client, reverse("queue")) == one
    assert count_queries(client, reverse("queue"), **HTMX_LIST) == one_partial


def test_each_item_page_runs_the_same_queries_for_few_or_many_messages(client_for, operator, org):
    client = client_for(operator)
    small = conversation_item(org, "cv-small")
    many = [message(f"x{n}", "user" if n % 2 else "assistant", f"more {n}", f"x{n - 1}" if n else "m4", 10 + n)
            for n in range(80)]  # fmt: skip
    large = conversation_item(org, "cv-large", extra=many)
    claim_take(user=operator, review_id=large.pk)
    assert count_queries(client, reverse("review_detail", args=[small.pk])) == count_queries(
        client, reverse("review_detail", args=[large.pk])
    )
    plain = draft_item(org, "plain", judge_issues=[])
    rich = draft_item(
        org, "rich", judge_issues=[{"issue": f"issue {n}", "fix": f"fix {n}"} for n in range(10)],
        findings=[{"code": "banned_word", "message": "w", "severity": "fatal", "spans": [[0, 2]]}] * 10,
    )  # fmt: skip
    Review.objects.bulk_create(
        [Review(**{f.attname: getattr(rich, f.attname) for f in Review._meta.concrete_fields if f.attname != "id"}
                | {"state": "superseded", "judge_key": f"old-{n}"}) for n in range(15)]
    )  # fmt: skip
    assert count_queries(client, reverse("review_detail", args=[plain.pk])) == count_queries(
        client, reverse("review_detail", args=[rich.pk])
    )


def test_claim_next_takes_the_filters_of_the_queue(client_for, operator, org):
    conversation_item(org, "cv-x")
    draft = draft_item(org, "d-x", minutes_ago=1)
    client = client_for(operator)
    response = client.post(reverse("queue_claim_next"), {"kind": "draft"})
    assert response["Location"] == reverse("review_detail", args=[draft.pk])
    assert QueueFilters(kind="draft").as_query() == {"kind": "draft"}


def test_the_paged_queue_read_lists_exactly_the_queue_as_grading_defines_it(operator, org, other_org, criteria_admin):
    """Pages and counts read one index range per lane (an active criteria version, or one application of it); the
    reference states the queue as one set from grading's state, filtered plainly. Over every kind of item that must
    or must not be listed, every filter, and reaches of the whole org or some applications, they agree."""
    from grading.reviews.services import ReviewOutcome, ScoreIdentity, review_record
    from grading.reviews.versions import criteria_new_version, criteria_publish
    from reviewer.queue.reads import queue_lanes, queue_stats, queue_versions

    for n, reason in enumerate(["band", "spread", "judge_contradiction", "band"]):
        draft_item(org, f"d-{n}", reason=reason, minutes_ago=100 + n)
    conversation_item(org, "cv-a", application="billing")
    conversation_item(org, "cv-b", application="onboarding")
    resubmit(draft_item(org, "d-changed"))
    continue_conversation(conversation_item(org, "cv-changed"))
    passed = draft_item(org, "d-passed").draft
    criteria = criteria_active(org=org, kind=ItemKind.DRAFT)
    identity = ScoreIdentity(
        fingerprint=passed.fingerprint, criteria_version=criteria, judge=JUDGE, judge_key="regraded"
    )
    review_record(subject=passed, identity=identity, outcome=ReviewOutcome(route="pass"), started_at=passed.created_at)
    decided = draft_item(org, "d-decided", minutes_ago=200)
    claim_take(user=operator, review_id=decided.pk)
    decision_create(
        user=operator, review_id=decided.pk, fingerprint=decided.fingerprint, verdict=PersonVerdict(outcome="approve")
    )
    draft_item(other_org, "globex-draft")
    conversation_item(other_org, "globex-cv")
    criteria_publish(version=criteria_new_version(org=other_org, kind=ItemKind.CONVERSATION), actor=criteria_admin)
    Membership.objects.create(user=operator, org=other_org, role="operator")
    orgs = [org.pk, other_org.pk]
    cases = [
        QueueFilters(),
        QueueFilters(kind="draft"),
        QueueFilters(kind="conversation"),
        QueueFilters(application="onboarding"),
        QueueFilters(reason="band"),
        QueueFilters(reason="unknown_check"),
        QueueFilters(criteria_version=criteria_active(org=org, kind=ItemKind.DRAFT).pk),
    ]
    reaches = [
        {},  # the whole of both orgs
        {"applications": ["billing"], "drafts": False},
        {"applications": ["billing", "onboarding"], "drafts": True},
        {"applications": [], "drafts": True},
    ]
    for reach in reaches:
        Membership.objects.filter(user=operator, org=org).update(**{"applications": None, "drafts": True} | reach)
        for filters in cases:
            reference = reference_queue(orgs, filters, **reach)
            page = queue_page(user=operator, filters=filters, page_size=100)
            assert {row.review_id for row in page.rows} == set(reference.values_list("pk", flat=True)), (reach, filters)
            lanes = queue_lanes(queue_versions(operator_reaches(operator)), operator_reaches(operator), filters)
            # The counts per reason are those of every reason, whatever the reason filter.
            every_reason = reference_queue(orgs, replace(filters, reason=""), **reach)
            reasons = Counter(every_reason.values_list("reason", flat=True))
            assert queue_stats(lanes=lanes).counts == {"": 0} | {r: reasons[r] for r in HUMAN_REASONS}, (reach, filters)
    assert reference_queue(orgs, QueueFilters()).count() == 7


def reference_queue(org_ids, filters: QueueFilters, applications=None, drafts=True):
    """The queue of someone whose membership in the first org covers `applications` (all when None) and drafts."""
    reviews = Review.objects.waiting().filter(org_id__in=org_ids)
    if applications is not None:
        outside = Q(org_id=org_ids[0]) & ~Q(conversation__application__in=applications)
        reviews = reviews.exclude(outside & Q(kind="conversation"))
        if not drafts:
            reviews = reviews.exclude(org_id=org_ids[0], kind="draft")
    if filters.kind:
        reviews = reviews.filter(kind=filters.kind)
    if filters.application:
        reviews = reviews.filter(conversation__application=filters.application)
    if filters.reason:
        reviews = reviews.filter(reason=filters.reason)
    if filters.criteria_version:
        reviews = reviews.filter(criteria_version_id=filters.criteria_version)
    return reviews


def test_findings_are_marked_in_the_rendered_article_without_breaking_its_markup():
    from html.parser import HTMLParser

    from reviewer.queue.rendering import Highlight, render_markdown

    body = "Read [the guide](/writing/guide) now.\U000f0001 **Bold <b>tag</b>** and `code`."
    start, end = body.index("the guide"), body.index("now") + 3  # a finding that crosses the link's end
    html = str(render_markdown(body, [Highlight(start, end, "fatal", 'a "quoted" message')]))
    assert '<a href="/writing/guide" rel="noopener noreferrer nofollow"><mark class="fatal"' in html
    assert 'title="a &quot;quoted&quot; message">the guide</mark></a><mark class="fatal"' in html
    assert "&lt;b&gt;tag&lt;/b&gt;" in html and "\U000f0001" not in html and "\ufffd" in html

    class Balance(HTMLParser):
        open: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.open.append(tag)

        def handle_endtag(self, tag):
            assert self.open.pop() == tag

    checker = Balance()
    checker.feed(html)
    assert checker.open == []


def test_the_operator_reads_a_message_in_the_words_the_judge_read(client_for, operator, org):
    """One rendering of content (grading.core.evidence_text.content_text) for the judge prompt and the item page."""
    from grading.core.evidence_text import render_message
    from grading.models import Message

    parts = [{"type": "text", "text": "Let me check."}, {"type": "refusal", "refusal": "I can't share that card."}]
    review = conversation_item(org, extra=[message("m5", "assistant", parts, "m4", 9)], active_message_id="m5")
    judged = render_message(Message.objects.get(conversation=review.conversation, external_id="m5").as_evidence())
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "[refusal] I can&#x27;t share that card." in html
    assert "[refusal] I can't share that card." in judged


def test_it_filters_by_a_dimension_value_and_claims_next_within_it(client_for, operator, org, fake_llm):
    releases = build_releases(org, fake_llm)
    waiting = [r for r in releases.reviews if r.state == ReviewState.WAITING]
    by_release = {value: {r.pk for r in waiting if r.slice["release"] == value} for value in ("2.3", "2.4")}
    assert by_release["2.3"] and by_release["2.4"]  # the plan leaves items of both for people
    client = client_for(operator)

    def listed(**query) -> set[int]:
        return {row.review_id for row in client.get(reverse("queue"), query).context["page"].rows}

    assert listed(slice="release=2.4") == by_release["2.4"]
    assert listed(slice="release=2.3", kind="conversation") == by_release["2.3"]
    assert listed(slice="release") == listed()  # a stale or hand-typed value that is no slice: no filter
    html = client.get(reverse("queue")).content.decode()
    assert '<option value="release=2.3">' in html and '<option value="environment=prod">' in html

    claimed = client.post(reverse("queue_claim_next"), {"slice": "release=2.4"})
    assert int(claimed.url.rstrip("/").rsplit("/", 1)[-1]) in by_release["2.4"]
