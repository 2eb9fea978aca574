"""Every criteria URL, pages and htmx partials, for every persona: only the org's criteria admins get in. Another
org's criteria admin finds nothing (404), every other role is refused (403), anonymous is sent to sign in, and a
refused request writes nothing."""

from collections.abc import Iterator
from dataclasses import fields

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from grading.conversations.expected_replies import present_reply_points
from grading.models import (
    AuditEvent,
    Correction,
    CriteriaExample,
    CriteriaTrial,
    CriteriaVersion,
    Org,
    Review,
    SpendCap,
)
from reviewer.models import Role
from tests.builders.criteria import Criteria, editor_data, graded_org
from tests.builders.module_world import kept_for_module
from tests.builders.people import make_person, persona_criteria_admin, persona_org

pytestmark = pytest.mark.django_db

PERSONAS = [
    "anonymous", "operator", "stakeholder", "roleless", "other_org_operator", "other_org_criteria_admin",
    "criteria_admin",
]  # fmt: skip
HTMX_TRIAL = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "trial-results"}


@pytest.fixture
def other_org_criteria_admin(other_org):
    return make_person("olive", other_org, Role.CRITERIA_ADMIN)


@pytest.fixture(scope="module")
def _criteria_built(django_db_setup, django_db_blocker, fake_llm_server) -> Iterator[Criteria]:
    """The org's criteria, built once for the module's tests (`kept_for_module`: what the admin's requests wrote, a
    version, a trial, a publication, an example, is gone before the next test). Building them for each of the
    module's 28 tests was most of its time. The org and its criteria admin are the suite's personas."""
    with kept_for_module(django_db_blocker):
        org = persona_org()
        fake_llm_server.reset()
        yield _criteria(org, fake_llm_server, persona_criteria_admin(org))


@pytest.fixture
def org(_criteria_built: Criteria, db) -> Org:
    return Org.objects.get(pk=_criteria_built.org.pk)


@pytest.fixture
def criteria_admin(_criteria_built: Criteria, db):
    return get_user_model().objects.get(pk=_criteria_built.draft_version.author_id)  # who wrote the draft version


@pytest.fixture
def criteria(_criteria_built: Criteria, fake_llm) -> Criteria:
    """The module's criteria, each row read afresh for the test."""
    rows = {part.name: getattr(_criteria_built, part.name) for part in fields(Criteria)}
    return Criteria(**{name: type(row).objects.get(pk=row.pk) for name, row in rows.items()})


def _criteria(org, fake_llm, criteria_admin) -> Criteria:
    world = graded_org(org, fake_llm, criteria_admin)
    draft = world.gizmo_draft
    CriteriaExample.objects.create(
        org=org, criteria_version=world.draft_version, draft=draft, external_id=draft.external_id,
        check_name="pass_fail", human_verdict="fail", source="decision", fingerprint=draft.fingerprint,
        evidence={"title": draft.title, "body": draft.body}, position=1,
    )  # fmt: skip
    point = present_reply_points(world.conversation)["m4"]
    Correction.objects.create(
        org=org, kind=Correction.Kind.EXPECTED_REPLY, review=Review.objects.get(conversation=world.conversation),
        conversation=world.conversation, message_external_id="m4", evidence_fingerprint=point.path_fingerprint,
        original=point.text, corrected="Refunded: 49.90 reaches your card in 3 to 5 days.",
        state=Correction.State.KEPT, created_at=timezone.now(),
    )  # fmt: skip
    return world


