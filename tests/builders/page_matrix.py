"""What the security matrix knows about every URL: its access policy, the samples for its parameters, and the
walk of the URLconf that finds them (tests/resilience/test_security_matrix.py, tests/browser/test_csp.py)."""

from collections.abc import Iterator
from dataclasses import dataclass
from importlib import import_module

from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.models import CriteriaExample, CriteriaTrial, Erasure, ErasureScope, ItemKind, ServiceTarget
from grading.reviews.versions import criteria_active, criteria_new_version
from grading.sets.build import set_build
from grading.sets.runs import set_run_start
from reviewer.access import EVERY_ROLE
from reviewer.models import AssignmentRule, Invitation, Membership, Pool, Role
from reviewer.tokens.services import token_create
from tests.builders.monitored import monitor
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

PERSONAS = (
    "anonymous",
    "operator",
    "criteria_admin",
    "stakeholder",
    "roleless",
    "other_org_operator",
    "drafts_only",  # operator and stakeholder of the org, limited to its drafts
    "other_application",  # operator and stakeholder of the org, limited to an application none of its objects is in
    "lead",  # works the queue and assigns its items
    "org_admin",  # members, keys, the webhook secret, retention, erasure and the audit trail of the org
)
# Memberships limited to part of the org (reviewer/access.py): persona -> (applications, drafts).
LIMITED = {"drafts_only": ([], True), "other_application": (["elsewhere"], False)}


@dataclass(frozen=True)
class Policy:
    """Who may use a URL: `kind` is public, home, logout, account (a person's own), roles, admin, api_public,
    api_key, or token (a bearer token on each request, never a session: the MCP endpoint)."""

    kind: str
    methods: tuple[str, ...] = ("GET",)
    roles: tuple[Role, ...] = ()
    also_fine: tuple[int, ...] = ()  # statuses of 500 or more that are the answer, not a failure
    page: bool = True  # renders HTML in a browser (the CSV export is a download instead)


OPERATOR = (Role.OPERATOR, Role.LEAD)  # the queue's roles: a lead works it as an operator does
LEAD = (Role.LEAD,)
CRITERIA_ADMIN = (Role.CRITERIA_ADMIN,)
ORG_ADMIN = (Role.ORG_ADMIN,)

