"""Which API operations a personal token may call, and with which of its person's roles: the roles of the page that
does the same (reviewer/<area>/views.py `role_required`). Keyed as the OpenAPI document names operations
(`METHOD path`); tests/grading/api/test_parity.py holds every operation of the document to exactly one of the two
tables, so a new route decides whether a person may call it."""

from reviewer.models import Role
from reviewer.queue.assignments import QUEUE_ROLES
from reviewer.queue.sending import SENDER_ROLES

EVERYONE = frozenset(Role)
QUEUE = frozenset(QUEUE_ROLES)
SETUP = frozenset({Role.ORG_ADMIN, Role.LEAD})

PERSON_ROUTES: dict[str, frozenset[Role]] = {
    "GET /api/v1/whoami": EVERYONE,
    "GET /api/v1/health": EVERYONE,
    "GET /api/v1/criteria/draft/writer-rules": EVERYONE,
    "GET /api/v1/criteria/{kind}": EVERYONE,
    "GET /api/v1/criteria/trials/{trial_id}": frozenset({Role.CRITERIA_ADMIN}),
    "GET /api/v1/spend": frozenset({Role.CRITERIA_ADMIN}),
    # The dashboard's figures within the person's reach, as on the page.
    "GET /api/v1/dashboard": EVERYONE,
    "GET /api/v1/dashboard/{section}": EVERYONE,
    "GET /api/v1/dashboard/compare": EVERYONE,
    "GET /api/v1/queue/service": EVERYONE,
    # The dashboard's export, within the person's reach and blind review, as the export on the page.
    "GET /api/v1/reviews/export": EVERYONE,
    "GET /api/v1/audit-events": frozenset({Role.ORG_ADMIN}),
    # A lead assigns, within the lead's reach; those who send to review on the pages send here.
    "GET /api/v1/conversations/{external_id}/assignment": frozenset({Role.LEAD}),
    "PUT /api/v1/conversations/{external_id}/assignment": frozenset({Role.LEAD}),
    "DELETE /api/v1/conversations/{external_id}/assignment": frozenset({Role.LEAD}),
    "GET /api/v1/drafts/{draft_id}/assignment": frozenset({Role.LEAD}),
    "PUT /api/v1/drafts/{draft_id}/assignment": frozenset({Role.LEAD}),
    "DELETE /api/v1/drafts/{draft_id}/assignment": frozenset({Role.LEAD}),
    "POST /api/v1/conversations/{external_id}/send-to-review": frozenset(SENDER_ROLES),
    "POST /api/v1/drafts/{draft_id}/send-to-review": frozenset(SENDER_ROLES),
    # Criteria versions read as a criteria admin reads them on the criteria pages.
    "GET /api/v1/criteria/{kind}/versions": frozenset({Role.CRITERIA_ADMIN}),
    "GET /api/v1/criteria/versions/{version_id}": frozenset({Role.CRITERIA_ADMIN}),
    "GET /api/v1/criteria/versions/{version_id}/preview": frozenset({Role.CRITERIA_ADMIN}),
    "GET /api/v1/criteria/versions/{version_id}/trial-count": frozenset({Role.CRITERIA_ADMIN}),
    "GET /api/v1/criteria/versions/{version_id}/trials": frozenset({Role.CRITERIA_ADMIN}),
    "GET /api/v1/criteria/versions/{version_id}/publish-plan": frozenset({Role.CRITERIA_ADMIN}),
    # ... and written as on them, each write audited with the person.
    "POST /api/v1/criteria/{kind}/versions": frozenset({Role.CRITERIA_ADMIN}),
    "PATCH /api/v1/criteria/versions/{version_id}": frozenset({Role.CRITERIA_ADMIN}),
    "POST /api/v1/criteria/versions/{version_id}/trials": frozenset({Role.CRITERIA_ADMIN}),
    "POST /api/v1/criteria/versions/{version_id}/publish": frozenset({Role.CRITERIA_ADMIN}),
    # Regression sets: a criteria admin's, as on the sets page (which shows no item's expected answers either).
    "POST /api/v1/sets": frozenset({Role.CRITERIA_ADMIN}),
    "GET /api/v1/sets": frozenset({Role.CRITERIA_ADMIN}),
    "DELETE /api/v1/sets/{name}": frozenset({Role.CRITERIA_ADMIN}),
    "POST /api/v1/sets/{name}/runs": frozenset({Role.CRITERIA_ADMIN}),
    "GET /api/v1/sets/{name}/runs/{run_id}": frozenset({Role.CRITERIA_ADMIN}),
    # The queue: a person's work, which an org key cannot do (reviewer/queue/api.py).
    "GET /api/v1/queue": QUEUE,
    "POST /api/v1/queue/claim-next": QUEUE,
    "POST /api/v1/queue/items/{review_id}/claim": QUEUE,
    "POST /api/v1/queue/items/{review_id}/release": QUEUE,
    "POST /api/v1/queue/items/{review_id}/decline": QUEUE,
    "POST /api/v1/queue/items/{review_id}/decision": QUEUE,
    # The set-up pages' lists and changes: an org admin's, or a lead's of the whole org. The table cannot say "of
    # the whole org", so it lets leads through and reviewer/setup/api.py `_setup_org` refuses (403) a lead of part
    # of the org, as the pages do (`setup_org_ids`).
    "GET /api/v1/setup/targets": SETUP,
    "POST /api/v1/setup/targets": SETUP,
    "PATCH /api/v1/setup/targets/{position}": SETUP,
    "DELETE /api/v1/setup/targets/{position}": SETUP,
    "POST /api/v1/setup/targets/{position}/move": SETUP,
    "GET /api/v1/setup/pools": SETUP,
    "PUT /api/v1/setup/pools/{pool}": SETUP,
    "PATCH /api/v1/setup/pools/{pool}": SETUP,
    "DELETE /api/v1/setup/pools/{pool}": SETUP,
    "GET /api/v1/setup/rules": SETUP,
    "POST /api/v1/setup/rules": SETUP,
    "PUT /api/v1/setup/rules/{position}": SETUP,
    "DELETE /api/v1/setup/rules/{position}": SETUP,
    "POST /api/v1/setup/rules/{position}/move": SETUP,
    # Spend caps: a criteria admin's, as on the spend page.
    "PUT /api/v1/spend/caps": frozenset({Role.CRITERIA_ADMIN}),
    "DELETE /api/v1/spend/caps": frozenset({Role.CRITERIA_ADMIN}),
}

