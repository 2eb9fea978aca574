"""Every URL x every persona x the org's own ids and another org's, generated from the URLconf and the OpenAPI
document, so a new URL is covered without anyone remembering: a URL (or an API operation, or a URL parameter)
the matrix has no policy for fails the test until someone decides who may use it.

What the matrix holds every URL to:
- pages: anonymous is sent to sign in; a signed-in person without the role gets 403; another org's id is 404
  (it does not exist as far as they can tell), and so is an id outside the part of the org a limited membership
  covers (another application's, or a draft's when drafts are not covered); the role in the id's org and part gets
  the page; other methods get 405.
- the API: no key, a revoked key or only a session gets 401 (so the API never acts on a cookie, and needs no
  CSRF token); another org's key gets 404 on this org's ids; this org's key gets past authorization.
- the admin: nobody but staff gets past its login.
- every POST of a page, htmx requests included, is refused without a CSRF token and accepted with one.
- every page renders in Chromium with no Content-Security-Policy violation (tests/browser/test_csp.py walks
  the same routes).

Also part of the security story, tested where they live and not repeated here:
- `check --deploy` clean under production settings: tests/reviewer/test_settings.py
  (test_it_passes_the_deploy_check_under_production_settings).
- Login throttling keyed on the client behind the documented proxy (the address the proxy appended to
  X-Forwarded-For, never one the client wrote): tests/reviewer/test_login_throttling.py.
- API keys stored only as SHA-256 and wrong or revoked keys refused: tests/grading/api/test_api_keys.py. Looking a
  key up by its hash is safe against timing: what the index compares is the hash of the caller's guess, which
  the caller cannot steer towards a stored hash without a SHA-256 preimage, so how long the comparison takes
  says nothing about any key (grading/api/keys.py, api_key_authenticate).
"""

import json
import re

import pytest
from django.test import Client

from grading.api.keys import api_key_create, api_key_revoke
from reviewer.access import reaches_of
from reviewer.models import Membership, Role
from tests.builders.page_matrix import (
    API_ALSO_FINE,
    API_PUBLIC,
    IDEMPOTENT_DELETES,
    LIMITED,
    PAGES,
    PARAMETERS,
    PERSONAS,
    PERSONS_WORK,
    SAMPLE_BODIES,
    UNOWNED,
    UPSERTS,
    Policy,
    matrix_world,
    more_people,
    object_parts,
    path_for,
    url_routes,
)
from tests.builders.tokens import token_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(org, other_org, operator, criteria_admin, stakeholder, roleless, other_org_operator):
    people = {"operator": operator, "criteria_admin": criteria_admin, "stakeholder": stakeholder,
              "roleless": roleless, "other_org_operator": other_org_operator}  # fmt: skip
    return matrix_world(org, other_org, people | more_people(org))


def request(client: Client, method: str, path: str, **extra):
    if method == "POST":
        return client.post(path, {}, **extra)
    return client.get(path, **extra)


def roles_in(user, org) -> set[str]:
    return set(Membership.objects.filter(user=user, org=org).values_list("role", flat=True))


def roles_anywhere(user) -> set[str]:
    return set(Membership.objects.filter(user=user).values_list("role", flat=True))


def test_every_url_is_classified():
    """The decision the matrix forces: a URL nobody gave a policy is a failure, not a silent gap."""
    unclassified = [
        route.route
        for route in url_routes()
        if not (route.name in PAGES or route.name in API_PUBLIC or route.name.startswith("api:"))
        and not route.route.startswith("/admin/")
    ]
    assert unclassified == []


@pytest.mark.slow
def test_every_page_answers_each_persona_as_its_policy_says_for_both_orgs(world):
    failures = []
    for route in url_routes():
        if route.name not in PAGES:
            continue
        policy = PAGES[route.name]
        for suffix in ("own", "other"):
            owned = set(route.parameters) - UNOWNED
            if suffix == "other" and not owned:
                continue
            path = path_for(route, world["objects"][suffix])
            object_org = world["org"] if suffix == "own" else world["other_org"]
            for persona in PERSONAS:
                if not _tried(persona, policy, suffix, has_object=bool(owned)):
                    continue
                user = world["people"].get(persona)
                for method in ("GET", "POST"):
                    response = request(world["client_as"](persona), method, path)
                    parts = object_parts(route) if owned else []
                    expected = _page_expectation(policy, method, user, object_org, bool(owned), parts)
                    if not expected(response):
                        failures.append(f"{method} {path} as {persona}: {response.status_code} ({expected.__doc__})")
    assert failures == [], "\n".join(failures)