# Pages, by URL name. A new page must be added here (or the matrix fails), with the roles its view requires.
PAGES = {
    "home": Policy("home"),
    "login": Policy("public", ("GET", "POST")),
    "logout": Policy("logout", ("POST",)),
    # Single sign-on: while it is not configured (as here) both send people to the sign-in page.
    "oidc_start": Policy("public", ("POST",)),
    "oidc_callback": Policy("public"),
    "queue": Policy("roles", roles=OPERATOR),
    "queue_claim_next": Policy("roles", ("POST",), OPERATOR),
    "queue_preferences": Policy("roles", ("POST",), OPERATOR),
    "queue_assign_many": Policy("roles", ("POST",), LEAD),
    "review_detail": Policy("roles", roles=OPERATOR),
    "review_claim": Policy("roles", ("POST",), OPERATOR),
    "review_release": Policy("roles", ("POST",), OPERATOR),
    "review_decline": Policy("roles", ("POST",), OPERATOR),
    "review_heartbeat": Policy("roles", ("POST",), OPERATOR),
    "review_decide": Policy("roles", ("POST",), OPERATOR),
    "review_correction_check": Policy("roles", ("POST",), OPERATOR),
    "review_correct": Policy("roles", ("POST",), OPERATOR),
    "review_corrections": Policy("roles", roles=OPERATOR),
    "review_expected_reply": Policy("roles", ("POST",), OPERATOR),
    "review_assign": Policy("roles", ("POST",), LEAD),
    "review_unassign": Policy("roles", ("POST",), LEAD),
    # Sending an item to people whatever the machine decided: leads within their reach, criteria and org admins.
    "review_send": Policy("roles", ("GET", "POST"), LEAD + CRITERIA_ADMIN + ORG_ADMIN),
    "criteria": Policy("roles", roles=CRITERIA_ADMIN),
    "criteria_new": Policy("roles", ("POST",), CRITERIA_ADMIN),
    "criteria_diff": Policy("roles", roles=CRITERIA_ADMIN),
    "criteria_spend": Policy("roles", ("GET", "POST"), CRITERIA_ADMIN),
    "criteria_sets": Policy("roles", ("GET",), CRITERIA_ADMIN),
    "criteria_version": Policy("roles", ("GET", "POST"), CRITERIA_ADMIN),
    "criteria_certify_target": Policy("roles", ("POST",), CRITERIA_ADMIN),
    "criteria_preview": Policy("roles", roles=CRITERIA_ADMIN),
    "criteria_trial": Policy("roles", ("GET", "POST"), CRITERIA_ADMIN),
    "criteria_publish": Policy("roles", ("GET", "POST"), CRITERIA_ADMIN),
    "criteria_trial_detail": Policy("roles", roles=CRITERIA_ADMIN),
    "criteria_trial_csv": Policy("roles", roles=CRITERIA_ADMIN, page=False),
    "criteria_item": Policy("roles", roles=CRITERIA_ADMIN),
    "criteria_example_add": Policy("roles", ("POST",), CRITERIA_ADMIN),
    "criteria_example_from_expected_reply": Policy("roles", ("POST",), CRITERIA_ADMIN),
    "criteria_example_explain": Policy("roles", ("POST",), CRITERIA_ADMIN),
    "criteria_example_remove": Policy("roles", ("POST",), CRITERIA_ADMIN),
    "dashboard": Policy("roles", roles=EVERY_ROLE),
    "dashboard_reviews": Policy("roles", roles=EVERY_ROLE),
    "dashboard_item": Policy("roles", roles=EVERY_ROLE),
    "dashboard_regrade": Policy("roles", roles=EVERY_ROLE),
    "dashboard_certified": Policy("roles", roles=EVERY_ROLE),
    "dashboard_statistics": Policy("roles", roles=EVERY_ROLE),
    "dashboard_queue": Policy("roles", roles=EVERY_ROLE),
    "dashboard_service": Policy("roles", roles=EVERY_ROLE),
    "dashboard_gate": Policy("roles", roles=EVERY_ROLE),
    "dashboard_spend": Policy("roles", roles=EVERY_ROLE),
    "dashboard_export": Policy("roles", roles=EVERY_ROLE, page=False),
    "dashboard_corrections": Policy("roles", roles=EVERY_ROLE),
    "dashboard_corrections_items": Policy("roles", roles=EVERY_ROLE),
    "dashboard_corrections_export": Policy("roles", roles=OPERATOR + CRITERIA_ADMIN, page=False),
    "dashboard_compare": Policy("roles", roles=EVERY_ROLE),
    "audit": Policy("roles", roles=ORG_ADMIN),
    "audit_csv": Policy("roles", roles=ORG_ADMIN, page=False),
    "orgadmin_members": Policy("roles", ("GET", "POST"), ORG_ADMIN),
    "orgadmin_member_scope": Policy("roles", ("POST",), ORG_ADMIN),
    "orgadmin_member_revoke": Policy("roles", ("POST",), ORG_ADMIN),
    "orgadmin_member_password_link": Policy("roles", ("POST",), ORG_ADMIN),
    "orgadmin_invitation_send": Policy("roles", ("POST",), ORG_ADMIN),
    "orgadmin_invitation_cancel": Policy("roles", ("POST",), ORG_ADMIN),
    "orgadmin_keys": Policy("roles", ("GET", "POST"), ORG_ADMIN),
    "orgadmin_key_revoke": Policy("roles", ("POST",), ORG_ADMIN),
    "orgadmin_webhook": Policy("roles", ("GET", "POST"), ORG_ADMIN),
    "orgadmin_retention": Policy("roles", ("GET", "POST"), ORG_ADMIN),
    "orgadmin_dimensions": Policy("roles", ("GET", "POST"), ORG_ADMIN),
    "orgadmin_tokens": Policy("roles", ("GET",), ORG_ADMIN),
    "orgadmin_token_revoke": Policy("roles", ("POST",), ORG_ADMIN),
    # A person's own tokens: anyone signed in, whatever their roles; another person's token is unknown to them.
    "account_tokens": Policy("account", ("GET", "POST")),
    "account_token_revoke": Policy("account", ("POST",)),
    "orgadmin_password_set": Policy("public", ("GET", "POST")),
    "invitation_open": Policy("public"),
    "invitation_accept": Policy("public", ("GET", "POST")),
    "erasure": Policy("roles", ("GET", "POST"), ORG_ADMIN),
    "setup_targets": Policy("roles", ("GET", "POST"), LEAD + ORG_ADMIN),
    "setup_target_change": Policy("roles", ("POST",), LEAD + ORG_ADMIN),
    "setup_target_move": Policy("roles", ("POST",), LEAD + ORG_ADMIN),
    "setup_target_remove": Policy("roles", ("POST",), LEAD + ORG_ADMIN),
    "setup_pools": Policy("roles", ("GET", "POST"), LEAD + ORG_ADMIN),
    "setup_pool_rename": Policy("roles", ("POST",), LEAD + ORG_ADMIN),
    "setup_pool_remove": Policy("roles", ("POST",), LEAD + ORG_ADMIN),
    "setup_rules": Policy("roles", ("GET", "POST"), LEAD + ORG_ADMIN),
    "setup_rule_move": Policy("roles", ("POST",), LEAD + ORG_ADMIN),
    "setup_rule_remove": Policy("roles", ("POST",), LEAD + ORG_ADMIN),
    "setup_escalation": Policy("roles", ("GET", "POST"), LEAD + ORG_ADMIN),
    "setup_escalation_remove": Policy("roles", ("POST",), LEAD + ORG_ADMIN),
    # Anyone with a role sees the monitors their reach covers; org admins and leads of a whole org set them up.
    "monitors": Policy("roles", roles=EVERY_ROLE),
    "monitor_detail": Policy("roles", roles=EVERY_ROLE),
    "monitor_items": Policy("roles", roles=EVERY_ROLE),
    "monitor_new": Policy("roles", ("GET", "POST"), LEAD + ORG_ADMIN),
    "monitor_edit": Policy("roles", ("GET", "POST"), LEAD + ORG_ADMIN),
    "monitor_remove": Policy("roles", ("POST",), LEAD + ORG_ADMIN),
    "mcp": Policy("token", ("POST",), page=False),  # its tools: tests/reviewer/mcp/
}
# The API outside its operations: the document, its docs page, and ninja's root.
API_PUBLIC = {"api:openapi-json", "api:openapi-view", "api:api-root"}
# A write to an object must be valid to reach the lookup of its id (validation answers first, the same for every
# id): each such operation needs a body here, or the matrix cannot tell another org's id from a bad body.
SAMPLE_BODIES = {
    "/api/v1/conversations/{external_id}/assignment": {"pool": "no-such-pool"},
    "/api/v1/drafts/{draft_id}/assignment": {"pool": "no-such-pool"},
    "/api/v1/conversations/{external_id}/send-to-review": {"reason": "the matrix asks"},
    "/api/v1/drafts/{draft_id}/send-to-review": {"reason": "the matrix asks"},
    "/api/v1/queue/items/{review_id}/decline": {"reason": "the matrix asks"},
    "/api/v1/sets/{name}/runs": {"version": 999999},
    "/api/v1/queue/items/{review_id}/decision": {"fingerprint": "not-what-was-read", "outcome": "approve"},
    "/api/v1/conversations/{external_id}/messages": {
        "messages": [{"id": "m-matrix", "parent_id": "m4", "role": "user", "content": "One more question."}]
    },
    "/api/v1/criteria/versions/{version_id}": {"rubric": "The matrix asks."},
    "/api/v1/criteria/versions/{version_id}/trials": {"k": 1, "counted_calls": 1},
    "/api/v1/criteria/versions/{version_id}/publish": {"replaces": 1},
    # A pool's PUT and PATCH share the path: members nobody has, and an empty new name, are refused.
    "/api/v1/setup/pools/{pool}": {"members": ["no-such-person"], "name": ""},
}
# A person's work (reviewer/queue/api.py): an org key is refused with 403, and the matrix sends the operators'
# personal tokens where it sends the org keys elsewhere.
PERSONS_WORK = ("/api/v1/queue", "/api/v1/queue/claim-next", "/api/v1/queue/items/")
# Deletes that answer 204 for what the org does not have, as for a retried delete: another org's object is as
# absent to the key as a deleted one (its owner keeps it).
IDEMPOTENT_DELETES = {"/api/v1/sets/{name}"}
# PUTs that create what the org does not have: another org's name is a free one here (its owner keeps its own).
UPSERTS = {("PUT", "/api/v1/setup/pools/{pool}")}
# Operations whose answer may be a 5xx by design.
API_ALSO_FINE = {"/api/v1/health": (503,)}  # no worker answers in this test: "unhealthy" is the truthful answer

