"""The page/API parity table (issue 42): each page action a machine should have, and the API operation that does it,
or "not yet" with the reason. It fails when an operation the table names is missing from the OpenAPI document, and
when an operation of the document is not settled for personal tokens (reviewer/tokens/routes.py)."""

import pytest

from grading.api.views import api
from reviewer.tokens.routes import ORG_KEY_ONLY, PERSON_ROUTES

DOCUMENT = api.get_openapi_schema()
OPERATIONS = {f"{method.upper()} {path}" for path, methods in DOCUMENT["paths"].items() for method in methods}

NOT_YET = "not yet: "
PARITY = {
    "queue: list": "GET /api/v1/queue",
    "queue: claim next": "POST /api/v1/queue/claim-next",
    "queue: claim this": "POST /api/v1/queue/items/{review_id}/claim",
    "queue: release": "POST /api/v1/queue/items/{review_id}/release",
    "queue: decline": "POST /api/v1/queue/items/{review_id}/decline",
    "queue: decide (answer, adjudicate)": "POST /api/v1/queue/items/{review_id}/decision",
    "queue: the lease's heartbeat": NOT_YET + "a claim is renewed by claiming it again",
    "queue: expected reply": NOT_YET + "the expected-reply form has no endpoint yet",
    "queue: correction": NOT_YET + "the correction form has no endpoint yet",
    "send to review": "POST /api/v1/conversations/{external_id}/send-to-review",
    "send a draft to review": "POST /api/v1/drafts/{draft_id}/send-to-review",
    "assignment: read, set, clear": "PUT /api/v1/conversations/{external_id}/assignment",
    "assignment of a draft": "PUT /api/v1/drafts/{draft_id}/assignment",
    "assign many at once": NOT_YET + "one request per item does it",
    "dashboard figures": "GET /api/v1/dashboard",
    "dashboard compare": "GET /api/v1/dashboard/compare",
    "exports: the dashboard's lists (CSV, JSONL)": "GET /api/v1/reviews/export",
    "exports: corrections": "GET /api/v1/corrections",
    "labels": "POST /api/v1/labels",
    "audit trail": "GET /api/v1/audit-events",
    "corrections' figures": "GET /api/v1/corrections/figures",
    "criteria: read a version": "GET /api/v1/criteria/{kind}",
    "criteria: list versions": "GET /api/v1/criteria/{kind}/versions",
    "criteria: clone": "POST /api/v1/criteria/{kind}/versions",
    "criteria: edit checks and rules": "PATCH /api/v1/criteria/versions/{version_id}",
    "criteria: preview": "GET /api/v1/criteria/versions/{version_id}/preview",
    "criteria: trial": "POST /api/v1/criteria/versions/{version_id}/trials",
    "criteria: trial result": "GET /api/v1/criteria/trials/{trial_id}",
    "criteria: publish with its plan": "POST /api/v1/criteria/versions/{version_id}/publish",
    "criteria: the diff of two versions": NOT_YET + "a page only",
    "regression sets: build, run, read a run": "POST /api/v1/sets/{name}/runs",
    "spend: read": "GET /api/v1/spend",
    "spend caps: set": "PUT /api/v1/spend/caps",
    "service targets: set": "POST /api/v1/setup/targets",
    "service targets, pools and rules: read": "GET /api/v1/setup/targets",
    "service figures": "GET /api/v1/queue/service",
    "pools and assignment rules: set": "PUT /api/v1/setup/pools/{pool}",
    "erasure": "POST /api/v1/erasures",
    "personal tokens: make, revoke": NOT_YET + "a person's own page only: a token never makes another",
    "org admin: members, keys, webhook secret, retention": NOT_YET + "kept to the pages",
}


@pytest.mark.parametrize("action", sorted(PARITY))
def test_each_page_action_has_an_operation_in_the_document_or_says_why_not(action):
    operation = PARITY[action]
    assert operation.startswith(NOT_YET) or operation in OPERATIONS, f"{action}: {operation} is not in the document"


def test_every_operation_is_settled_for_personal_tokens_once():
    assert not set(PERSON_ROUTES) & set(ORG_KEY_ONLY)
    assert set(PERSON_ROUTES) | set(ORG_KEY_ONLY) == OPERATIONS


def test_the_new_operations_describe_their_errors():
    for operation in [op for op in PARITY.values() if op.startswith(("GET /api/v1/queue", "POST /api/v1/queue/"))]:
        method, path = operation.split(" ")
        if path == "/api/v1/queue/service":
            continue
        responses = set(DOCUMENT["paths"][path][method.lower()]["responses"])
        assert {"200", "401", "403"} <= {str(code) for code in responses}, operation
        if "{review_id}" in path:
            assert {"404", "409"} <= {str(code) for code in responses}, operation


def test_every_operation_declares_the_refusals_any_caller_can_get():
    for path, methods in DOCUMENT["paths"].items():
        for method, operation in methods.items():
            responses = {str(code) for code in operation["responses"]}
            assert {"401", "403"} <= responses, f"{method.upper()} {path}"
            if operation.get("parameters") or operation.get("requestBody"):
                assert "400" in responses, f"{method.upper()} {path}"