def _tried(persona: str, policy: Policy, suffix: str, *, has_object: bool) -> bool:
    """The personas added for a part of the org (the limited ones, the lead) are tried where they differ from the
    others: the limited ones on this org's objects (their pages without one are test_limited_memberships'), the lead
    on the routes its role opens."""
    if persona in LIMITED:
        return has_object and suffix == "own"
    if persona == "lead":
        return Role.LEAD in policy.roles
    return True


def _page_expectation(policy: Policy, method: str, user, object_org, has_object: bool, parts: list):
    """A check of one response, whose docstring says what was expected."""
    if policy.kind == "token":

        def check(response) -> bool:
            """401: a session signs no call in, only a bearer token (405 for a method the view does not take)"""
            return response.status_code == (401 if method in policy.methods else 405)

        return check
    if policy.kind == "public":

        def check(response) -> bool:
            """the sign-in page, to anyone"""
            return response.status_code in (200, 302) if method in policy.methods else response.status_code == 405

        return check
    if user is None:

        def check(response) -> bool:
            """anonymous is sent to sign in (or 405 for a method the view does not take)"""
            if policy.kind == "logout":
                return response.status_code in (302, 405)
            if response.status_code == 405:
                return method not in policy.methods
            return response.status_code == 302 and response["Location"].startswith("/login/")

        return check
    if policy.kind == "account":

        def check(response) -> bool:
            """a person's own page: theirs whatever their roles; another person's token does not exist for them"""
            if method not in policy.methods:
                return response.status_code == 405
            if has_object:
                return response.status_code == 404
            return response.status_code not in (401, 403, 404, 405) and response.status_code < 500

        return check
    if policy.kind in ("home", "logout"):

        def check(response) -> bool:
            """a redirect for the methods it takes, 405 otherwise"""
            return response.status_code == (302 if method in policy.methods else 405)

        return check
    held_anywhere = roles_anywhere(user) & set(policy.roles)
    held_here = roles_in(user, object_org) & set(policy.roles)
    if method not in policy.methods:

        def check(response) -> bool:
            """405 for a method the view does not take"""
            return response.status_code == 405

        return check
    if not held_anywhere:

        def check(response) -> bool:
            """403: the role is not theirs"""
            return response.status_code == 403

        return check
    if has_object and not held_here:

        def check(response) -> bool:
            """404: another org's id does not exist for them"""
            return response.status_code == 404

        return check
    reach = reaches_of(user, *policy.roles).get(object_org.pk)
    if reach is not None and not all(reach.covers(kind, application) for kind, application in parts):

        def check(response) -> bool:
            """404: an id outside the part of the org their memberships cover does not exist for them"""
            return response.status_code == 404

        return check

    def check(response) -> bool:
        """allowed: past every check, and no server error"""
        return response.status_code not in (401, 403, 404, 405) and response.status_code < 500

    return check


def test_no_persona_gets_past_the_admin_login(world):
    failures = []
    # One client per persona here: no admin URL signs anyone but staff out, so requests cannot change each other.
    # The personas added for a part of the org are signed-in non-staff like the others: not tried again here.
    personas = [persona for persona in PERSONAS if persona not in LIMITED and persona != "lead"]
    clients = {persona: world["client_as"](persona) for persona in personas}
    for route in url_routes():
        if not route.route.startswith("/admin/"):
            continue
        path = path_for(route, world["objects"]["own"])
        for persona in personas:
            for method in ("GET", "POST"):
                response = request(clients[persona], method, path)
                login_form = route.name == "admin:login" and response.status_code == 200
                to_login = response.status_code == 302 and response["Location"].startswith("/admin/login/")
                # The admin sends anyone but staff who asks to sign out to its index, which sends them to sign in.
                to_index = route.name == "admin:logout" and response.get("Location") == "/admin/"
                if not (login_form or to_login or to_index or response.status_code == 405):
                    failures.append(f"{method} {path} as {persona}: {response.status_code} {response.get('Location')}")
    assert failures == [], "\n".join(failures)


# --- the API, from its OpenAPI document --------------------------------------------------------------------