# What each URL parameter names, so the matrix can ask for this org's object and another org's.
PARAMETERS = {
    "pk": "review",
    "review_id": "review",
    "name": "regression_set",
    "run_id": "regression_run",
    "draft_id": "draft",
    "external_id": "conversation",
    "trial_id": "criteria_trial",
    "version_id": "criteria_version",
    "erasure_id": "erasure",
    "pool": "pool",
    # The admin's: no persona here is staff, so any value meets the same login page.
    "object_id": "admin",
    "content_type_id": "admin",
    "id": "admin",
    "app_label": "admin_app",
    # Not an org's object: the same value for every org, so another org's key gets its own org's answer.
    "section": "dashboard_section",
    "kind": "draft_kind",
    "position": "setup_position",  # a place in the org's list of targets or rules, each org's own
    # A set-password link's (and an invitation link's token): a link nobody was given, the same for every org.
    "uidb64": "password_link_user",
    "token": "password_link_token",
}
# Parameters no org owns (the matrix asks for them once, not as another org's id).
UNOWNED = {"section", "kind", "uidb64", "token", "position"}
# What part of the org (kind, application) an object a parameter names is in, where memberships may be limited to
# part of it: a limited person's id outside their reach is as unknown to them as another org's.
IN_PART = {
    "review": ("draft", ""),
    "draft": ("draft", ""),
    "conversation": ("conversation", "billing"),
    "monitor": ("conversation", "billing"),  # a monitor of the billing application's conversations
}
# Where a parameter names something else on one route than PARAMETERS says (a criteria page's `pk`).
ROUTE_PARAMETERS = {
    "criteria_version": {"pk": "criteria_version"},
    "criteria_preview": {"pk": "criteria_version"},
    "criteria_trial": {"pk": "criteria_version"},
    "criteria_publish": {"pk": "criteria_version"},
    "criteria_certify_target": {"pk": "criteria_version"},
    "criteria_trial_detail": {"pk": "criteria_trial"},
    "criteria_trial_csv": {"pk": "criteria_trial"},
    "criteria_item": {"pk": "draft"},
    "criteria_example_explain": {"pk": "criteria_example"},
    "criteria_example_remove": {"pk": "criteria_example"},
    "orgadmin_member_scope": {"pk": "membership"},
    "orgadmin_member_revoke": {"pk": "membership_to_revoke"},  # its own: revoking it takes it away from the others
    "orgadmin_member_password_link": {"pk": "membership"},
    "orgadmin_invitation_send": {"pk": "invitation"},
    "orgadmin_invitation_cancel": {"pk": "invitation_to_cancel"},  # its own: cancelling it takes it away
    "orgadmin_key_revoke": {"pk": "api_key"},
    "orgadmin_token_revoke": {"pk": "personal_token"},
    "account_token_revoke": {"pk": "personal_token"},
    "monitor_detail": {"pk": "monitor"},
    "monitor_items": {"pk": "monitor"},
    "monitor_edit": {"pk": "monitor"},
    "monitor_remove": {"pk": "monitor"},
}


