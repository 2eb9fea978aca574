"""Escalation: an item is noticed due soon and overdue exactly at its thresholds, once per threshold; each sweep
sends one digest mail per person concerned (to a real SMTP server on loopback), naming only the items within their
reach when it is sent, and one signed webhook per org; a slow or failing SMTP server or receiver delays neither the
sweep nor anything else."""

import hashlib
import hmac
import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from grading.models import Review, ServiceTarget
from grading.reviews.targets import due_times_refresh
from reviewer import tasks
from reviewer.models import AssignmentRule, Escalation, Membership, Notice, Pool, Role
from reviewer.orgadmin.members import membership_revoke, membership_scope
from reviewer.queue.escalation import escalation_sweep, escalations_sweep
from tests.builders.people import make_person
from tests.builders.queue_items import bulk_draft_items, conversation_item, draft_item
from tests.fakes.smtp_server import SilentSmtpServer
from tests.fakes.webhook_receivers import Receiver

pytestmark = pytest.mark.django_db


def due_in_an_hour(org) -> None:
    ServiceTarget.objects.create(org=org, position=1, kind="draft", minutes=60)
    due_times_refresh(org.pk)


def escalation(org, *, at, **fields) -> Escalation:
    return Escalation.objects.create(org=org, swept_until=at, **fields)


def test_an_item_is_noticed_due_soon_and_overdue_exactly_at_its_thresholds_and_once_each(org):
    review = draft_item(org, "timed", minutes_ago=0)
    due_in_an_hour(org)
    review.refresh_from_db()
    due = review.due_at
    escalation(org, at=due - timedelta(hours=1), warn_minutes=10)
    swept = Escalation.objects.get(org=org)

    def sweep(at):
        return escalation_sweep(Escalation.objects.get(org=org), at).notices

    assert sweep(due - timedelta(minutes=10, microseconds=1)) == {"overdue": [], "due_soon": []}
    assert sweep(due - timedelta(minutes=10)) == {"overdue": [], "due_soon": [review.pk]}
    assert sweep(due - timedelta(microseconds=1)) == {"overdue": [], "due_soon": []}
    assert sweep(due) == {"overdue": [review.pk], "due_soon": []}
    assert sweep(due + timedelta(minutes=5)) == {"overdue": [], "due_soon": []}
    # a sweep that runs again over a window already swept (a retry, a second beat) finds nothing new either
    Escalation.objects.filter(pk=swept.pk).update(swept_until=due - timedelta(hours=1))
    assert sweep(due + timedelta(minutes=6)) == {"overdue": [], "due_soon": []}
    assert sorted(Notice.objects.values_list("threshold", flat=True)) == ["due_soon", "overdue"]


def test_the_sweep_costs_what_the_newly_due_items_cost_not_those_overdue_before(org):
    items = bulk_draft_items(org, 600)
    due_in_an_hour(org)
    latest = max(Review.objects.filter(pk__in=[r.pk for r in items]).values_list("due_at", flat=True))
    escalation(org, at=latest - timedelta(days=1))
    escalation_sweep(Escalation.objects.get(org=org), latest)  # every one of them goes overdue at once
    assert Notice.objects.count() == 600
    queries = []
    for _ in range(2):
        with CaptureQueriesContext(connection) as captured:
            escalation_sweep(Escalation.objects.get(org=org), timezone.now() + timedelta(days=2))
        queries.append(len(captured))
    assert queries[0] == queries[1] and Notice.objects.count() == 600


def test_a_burst_of_a_thousand_overdue_items_sends_one_digest_per_person(
    org, smtp, django_capture_on_commit_callbacks, monkeypatch
):
    team = [make_person(name, org, Role.OPERATOR) for name in ("ann", "bob")]
    lead = make_person("lee", org, Role.LEAD)
    for person in (*team, lead):
        person.email = f"{person.username}@example.com"
        person.save()
    pool = Pool.objects.create(org=org, name="billing")
    pool.members.add(*team)
    AssignmentRule.objects.create(org=org, position=1, kind="draft", pool=pool)
    bulk_draft_items(org, 1000)
    due_in_an_hour(org)
    latest = max(Review.objects.values_list("due_at", flat=True))
    escalation(org, at=latest - timedelta(days=1))
    monkeypatch.setattr(tasks.escalation_mail, "delay", lambda *args: tasks.escalation_mail.apply(args=args).get())

    with django_capture_on_commit_callbacks(execute=True):
        escalations_sweep(tasks.deliver, now=latest)

    assert sorted(message["To"] for message in smtp.messages) == ["ann@example.com", "bob@example.com",
                                                                  "lee@example.com"]  # fmt: skip
    body = smtp.messages[0].get_payload()
    assert "1000 items overdue" in smtp.messages[0]["Subject"]
    assert body.count("\n- draft ") == 50 and "and 950 more" in body
    with django_capture_on_commit_callbacks(execute=True):
        escalations_sweep(tasks.deliver, now=latest + timedelta(minutes=1))
    assert len(smtp.messages) == 3  # nothing new: no second mail