def api_operations(client: Client) -> list[tuple[str, str, dict]]:
    document = client.get("/api/v1/openapi.json").json()
    return [
        (path, method.upper(), operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def test_every_api_url_is_an_operation_of_the_openapi_document_and_every_operation_needs_a_key(client, db):
    operations = api_operations(client)
    documented = {re.sub(r"\{(\w+)\}", r"<\1>", path) for path, _, _ in operations}
    served = {re.sub(r"<\w+:(\w+)>", r"<\1>", r.route) for r in url_routes() if r.name.startswith("api:")}
    served -= {r.route for r in url_routes() if r.name in API_PUBLIC}
    assert served == documented
    assert [f"{method} {path}" for path, method, operation in operations if not operation.get("security")] == []


def test_every_api_operation_answers_each_credential_as_its_policy_says_for_both_orgs(client, world):
    org, other_org = world["org"], world["other_org"]
    own_key = api_key_create(org=org, name="pipeline").plaintext
    other_key = api_key_create(org=other_org, name="theirs").plaintext
    revoked = api_key_create(org=org, name="old")
    api_key_revoke(api_key=revoked.api_key)
    tokens = {"own": token_of(world["people"]["operator"], org), "other": token_of(
        world["people"]["other_org_operator"], other_org)}  # fmt: skip
    failures = []
    # Deletes last: a delete with this org's key takes the object the other operations name.
    for path, method, operation in sorted(api_operations(client), key=lambda operation: operation[1] == "DELETE"):
        persons_work = path in PERSONS_WORK or path.startswith(PERSONS_WORK[-1])
        parameters = re.findall(r"\{(\w+)\}", path)
        unknown = [name for name in parameters if name not in PARAMETERS]
        assert not unknown, f"{path}: the matrix has no sample for {unknown}; add what it names to PARAMETERS"
        owned = set(parameters) - UNOWNED
        needs_body = bool(owned and "requestBody" in operation)
        assert not needs_body or path in SAMPLE_BODIES, f"{method} {path} writes to an object: add it to SAMPLE_BODIES"
        body = json.dumps(SAMPLE_BODIES.get(path, {}))
        for suffix in ("own", "other") if owned else ("own",):
            ids = world["objects"][suffix]
            concrete = re.sub(r"\{(\w+)\}", lambda m, ids=ids: str(ids[PARAMETERS[m.group(1)]]), path)
            bearer = {
                "no key": None,
                "a session and no key": None,
                "a revoked key": revoked.plaintext,
                "this org's key": tokens["own"] if persons_work else own_key,
                "another org's key": tokens["other"] if persons_work else other_key,
            }
            for credential, key in bearer.items():
                caller = world["client_as"]("operator") if credential == "a session and no key" else Client()
                headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
                sent = body if method in ("POST", "PUT", "PATCH") else ""
                response = caller.generic(method, concrete, sent, content_type="application/json", **headers)
                owner = {"this org's key": "own", "another org's key": "other"}.get(credential)
                status = response.status_code
                if owner is None:
                    ok = status == 401
                elif owned and owner != suffix and (method, path) not in UPSERTS:
                    ok = status == (204 if method == "DELETE" and path in IDEMPOTENT_DELETES else 404)
                else:
                    ok = status not in (401, 403, 404, 405) and (status < 500 or status in API_ALSO_FINE.get(path, ()))
                if not ok:
                    failures.append(f"{method} {concrete} with {credential}: {status}")
            if persons_work:  # an org key cannot do a person's work
                headers = {"HTTP_AUTHORIZATION": f"Bearer {own_key}"}
                sent = body if method in ("POST", "PUT") else ""
                response = Client().generic(method, concrete, sent, content_type="application/json", **headers)
                if (status := response.status_code) != 403:
                    failures.append(f"{method} {concrete} with the org's key: {status}")
    assert failures == [], "\n".join(failures)


# --- CSRF ------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_post_is_refused_without_a_csrf_token_htmx_or_not_and_accepted_with_one(world):
    failures = []
    posts = [
        route
        for route in url_routes()
        if route.name in PAGES and "POST" in PAGES[route.name].methods and PAGES[route.name].kind != "token"
    ]
    posts += [route for route in url_routes() if route.name == "admin:login"]
    assert {route.name for route in posts} >= {"login", "logout", "review_decide", "review_heartbeat"}
    for route in posts:
        policy = PAGES.get(route.name, Policy("public", ("POST",)))
        persona = "anonymous" if policy.kind == "public" else "operator"
        if policy.roles and Role.OPERATOR not in policy.roles:
            persona = {Role.LEAD: "lead", Role.ORG_ADMIN: "org_admin"}.get(policy.roles[0], "criteria_admin")
        path = path_for(route, world["objects"]["own"])
        strict = Client(enforce_csrf_checks=True)
        if persona != "anonymous":
            strict.force_login(world["people"][persona])
        for htmx in ({}, {"HTTP_HX_REQUEST": "true"}):
            refused = strict.post(path, {}, **htmx)
            if refused.status_code != 403 or b"CSRF" not in refused.content:
                failures.append(f"POST {path} {htmx or ''} without a token: {refused.status_code}")
        strict.get("/login/" if persona == "anonymous" else "/dashboard/")  # a page sets the csrftoken cookie
        token = strict.cookies["csrftoken"].value
        accepted = strict.post(path, {}, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")  # as htmx sends it
        if accepted.status_code == 403 or accepted.status_code >= 500:
            failures.append(f"POST {path} with the token as htmx sends it: {accepted.status_code}")
    assert failures == [], "\n".join(failures)