@dataclass(frozen=True)
class Route:
    name: str  # namespaced URL name; "" for the admin's unnamed catch-all
    route: str
    parameters: tuple[str, ...]


def url_routes() -> list[Route]:
    """Every URL pattern in reviewer.urls, with its full route and parameter names."""

    def walk(resolver: URLResolver, prefix: str, namespace: str) -> Iterator[Route]:
        for pattern in resolver.url_patterns:
            if isinstance(pattern, URLResolver):
                inner = ":".join(part for part in (namespace, pattern.namespace or "") if part)
                yield from walk(pattern, prefix + str(pattern.pattern), inner)
            elif isinstance(pattern, URLPattern):
                converters = getattr(pattern.pattern, "converters", {})
                names = tuple(converters) or tuple(pattern.pattern.regex.groupindex)
                name = f"{namespace}:{pattern.name}" if namespace and pattern.name else pattern.name or ""
                yield Route(name, prefix + str(pattern.pattern), names)

    return list(walk(get_resolver(), "/", ""))


def matrix_world(org, other_org, people: dict) -> dict:
    """This org's objects and another org's, the people by persona, and a client per persona. The `world`
    fixture of the matrix's tests: `people` maps persona names to the conftest personas."""
    objects = {}
    for owner, suffix in ((org, "own"), (other_org, "other")):
        review = draft_item(owner, slug=f"draft-{suffix}")
        conversation_review = conversation_item(owner, f"cv-{suffix}")
        version = criteria_new_version(org=owner, kind=ItemKind.DRAFT)
        trial = CriteriaTrial.objects.create(
            org=owner, criteria_version=version, sample=[], judge_calls=0, review_ids=[], finished_at=timezone.now()
        )
        example = CriteriaExample.objects.create(
            org=owner, criteria_version=version, draft=review.draft, external_id=review.draft.external_id,
            check_name="pass_fail", human_verdict="fail", source="decision", fingerprint=review.fingerprint,
            evidence={"title": review.draft.title, "body": review.draft.body}, position=1,
        )  # fmt: skip
        membership = Membership.objects.create(
            user=make_person(f"member-{suffix}"), org=owner, role=Role.STAKEHOLDER
        ).pk
        regression_set = set_build(
            org=owner, name=f"set-{suffix}", kind="conversation", source="decisions", external_ids=[f"cv-{suffix}"]
        )
        objects[suffix] = {
            "review": review.pk,
            "criteria_version": version.pk,
            "criteria_example": example.pk,
            "criteria_trial": trial.pk,
            "dashboard_section": "quality",
            "draft_kind": ItemKind.DRAFT,
            "conversation_review": conversation_review.pk,
            "draft": review.draft_id,
            "conversation": conversation_review.conversation.external_id,
            "admin": "1",
            "admin_app": "auth",
            "membership": membership,
            "membership_to_revoke": Membership.objects.create(
                user=make_person(f"leaver-{suffix}"), org=owner, role=Role.STAKEHOLDER
            ).pk,
            "invitation": Invitation.objects.create(
                org=owner, email=f"invitee-{suffix}@example.com", role="operator"
            ).pk,
            "invitation_to_cancel": Invitation.objects.create(
                org=owner, email=f"not-after-all-{suffix}@example.com", role="operator"
            ).pk,
            "api_key": api_key_create(org=owner, name=f"matrix-{suffix}").api_key.pk,
            # A member's token (no persona's own): an org admin of its org revokes it, nobody else knows it.
            "personal_token": token_create(
                user=Membership.objects.get(pk=membership).user, org=owner, name=f"matrix-{suffix}"
            ).token.pk,
            "password_link_user": "MA",
            "password_link_token": "no-such-token",
            "monitor": monitor(owner, "matrix", application="billing").pk,
            "regression_set": regression_set.name,
            "regression_run": set_run_start(
                regression_set=regression_set, version=criteria_active(org=owner, kind=ItemKind.CONVERSATION)
            ).pk,
            "erasure": Erasure.objects.create(
                org=owner, scope=ErasureScope.DRAFT, kind=ItemKind.DRAFT, target="gone", requested_at=timezone.now()
            ).pk,
            "pool": Pool.objects.create(org=owner, name=f"pool-{suffix}").name,
            # A target and a rule at 1 that pick nothing the matrix sends.
            "setup_position": ServiceTarget.objects.create(
                org=owner, position=1, application="no-such-application", minutes=60
            ).position,
        }
        AssignmentRule.objects.create(  # for a pool of its own: deleting the other takes its rules with it
            org=owner, position=1, application="no-such-application", pool=Pool.objects.create(org=owner, name="ruled")
        )

    signed_in: dict[str, dict] = {}

    def client_as(persona: str) -> Client:
        """A fresh client per request, with a session of its own: a request the matrix makes (signing out, say)
        never changes the next. The session is a copy of the one the persona signed in to once: a sign-in (its
        session, last_login, django-axes' access log) cost more than most requests the matrix makes."""
        client = Client()
        if persona != "anonymous":
            if persona not in signed_in:
                first = Client()
                first.force_login(people[persona])
                signed_in[persona] = dict(first.session.items())
            session = import_module(settings.SESSION_ENGINE).SessionStore()
            session.update(signed_in[persona])
            session.create()
            client.cookies[settings.SESSION_COOKIE_NAME] = session.session_key
        return client

    return {"objects": objects, "people": people, "client_as": client_as, "org": org, "other_org": other_org}