def requests_for(c) -> dict[str, tuple[str, str, dict, dict]]:
    """Every criteria URL: name -> (method, path, data, headers)."""
    v, active = c.draft_version, c.active
    example = CriteriaExample.objects.get(criteria_version=v)
    cap = {"org": c.org.pk, "period": "day", "tokens": 1000}
    return {
        "index": ("get", reverse("criteria"), {}, {}),
        "version page": ("get", reverse("criteria_version", args=[v.pk]), {}, {}),
        "published version page": ("get", reverse("criteria_version", args=[active.pk]), {}, {}),
        "diff": ("get", reverse("criteria_diff"), {"old": active.pk, "new": v.pk}, {}),
        "preview form": ("get", reverse("criteria_preview", args=[v.pk]), {}, {}),
        "preview": ("get", reverse("criteria_preview", args=[v.pk]), {"n": 10}, {}),
        "trial count": ("get", reverse("criteria_trial", args=[v.pk]), {"k": 1}, {}),
        "trial page": ("get", reverse("criteria_trial_detail", args=[c.trial.pk]), {}, {}),
        "trial partial (htmx)": ("get", reverse("criteria_trial_detail", args=[c.trial.pk]), {}, HTMX_TRIAL),
        "trial items (CSV)": ("get", reverse("criteria_trial_csv", args=[c.trial.pk]), {}, {}),
        "publish plan": ("get", reverse("criteria_publish", args=[v.pk]), {}, {}),
        "draft item": ("get", reverse("criteria_item", args=["draft", c.gizmo_draft.pk]), {}, {}),
        "conversation item": ("get", reverse("criteria_item", args=["conversation", c.conversation.pk]), {}, {}),
        "new version": ("post", reverse("criteria_new"), {"org": c.org.pk, "kind": "draft"}, {}),
        "new version from an old one": (
            "post", reverse("criteria_new"), {"org": c.org.pk, "kind": "draft", "source": active.pk}, {},
        ),
        "save": ("post", reverse("criteria_version", args=[v.pk]), editor_data(v), {}),
        "start a trial": ("post", reverse("criteria_trial", args=[v.pk]), {"k": 1, "counted_calls": 1}, {}),
        "publish": ("post", reverse("criteria_publish", args=[v.pk]), {"plan_active": active.pk}, {}),
        "set a certification target": (
            "post", reverse("criteria_certify_target", args=[active.pk]), {"agreement": 90, "confidence": 90}, {},
        ),
        "spend page": ("get", reverse("criteria_spend"), {}, {}),
        "regression sets page": ("get", reverse("criteria_sets"), {}, {}),
        "set a spend cap": ("post", reverse("criteria_spend"), cap, {}),
        "add an example": (
            "post", reverse("criteria_example_add"),
            {"version": v.pk, "kind": "conversation", "item": c.conversation.pk, "check": "grounded"}, {},
        ),
        "explain an example": (
            "post", reverse("criteria_example_explain", args=[example.pk]),
            {"revision": v.revision, "explanation": "Read it this way."}, {},
        ),
        "add an example from an expected reply": (
            "post", reverse("criteria_example_from_expected_reply"),
            {"version": v.pk, "correction": Correction.objects.get().pk, "check": "grounded"}, {},
        ),
        "remove an example": (
            "post", reverse("criteria_example_remove", args=[example.pk]), {"revision": v.revision}, {},
        ),
    }  # fmt: skip


NAMES = [
    "index", "version page", "published version page", "diff", "preview form", "preview", "trial count", "trial page",
    "trial partial (htmx)", "trial items (CSV)", "publish plan", "draft item", "conversation item", "new version",
    "new version from an old one", "save", "start a trial", "publish", "set a certification target", "spend page",
    "regression sets page", "set a spend cap", "add an example", "explain an example",
    "add an example from an expected reply", "remove an example",
]  # fmt: skip


def test_the_list_covers_every_criteria_url(criteria):
    from django.urls import resolve

    from reviewer.criteria.urls import urlpatterns

    requests = requests_for(criteria)
    assert list(requests) == NAMES
    assert {resolve(path).url_name for _, path, _, _ in requests.values()} == {p.name for p in urlpatterns}


def written(c) -> tuple:
    versions = list(
        CriteriaVersion.objects.order_by("pk").values_list(
            "pk", "revision", "published_at", "is_active", "certify_agreement"
        )
    )
    examples = list(CriteriaExample.objects.order_by("pk").values_list("pk", "explanation"))
    return (
        versions,
        CriteriaTrial.objects.count(),
        examples,
        list(SpendCap.objects.values_list("pk", "tokens")),
        AuditEvent.objects.exclude(action="user.login").count(),
    )


@pytest.mark.parametrize("name", NAMES)
def test_only_the_orgs_criteria_admins_get_in(request, client, criteria, name):
    """The refused personas first (nothing they send may change what the next one meets), the admin last."""
    method, path, data, headers = requests_for(criteria)[name]
    before = written(criteria)
    for persona in PERSONAS:
        client.logout()
        if persona != "anonymous":
            client.force_login(request.getfixturevalue(persona))
        response = getattr(client, method)(path, data, **headers)
        if persona == "criteria_admin":
            assert response.status_code == (200 if method == "get" else 302), response.content[:500]
            continue
        if persona == "anonymous":
            assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
        elif persona == "other_org_criteria_admin":
            # Their own criteria page opens (with their org only, below); nothing of this org exists for them.
            opens = name in ("index", "spend page", "regression sets page")
            assert response.status_code == (200 if opens else 404), persona
        else:
            assert response.status_code == 403, persona
        assert written(criteria) == before, persona


def test_the_index_of_another_orgs_criteria_admin_shows_none_of_this_orgs_versions(
    client_for, criteria, other_org_criteria_admin
):
    html = client_for(other_org_criteria_admin).get(reverse("criteria")).content.decode()
    assert "Globex" in html and "Northwind" not in html
    assert reverse("criteria_version", args=[criteria.draft_version.pk]) not in html