_PIPELINE = "a pipeline's write of what its application produced: no page does it, and it names no person"
_BLIND = (
    "not yet for a person: the answer shows the machine's verdict, which blind review hides from people while an "
    "audit item waits; a person reads items through the queue"
)
ORG_KEY_ONLY: dict[str, str] = {
    "POST /api/v1/conversations": _PIPELINE,
    "POST /api/v1/conversations/{external_id}/messages": _PIPELINE,
    "POST /api/v1/feedback": _PIPELINE,
    "POST /api/v1/memory": _PIPELINE,
    "POST /api/v1/articles": _PIPELINE,
    "POST /api/v1/otlp/v1/traces": _PIPELINE,
    "POST /api/v1/otlp/v1/logs": _PIPELINE,
    "POST /api/v1/drafts": "not yet for a person: its answer leads to the draft's verdict (see GET /drafts/{draft_id})",
    "GET /api/v1/drafts/{draft_id}": _BLIND,
    "GET /api/v1/conversations/{external_id}": _BLIND,
    "POST /api/v1/labels": "not yet for a person: labels are recorded under the key that sent them (source, audit)",
    "POST /api/v1/erasures": "not yet for a person: an erasure is recorded under the key that asked for it",
    "GET /api/v1/erasures/{erasure_id}": "not yet for a person: with the erasures it reads",
    "GET /api/v1/sets/{name}": "not yet for a person: it lists each item's expected answers, people's verdicts that "
    "blind review keeps from other people while places are open",
    "GET /api/v1/corrections": "not yet for a person: the export reads the whole org, not a person's reach",
    "GET /api/v1/corrections/figures": "not yet for a person: the figures read the whole org, not a person's reach",
}