def more_people(org) -> dict:
    """The lead, the org admin, and the personas of LIMITED: an operator and stakeholder of `org` whose memberships
    cover only part of it."""
    people = {"lead": make_person("lead", org, Role.LEAD), "org_admin": make_person("org-admin", org, Role.ORG_ADMIN)}
    for persona, (applications, drafts) in LIMITED.items():
        person = make_person(persona.replace("_", "-"))
        for role in (Role.OPERATOR, Role.STAKEHOLDER):
            Membership.objects.create(user=person, org=org, role=role, applications=applications, drafts=drafts)
        people[persona] = person
    return people


def object_parts(route: Route) -> list[tuple[str, str]]:
    """The (kind, application) of each object the route's parameters name, where it is in a part of the org."""
    names = PARAMETERS | ROUTE_PARAMETERS.get(route.name, {})
    return [IN_PART[names[name]] for name in route.parameters if names.get(name) in IN_PART]


def path_for(route: Route, ids: dict) -> str:
    if not route.name and route.route.startswith("/admin/"):  # the admin's catch-all: any path under it
        return "/admin/no-such-page/"
    names = PARAMETERS | ROUTE_PARAMETERS.get(route.name, {})
    unknown = [name for name in route.parameters if name not in names]
    assert not unknown, f"{route.route}: the matrix has no sample for {unknown}; add what it names to PARAMETERS"
    return reverse(route.name, kwargs={name: ids[names[name]] for name in route.parameters})
