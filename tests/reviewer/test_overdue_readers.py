"""Every reader of "overdue" for people reads grading's one rule (`Review.objects.overdue`): the escalation sweep and
the mails it hands on, the dashboard's "overdue now" figure (the page and the API), its list and export, and the
overdue items each person holds. Publishing a criteria version makes the items waiting under the old one stale: they
leave the queue to be graded again, and every one of those readers at once."""

import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.models import ItemKind, ServiceTarget
from grading.reviews.targets import due_times_refresh
from grading.reviews.versions import criteria_new_version, criteria_publish
from reviewer import tasks
from reviewer.models import Escalation, Notice, Role
from reviewer.queue.escalation import escalation_sweep, escalations_sweep
from reviewer.queue.services import claim_take
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


def overdue_readers(org, client: Client, api: Client) -> dict:
    """What each reader says is overdue now, by item name."""
    service = api.get("/api/v1/queue/service").json()
    listed = client.get(f"/dashboard/reviews/?org={org.slug}&kind=any&due=overdue").content.decode()
    export = client.get(f"/dashboard/export/?org={org.slug}&kind=any&due=overdue&format=jsonl")
    exported = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    names = {
        review.pk: review.subject.external_id
        for review in org.reviews.select_related("draft", "conversation")  # every review of the test's org
    }  # fmt: skip
    return {
        "overdue now": service["overdue_total"],
        "overdue now by kind": {row["kind"]: row["n"] for row in service["overdue_now"]},
        "held overdue": {row["person"]: row["overdue"] for row in service["workload"]},
        "list": sorted(names[int(pk)] for pk in re.findall(r'data-review="(\d+)"', listed)),
        "export": sorted(names[row["review_id"]] for row in exported),
    }


def test_publishing_a_criteria_version_takes_its_items_out_of_every_overdue_reader_and_every_later_mail(
    org, operator, stakeholder, criteria_admin, client_for, smtp, django_capture_on_commit_callbacks
):
    lead = make_person("lee", org, Role.LEAD)
    lead.email = "lee@example.com"
    lead.save()
    draft_item(org, "late-draft", minutes_ago=120)
    held = draft_item(org, "held-draft", minutes_ago=90)
    later = draft_item(org, "later-draft", minutes_ago=0)
    conversation_item(org, "late-cv", application="billing", minutes_ago=120)
    ServiceTarget.objects.create(org=org, position=1, minutes=60)  # every item: due an hour after its routing
    due_times_refresh(org.pk)
    claim_take(user=operator, review_id=held.pk)
    Escalation.objects.create(org=org, swept_until=timezone.now() - timedelta(hours=2))
    handed_on = []  # the sweep's mails, not sent yet (they wait on the webhooks queue)
    with django_capture_on_commit_callbacks(execute=True):
        escalations_sweep(lambda swept, url: handed_on.append(swept))
    key = api_key_create(org=org, name="ops").plaintext
    client, api = client_for(stakeholder), Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert overdue_readers(org, client, api) == {
        "overdue now": 3,
        "overdue now by kind": {"draft": 2, "conversation": 1},
        "held overdue": {"dana": 1},
        "list": ["held-draft", "late-cv", "late-draft"],
        "export": ["held-draft", "late-cv", "late-draft"],
    }

    criteria_publish(version=criteria_new_version(org=org, kind=ItemKind.DRAFT), actor=criteria_admin)

    assert overdue_readers(org, client, api) == {
        "overdue now": 1,
        "overdue now by kind": {"conversation": 1},
        "held overdue": {"dana": 0},
        "list": ["late-cv"],
        "export": ["late-cv"],
    }
    # The mails handed on before the publication, sent after it, name only what still waits.
    [swept] = handed_on
    assert sorted(swept.notices["overdue"]) == sorted(Notice.objects.values_list("review_id", flat=True))
    for person_id, items in swept.digests.items():
        tasks.escalation_mail.apply(args=(org.pk, person_id, items)).get()
    [mail] = smtp.messages
    assert mail["Subject"] == "Tollgate (northwind): 1 item overdue"
    assert "late-cv" in mail.get_payload() and "draft" not in mail.get_payload()
    # A later sweep never finds the stale draft whose due time passes after the publication.
    later.refresh_from_db()
    assert escalation_sweep(Escalation.objects.get(org=org), later.due_at + timedelta(minutes=1)).notices == {
        "overdue": []
    }
