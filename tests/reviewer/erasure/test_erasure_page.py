"""The erasure page: org admins only; a confirm step before anything is asked; another org is a 404; the tombstones
listed."""

from django.utils import timezone

from grading.erasure.runs import erasure_counts, erasure_run
from grading.models import AuditEvent, Conversation, Decision, Erasure, ErasureScope
from grading.models.otlp import PendingCall
from grading.reviews.services import PersonVerdict
from reviewer.models import Role
from reviewer.queue.services import claim_take, decision_create
from tests.builders.corrections import expected_reply
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item


def test_an_org_admin_confirms_then_the_erasure_is_asked_and_listed(org, client):
    conversation_item(org, "cv-<b>1<b>")
    client.force_login(make_person("admin", org, Role.ORG_ADMIN))
    asked = {"org": org.pk, "scope": ErasureScope.CONVERSATION, "target": "cv-<b>1<b>"}

    confirm = client.post("/erasure/", asked)

    assert confirm.status_code == 200 and b'id="erasure-confirm"' in confirm.content
    assert b"cv-<b>1" not in confirm.content  # an external id is shown escaped
    assert not Erasure.objects.exists()
    done = client.post("/erasure/", asked | {"confirmed": "on"})
    assert done.status_code == 302
    erasure = Erasure.objects.get()
    assert (erasure.scope, erasure.target, erasure.requested_by.username) == ("conversation", "cv-<b>1<b>", "admin")
    listing = client.get("/erasure/")
    assert listing.status_code == 200 and b'class="erasure-pending"' in listing.content


def test_a_conversation_known_only_by_waiting_otlp_calls_is_confirmed_with_their_count(org, other_org, client):
    for span in ("1", "2"):
        PendingCall.objects.create(
            org=org, trace_id="a" * 32, span_id=span * 16, span_seen_at=timezone.now(), conversation_external_id="cv-w"
        )
    PendingCall.objects.create(org=other_org, trace_id="a" * 32, span_id="3" * 16, conversation_external_id="cv-w")
    client.force_login(make_person("admin", org, Role.ORG_ADMIN))

    confirm = client.post("/erasure/", {"org": org.pk, "scope": ErasureScope.CONVERSATION, "target": "cv-w"})

    assert confirm.status_code == 200
    assert b"with 2 model calls waiting for their other part by OTLP" in confirm.content


def test_an_unknown_item_is_refused_and_another_org_is_404(org, other_org, client):
    conversation_item(other_org, "theirs")
    client.force_login(make_person("admin", org, Role.ORG_ADMIN))

    unknown = client.post("/erasure/", {"org": org.pk, "scope": "conversation", "target": "theirs"})
    other = client.post(
        "/erasure/", {"org": other_org.pk, "scope": "conversation", "target": "theirs", "confirmed": "on"}
    )

    assert unknown.status_code == 400 and b"Nothing was erased" in unknown.content
    assert other.status_code == 404
    assert not Erasure.objects.exists()


def test_only_org_admins_may_use_it(org, client, operator):
    assert client.get("/erasure/").status_code == 302  # to the sign-in page
    client.force_login(operator)
    assert client.get("/erasure/").status_code == 403
    assert (
        client.post("/erasure/", {"org": org.pk, "scope": "end_user", "target": "x", "confirmed": "on"}).status_code
        == 403
    )
    assert not Erasure.objects.exists()


def test_the_event_of_each_item_erased_names_the_admin_who_asked(org, client):
    conversation = conversation_item(org, "cv-1").conversation
    admin = make_person("admin", org, Role.ORG_ADMIN)
    client.force_login(admin)
    client.post("/erasure/", {"org": org.pk, "scope": ErasureScope.CONVERSATION, "target": "cv-1", "confirmed": "on"})

    erasure_run(erasure_id=Erasure.objects.get().pk)

    erased = AuditEvent.objects.get(action="item.erase")
    assert (erased.item_id, erased.actor, erased.api_key) == (conversation.pk, admin, None)


def test_the_confirm_step_previews_the_rows_the_erasure_then_erases_and_erases_none_of_them(org, client, operator):
    review = conversation_item(org, "cv-1")
    claim_take(user=operator, review_id=review.pk)
    checks = {"grounded": "pass", "complete": "pass", "usable": "pass"}
    decision_create(
        user=operator,
        review_id=review.pk,
        fingerprint=review.fingerprint,
        verdict=PersonVerdict(checks=checks, note="ok"),
    )
    client.force_login(make_person("admin", org, Role.ORG_ADMIN))
    asked = {"org": org.pk, "scope": ErasureScope.CONVERSATION, "target": "cv-1"}

    confirm = client.post("/erasure/", asked)

    preview = confirm.context["confirm"]["erases"]
    assert (preview["conversation"], preview["review"], preview["decision"]) == (1, 1, 1) and preview["message"] > 0
    shown = confirm.content.decode().split('id="erasure-preview"')[1].split("</p>")[0]
    assert f"<b>{preview['message']}</b> message" in shown and "<b>1</b> decision" in shown
    assert Conversation.objects.filter(org=org, external_id="cv-1").exists() and Decision.objects.exists()
    assert not Erasure.objects.exists() and not AuditEvent.objects.filter(action="item.erase").exists()
    client.post("/erasure/", asked | {"confirmed": "on"})
    erasure_run(erasure_id=Erasure.objects.get().pk)
    assert erasure_counts(Erasure.objects.get()) == preview


def test_the_preview_and_the_tombstones_name_the_rows_in_words(org, client, operator):
    review = conversation_item(org, "cv-1")
    claim_take(user=operator, review_id=review.pk)
    checks = {"grounded": "pass", "complete": "pass", "usable": "pass"}
    decision_create(
        user=operator,
        review_id=review.pk,
        fingerprint=review.fingerprint,
        verdict=PersonVerdict(checks=checks, note="ok"),
    )
    client.force_login(make_person("admin", org, Role.ORG_ADMIN))
    asked = {"org": org.pk, "scope": ErasureScope.CONVERSATION, "target": "cv-1"}

    confirm = client.post("/erasure/", asked)

    messages = confirm.context["confirm"]["erases"]["message"]
    shown = confirm.content.decode().split('id="erasure-preview"')[1].split("</p>")[0]
    assert f"<b>{messages}</b> messages" in shown and "<b>1</b> conversation ·" in shown
    assert "<b>1</b> queue claim" in shown and "claims" not in shown
    client.post("/erasure/", asked | {"confirmed": "on"})
    erasure_run(erasure_id=Erasure.objects.get().pk)
    listed = client.get("/erasure/").content.decode().split('class="erasure-done"')[1].split("</tr>")[0]
    assert f"{messages} messages" in listed and "1 review" in listed


def test_the_confirm_step_counts_the_items_corrections(org, client, operator):
    expected_reply(conversation_item(org, "cv-1"), author=operator, reply="What the agent should have said.")
    client.force_login(make_person("admin", org, Role.ORG_ADMIN))

    confirm = client.post("/erasure/", {"org": org.pk, "scope": ErasureScope.CONVERSATION, "target": "cv-1"})

    shown = confirm.content.decode().split('id="erasure-preview"')[1].split("</p>")[0]
    assert "<b>1</b> correction" in shown