def test_the_webhook_is_signed_with_the_orgs_secret_and_lists_the_items(org, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    receiver = Receiver([200])
    try:
        review = draft_item(org, "hooked", minutes_ago=0)
        due_in_an_hour(org)
        review.refresh_from_db()
        escalation(org, at=review.due_at - timedelta(minutes=1), webhook_url=receiver.url)
        [swept] = [escalation_sweep(Escalation.objects.get(org=org), review.due_at)]
        assert tasks.escalation_webhook.apply(args=(org.pk, swept.notices)).get() is True
        headers, body = receiver.received[0]
        expected = hmac.new(org.webhook_secret.encode(), headers["x-tollgate-timestamp"].encode() + b"." + body,
                            hashlib.sha256).hexdigest()  # fmt: skip
        assert headers["x-tollgate-signature"] == f"sha256={expected}"
        sent = json.loads(body)
        assert sent["event"] == "queue_escalation" and [i["item"] for i in sent["items"]] == [review.draft.external_id]
    finally:
        receiver.close()


def test_a_silent_smtp_server_is_never_met_by_the_sweep_and_a_mail_try_gives_up_at_its_timeout(org, settings):
    server = SilentSmtpServer()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", server.port, 0.5
    settings.WEBHOOK_MAX_ATTEMPTS = 1
    try:
        lead = make_person("lee", org, Role.LEAD)
        lead.email = "lee@example.com"
        lead.save()
        review = draft_item(org, "late", minutes_ago=0)
        due_in_an_hour(org)
        review.refresh_from_db()
        escalation(org, at=review.due_at - timedelta(minutes=1))
        swept = escalation_sweep(Escalation.objects.get(org=org), review.due_at)
        assert swept.digests == {lead.pk: {"overdue": [review.pk]}}
        assert server.connections() == 0  # the sweep only records and hands on: it never talks to SMTP
        # The try gives up at EMAIL_TIMEOUT (a silent server would otherwise hold the worker forever) and says so.
        assert tasks.escalation_mail.apply(args=(org.pk, lead.pk, swept.digests[lead.pk])).get() is False
        assert server.connections() == 1 and Notice.objects.filter(review=review).count() == 1
    finally:
        server.close()


def pool_of_three_with_two_items_overdue(org) -> dict:
    """A pool every item is assigned to: ann covers only the billing conversations, bob and cal the whole org; a
    draft and a billing conversation went overdue a minute ago. The escalation swept up to two hours ago."""
    ann = make_person("ann", org)
    Membership.objects.create(user=ann, org=org, role=Role.OPERATOR, applications=["billing"], drafts=False)
    bob, cal = (make_person(name, org, Role.OPERATOR) for name in ("bob", "cal"))
    for person in (ann, bob, cal):
        person.email = f"{person.username}@example.com"
        person.save()
    pool = Pool.objects.create(org=org, name="billing team")
    pool.members.add(ann, bob, cal)
    AssignmentRule.objects.create(org=org, position=1, pool=pool)
    draft_item(org, "late-draft", minutes_ago=61)
    conversation_item(org, "late-cv", application="billing", minutes_ago=61)
    ServiceTarget.objects.create(org=org, position=1, minutes=60)
    due_times_refresh(org.pk)
    escalation(org, at=timezone.now() - timedelta(hours=2), to_leads=False)
    return {"ann": ann, "bob": bob, "cal": cal}


def items_mailed(smtp) -> dict[str, list[str]]:
    """Per address, the items its mail names."""
    return {
        message["To"]: sorted(re.findall(r"^- \w+ (\S+):", message.get_payload(), re.MULTILINE))
        for message in smtp.messages
    }


def test_a_pool_member_is_mailed_only_the_items_within_their_reach_and_not_after_leaving_the_org(
    org, smtp, django_capture_on_commit_callbacks, monkeypatch
):
    people = pool_of_three_with_two_items_overdue(org)
    membership_revoke(membership=Membership.objects.get(user=people["cal"]))
    monkeypatch.setattr(tasks.escalation_mail, "delay", lambda *args: tasks.escalation_mail.apply(args=args).get())

    with django_capture_on_commit_callbacks(execute=True):
        [swept] = escalations_sweep(tasks.deliver)

    assert {person: len(items["overdue"]) for person, items in swept.digests.items()} == {
        people["ann"].pk: 1,
        people["bob"].pk: 2,
    }
    assert items_mailed(smtp) == {"ann@example.com": ["late-cv"], "bob@example.com": ["late-cv", "late-draft"]}


def test_a_mail_sent_after_its_sweep_names_only_what_the_person_still_reaches_then(org, smtp):
    people = pool_of_three_with_two_items_overdue(org)
    [swept] = escalations_sweep(lambda swept, url: None)
    assert set(swept.digests) == {people["ann"].pk, people["bob"].pk, people["cal"].pk}
    # Before the mails go out (they wait on the webhooks queue, and a failed one is tried again for hours), bob's
    # reach narrows to the billing conversations and cal leaves the org.
    membership_scope(membership=Membership.objects.get(user=people["bob"]), applications=["billing"], drafts=False)
    membership_revoke(membership=Membership.objects.get(user=people["cal"]))

    sent = {name: tasks.escalation_mail.apply(args=(org.pk, people[name].pk, swept.digests[people[name].pk])).get()
            for name in ("ann", "bob", "cal")}  # fmt: skip

    assert sent == {"ann": True, "bob": True, "cal": False}
    assert items_mailed(smtp) == {"ann@example.com": ["late-cv"], "bob@example.com": ["late-cv"]}
