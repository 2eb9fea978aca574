"""Hostile values in every parameter and body field of every route of the OpenAPI document (issue 37, Build).

The document django-ninja serves names each route's parameters and body fields (its slots). Each route has a request
that works, on items that exist (a conversation and a draft waiting in the queue, ann in the billing pool, a trial,
an erasure); one slot of it, or a few, then get a hostile value: NUL, a lone surrogate, white space alone, overlong
text, numbers past 64 bits or JSON, times outside the years 1 to 9999 in UTC or without a zone, dates and weeks at and
past the last ones there are, values of the wrong type. Starting from a request that works is what takes a value past
validation to the code that compares, shifts and stores it, where it used to break (an assignment's end in the year
10000 was stored, and every later read of the queue failed).

Whatever is sent: no 5xx; a refusal writes nothing (the whole database, digested, before and after); and after a
write that was accepted, the route's working request still works (what was stored can be read and changed again).
Every slot meets each edge value of its kind once (the sweep), then random ones in any mix (the property test).
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.test import Client, override_settings
from django.utils import timezone
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from grading.api.keys import api_key_create
from grading.api.views import api
from grading.models import ApiKey, CriteriaTrial, Erasure, ErasureScope, ItemKind, Org, Review, ServiceTarget
from grading.reviews.versions import criteria_active, criteria_new_version
from grading.sets.build import set_build
from grading.sets.runs import set_run_start
from reviewer.models import AssignmentRule, Claim, PersonalToken, Pool, Role
from reviewer.queue.services import claim_take
from tests.builders.conversations import message, support_conversation
from tests.builders.database import database_snapshot
from tests.builders.drafts import CLEAN_BODY, SOURCE
from tests.builders.hostile_values import (
    EDGE_NUMBERS,
    EDGE_PARAMETERS,
    EDGE_TEXT,
    EDGE_TIMES,
    HOSTILE_NUMBERS,
    HOSTILE_TIMES,
    HOSTILE_WEEKS,
    any_hostile_value,
    times,
)
from tests.builders.module_world import kept_for_module
from tests.builders.people import make_person, persona_org
from tests.builders.queue_items import conversation_item, draft_item
from tests.builders.tokens import token_of

pytestmark = pytest.mark.django_db

DOCUMENT = api.get_openapi_schema()  # as served at /api/v1/openapi.json
# Asks live workers over the broker (tests/grading/passes/test_worker.py covers it end to end) and reads nothing sent.
SKIPPED = {("GET", "/api/v1/health")}
EXAMPLES = 25  # random requests per route, after the sweep

# A request per route that works: its query and JSON body (its path parameters are the world's ids).
WORKING = {
    ("GET", "/api/v1/whoami"): {},
    ("POST", "/api/v1/conversations"): {"body": support_conversation("cv-new")},
    ("POST", "/api/v1/conversations/{external_id}/messages"): {
        "body": {"messages": [message("m5", "user", "And the other order?", "m4", 9)], "closed": False}
    },
    ("GET", "/api/v1/conversations/{external_id}"): {},
    ("POST", "/api/v1/feedback"): {"body": {"conversation": "cv-1", "message_id": "m4", "value": "up"}},
    ("POST", "/api/v1/drafts"): {
        "body": {
            "external_id": "d-2",
            "title": "T",
            "slug": "t",
            "body": CLEAN_BODY,
            "source_urls": [SOURCE],
            "run_id": "run-7",
            "end_user": "u-1",
        }
    },
    ("GET", "/api/v1/drafts/{draft_id}"): {},
    ("GET", "/api/v1/criteria/draft/writer-rules"): {"query": {"format": "json"}},
    ("POST", "/api/v1/memory"): {"body": {"kind": "fact", "text": "Refunds take 5 days.", "proof_terms": ["5 days"]}},
    ("POST", "/api/v1/articles"): {"body": {"slug": "refunds", "title": "Refunds", "summary": "How they work."}},
    ("POST", "/api/v1/labels"): {
        "body": {
            "labels": [
                {
                    "item": "cv-1",
                    "kind": "conversation",
                    "check": "grounded",
                    "verdict": "fail",
                    "labeller": "ann",
                    "time": "2026-11-30T09:00:00Z",
                }
            ]
        }
    },
    # The weeks left to their defaults: the range then holds this week, whose figures read the queue as it is now,
    # and a week given alone is where the other is counted from.
    ("GET", "/api/v1/dashboard"): {"query": {"application": "billing"}},
    ("GET", "/api/v1/dashboard/{section}"): {"query": {"application": "billing"}},
    ("GET", "/api/v1/criteria/trials/{trial_id}"): {"query": {"format": "json"}},
    ("GET", "/api/v1/criteria/{kind}"): {"query": {"number": "1"}},
    ("GET", "/api/v1/spend"): {},
    ("POST", "/api/v1/otlp/v1/traces"): {"body": {"resourceSpans": []}},
    ("POST", "/api/v1/otlp/v1/logs"): {"body": {"resourceLogs": []}},
    ("GET", "/api/v1/audit-events"): {
        "query": {
            "actor": "ann",
            "api_key": "1",
            "action": "assignment",
            "object_type": "reviewer.assignment",
            "object_id": "1",
            "item_kind": "conversation",
            "item_id": "1",
            "conversation": "cv-1",
            "since": "2026-01-01",
            "until": "2026-12-31T23:00:00Z",
            "limit": "50",
            "format": "json",
        }
    },
    ("POST", "/api/v1/erasures"): {"body": {"end_user": "u-404"}},
    ("GET", "/api/v1/erasures/{erasure_id}"): {},
    ("GET", "/api/v1/conversations/{external_id}/assignment"): {},
    ("PUT", "/api/v1/conversations/{external_id}/assignment"): {
        "body": {"person": "ann", "until": "2999-01-01T09:00:00Z"}
    },
    ("DELETE", "/api/v1/conversations/{external_id}/assignment"): {},
    ("GET", "/api/v1/drafts/{draft_id}/assignment"): {},
    ("PUT", "/api/v1/drafts/{draft_id}/assignment"): {
        "body": {"pool": "billing", "until": "2999-01-01T09:00:00+05:30"}
    },
    ("DELETE", "/api/v1/drafts/{draft_id}/assignment"): {},
    ("POST", "/api/v1/conversations/{external_id}/send-to-review"): {"body": {"reason": "A customer wrote in"}},
    ("POST", "/api/v1/drafts/{draft_id}/send-to-review"): {"body": {"reason": "A customer wrote in"}},
    ("GET", "/api/v1/queue/service"): {"query": {"application": "billing"}},
    ("GET", "/api/v1/corrections"): {
        "query": {
            "from": "2026-W40",
            "application": "billing",
            "kind": "conversation",
            "state": "kept",
            "check": "grounded",
            "format": "chat",
        }
    },  # fmt: skip
    ("GET", "/api/v1/corrections/figures"): {"query": {"from": "2026-W40", "application": "billing"}},
    ("GET", "/api/v1/reviews/export"): {
        "query": {
            "format": "jsonl",
            "from": "2026-W40",
            "application": "billing",
            "kind": "any",
            "route": "human",
            "repaired": "false",
            "slice": "release=2.4",
        }
    },  # fmt: skip
    ("POST", "/api/v1/sets"): {
        "body": {"name": "refunds", "kind": "conversation", "source": "decisions", "ids": ["cv-1"]}
    },
    ("GET", "/api/v1/sets"): {},
    ("GET", "/api/v1/sets/{name}"): {},
    ("DELETE", "/api/v1/sets/{name}"): {},
    ("POST", "/api/v1/sets/{name}/runs"): {"body": {"version": 1, "min_agreement": 0.9}},
    ("GET", "/api/v1/sets/{name}/runs/{run_id}"): {},
    ("GET", "/api/v1/dashboard/compare"): {
        "query": {"dimension": "release", "a": "2.3", "b": "2.4", "application": "billing", "kind": "conversation"}
    },
    # A person's work: sent with ann's personal token; the routes after the claim find her holding the item.
    ("GET", "/api/v1/queue"): {"query": {"kind": "draft", "limit": "10"}, "as": "ann"},
    ("POST", "/api/v1/queue/claim-next"): {"query": {"kind": "draft"}, "as": "ann"},
    ("POST", "/api/v1/queue/items/{review_id}/claim"): {"as": "ann"},
    ("POST", "/api/v1/queue/items/{review_id}/release"): {"as": "ann", "claimed": True},
    ("POST", "/api/v1/queue/items/{review_id}/decline"): {"body": {"reason": "Not mine"}, "as": "ann", "claimed": True},
    ("POST", "/api/v1/queue/items/{review_id}/decision"): {
        "body": {"fingerprint": "{fingerprint}", "outcome": "approve", "note": "Reads well"},
        "as": "ann",
        "claimed": True,
    },
    # The world's unpublished conversation version; a trial from labels nobody gave is empty, so done at once.
    ("GET", "/api/v1/criteria/{kind}/versions"): {},
    ("POST", "/api/v1/criteria/{kind}/versions"): {"body": {}},
    ("GET", "/api/v1/criteria/versions/{version_id}"): {},
    ("PATCH", "/api/v1/criteria/versions/{version_id}"): {"body": {"rubric": "grounded: every claim has support."}},
    ("GET", "/api/v1/criteria/versions/{version_id}/preview"): {"query": {"n": "20"}},
    ("GET", "/api/v1/criteria/versions/{version_id}/trial-count"): {"query": {"k": "1", "source": "labels"}},
    ("GET", "/api/v1/criteria/versions/{version_id}/trials"): {},
    ("POST", "/api/v1/criteria/versions/{version_id}/trials"): {
        "body": {"k": 1, "source": "labels", "counted_calls": 0}
    },
    ("GET", "/api/v1/criteria/versions/{version_id}/publish-plan"): {},
    ("POST", "/api/v1/criteria/versions/{version_id}/publish"): {"body": {"replaces": 1, "regrade_now": False}},
    ("GET", "/api/v1/setup/targets"): {},
    ("GET", "/api/v1/setup/pools"): {},
    ("GET", "/api/v1/setup/rules"): {},
    # The world's targets and rules at 1 and 2 (audit conversations, for the billing pool: none of its items), and
    # its pool "refunds" (back before each request that names it); a rename to its own name, a move and a
    # replacement work again.
    ("POST", "/api/v1/setup/targets"): {"body": {"kind": "conversation", "reason": "audit", "minutes": 60}},
    ("PATCH", "/api/v1/setup/targets/{position}"): {"body": {"minutes": 90}},
    ("POST", "/api/v1/setup/targets/{position}/move"): {"body": {"direction": "later"}},
    ("DELETE", "/api/v1/setup/targets/{position}"): {},
    ("PUT", "/api/v1/setup/pools/{pool}"): {"body": {"members": ["bo"]}, "restores": "refunds"},
    ("PATCH", "/api/v1/setup/pools/{pool}"): {"body": {"name": "refunds"}, "restores": "refunds"},
    ("DELETE", "/api/v1/setup/pools/{pool}"): {"restores": "refunds"},
    ("POST", "/api/v1/setup/rules"): {"body": {"kind": "conversation", "reason": "audit", "pool": "billing"}},
    ("PUT", "/api/v1/setup/rules/{position}"): {"body": {"kind": "conversation", "reason": "audit", "pool": "billing"}},
    ("POST", "/api/v1/setup/rules/{position}/move"): {"body": {"direction": "later"}},
    ("DELETE", "/api/v1/setup/rules/{position}"): {},
    ("PUT", "/api/v1/spend/caps"): {"body": {"period": "day", "tokens": 10**12}},
    ("DELETE", "/api/v1/spend/caps"): {"query": {"period": "day"}},
}
ROUTES = sorted(
    (method.upper(), path)
    for path, methods in DOCUMENT["paths"].items()
    for method in methods
    if (method.upper(), path) not in SKIPPED
)
ROUTE_IDS = [f"{method} {path}" for method, path in ROUTES]


# --- the slots of a route, from the document --------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """Where a value goes: a path or query parameter by name, or a body field by its path (() is the body itself)."""

    where: str  # path | query | body
    name: tuple[str | int, ...]
    kinds: frozenset[str]  # the JSON types and formats the document says it takes

    @property
    def label(self) -> str:
        return f"{self.where} {'.'.join(map(str, self.name))}"


def _resolved(schema: dict) -> dict:
    while "$ref" in schema:
        schema = DOCUMENT["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _kinds(schema: dict) -> frozenset[str]:
    schema = _resolved(schema)
    kinds = {schema.get("type"), schema.get("format")}
    for branch in schema.get("anyOf", []):
        kinds |= _kinds(branch)
    return frozenset(kinds - {None})


def _field_slots(schema: dict, path: tuple, depth: int = 0) -> list[Slot]:
    """A body's fields, nested ones too (an array's first item stands for all of them)."""
    schema = _resolved(schema)
    slots = [Slot("body", path, _kinds(schema))]
    for branch in [schema, *map(_resolved, schema.get("anyOf", []))] if depth < 3 else []:
        for name, field in branch.get("properties", {}).items():
            slots += _field_slots(field, (*path, name), depth + 1)
        if "items" in branch:
            slots += _field_slots(branch["items"], (*path, 0), depth + 1)
    return slots


def slots_of(method: str, path: str) -> list[Slot]:
    operation = DOCUMENT["paths"][path][method.lower()]
    slots = [Slot(p["in"], (p["name"],), _kinds(p.get("schema", {}))) for p in operation.get("parameters", [])]
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    return slots + (_field_slots(body["schema"], ()) if body else [])


def edge_values(slot: Slot) -> list:
    """The values each slot meets in the sweep: hostile text, and the edges of the kind it takes."""
    values = list(EDGE_TEXT)
    if "date-time" in slot.kinds:
        values += EDGE_TIMES
    if slot.kinds & {"integer", "number"}:
        values += EDGE_NUMBERS
    if slot.where == "body":
        values += [None, {"a": 1}] if slot.kinds != {"null"} else []
    else:  # a parameter is text, whatever it means: a week, a date, a time, an id or a number
        values += EDGE_PARAMETERS
    return values


def hostile_for(slot: Slot) -> st.SearchStrategy:
    """Mostly what is hostile to the kind the slot takes; as often, anything at all."""
    if "date-time" in slot.kinds:
        typed = st.one_of(st.sampled_from(HOSTILE_TIMES), times.map(lambda moment: moment.isoformat()))
    elif slot.kinds & {"integer", "number"}:
        typed = st.sampled_from(HOSTILE_NUMBERS)
    else:
        typed = st.sampled_from([*EDGE_TEXT, *HOSTILE_WEEKS, *HOSTILE_TIMES])
    return st.one_of(typed, any_hostile_value)


# --- the world the requests reach, and sending ------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    path_parameters: dict
    query: dict
    body: object  # None: no body
    token: str = ""  # a person's token, sent instead of the org key

    def with_value(self, slot: Slot, value) -> "Request":
        if slot.where == "path":
            return replace(self, path_parameters=self.path_parameters | {slot.name[0]: value})
        if slot.where == "query":
            return replace(self, query=self.query | {slot.name[0]: value})
        return replace(self, body=_placed(self.body, slot.name, value))


def _placed(body, name: tuple, value):
    """A copy of `body` with `value` at the field path `name`, making the objects and arrays on the way."""
    if not name:
        return value
    head, rest = name[0], name[1:]
    if isinstance(head, int):
        items = list(body) if isinstance(body, list) and body else [{}]
        items[0] = _placed(items[0], rest, value)
        return items
    fields = dict(body) if isinstance(body, dict) else {}
    fields[head] = _placed(fields.get(head), rest, value)
    return fields


def _wire(value) -> str:
    """A parameter as a client writes it in a URL; a lone surrogate as the bytes a careless encoder makes of it."""
    text = value if isinstance(value, str) else json.dumps(value)
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


@dataclass
class World:
    client: Client
    key: str
    ids: dict  # path parameter -> the id of an item that exists
    org: Org
    ann: AbstractBaseUser  # an operator, whose token does a person's work
    tokens: dict  # persona -> a personal token
    # Items ann held and then decided or gave back: a request naming one is sent to the item she holds now.
    given_back: set = dataclass_field(default_factory=set)

    def working(self, method: str, path: str) -> Request:
        request = WORKING[(method, path)]
        parameters = {name: self.ids[name] for name in self.ids if f"{{{name}}}" in path}
        body = request.get("body")
        if isinstance(body, dict) and body.get("fingerprint") == "{fingerprint}":
            body = body | {"fingerprint": Review.objects.get(pk=self.ids["review_id"]).fingerprint}
        token = self.tokens.get(request.get("as", ""), "")
        return Request(method, path, parameters, dict(request.get("query", {})), body, token)

    def prepare(self, request: Request) -> Request:
        """Before a request that needs ann holding the item: she holds it (a claim taken or renewed), or, once it
        was decided or given back, a new item she holds, which the request names in place of the old one. And
        the pool a request names is there again after a rename or delete took it away."""
        if (pool := WORKING[(request.method, request.path)].get("restores")) is not None:
            Pool.objects.get_or_create(org=self.org, name=pool)
        if not WORKING[(request.method, request.path)].get("claimed"):
            return request
        held = self.ids["review_id"]
        if not Claim.objects.filter(review_id=held, holder=self.ann, ended_at__isnull=True).exists():
            if Claim.objects.filter(review_id=held, holder=self.ann).exists():  # decided, declined or released
                self.given_back.add(held)
                self.ids["review_id"] = draft_item(self.org, f"d-held-{len(self.given_back)}").pk
            claim_take(user=self.ann, review_id=self.ids["review_id"])
        named = request.path_parameters.get("review_id")
        if not isinstance(named, int) or named not in self.given_back:  # not the world's item: a hostile value
            return request
        fresh = self.working(request.method, request.path)
        body, stale = request.body, Review.objects.get(pk=request.path_parameters["review_id"]).fingerprint
        if isinstance(body, dict) and body.get("fingerprint") == stale:  # the item's, not a hostile value
            body = body | {"fingerprint": fresh.body["fingerprint"]}
        return replace(request, path_parameters=fresh.path_parameters, body=body)

    def send(self, request: Request):
        url = request.path.format(**{name: _wire(value) for name, value in request.path_parameters.items()})
        query = "&".join(f"{_wire(name)}={_wire(value)}" for name, value in request.query.items())
        extra = {"HTTP_AUTHORIZATION": f"Bearer {request.token or self.key}", "QUERY_STRING": query}
        if request.body is None:
            return self.client.generic(request.method, url, **extra)
        # json.dumps writes a lone surrogate as \ud800, NaN and 1e400 as the bare tokens a careless client sends.
        return self.client.generic(request.method, url, json.dumps(request.body), "application/json", **extra)

    def check(self, request: Request, working: Request) -> int:
        """Send `request`: no 5xx; a refusal wrote nothing; after an accepted one, `working` still works."""
        request = self.prepare(request)
        before = database_snapshot()
        response = self.send(request)
        assert response.status_code < 500, (request, response.content[:500])
        if response.status_code >= 400:
            assert database_snapshot() == before, (request, response.content[:500])
        elif request != working:
            again = self.send(self.prepare(working))
            assert again.status_code < 400, (request, "then the working request answered", again.content[:500])
        return response.status_code


@dataclass(frozen=True)
class WorldRows:
    """What the module's world is made of, by id: each test reads it afresh (`world`)."""

    org_id: int
    ann_id: int
    key: str
    ids: dict
    tokens: dict


@pytest.fixture(scope="module")
def _world_built(django_db_setup, django_db_blocker) -> Iterator[WorldRows]:
    """An org's key and what its routes find: a conversation and a draft waiting, ann (an operator) and the billing
    pool, a criteria trial, an unpublished conversation version, an erasure, a regression set with a run, and a draft
    ann holds. Made once for the module's tests (`kept_for_module`: what a request wrote is gone before the next
    test). Making it for every test was about a seventh of the module's time."""
    with kept_for_module(django_db_blocker):
        org = persona_org(dimensions=["release"])  # the comparison's
        ann = make_person("ann", org, Role.OPERATOR)
        Pool.objects.create(org=org, name="billing").members.add(make_person("bo", org, Role.OPERATOR))
        conversation = conversation_item(org, "cv-1").conversation
        draft = draft_item(org, "d-1").draft
        version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
        trial = CriteriaTrial.objects.create(
            org=org, criteria_version=version, sample=[], judge_calls=0, review_ids=[], finished_at=timezone.now()
        )
        erasure = Erasure.objects.create(
            org=org, scope=ErasureScope.DRAFT, kind=ItemKind.DRAFT, target="gone", requested_at=timezone.now()
        )
        regression_set = set_build(
            org=org, name="refunds", kind="conversation", source="decisions", external_ids=["cv-1"]
        )
        run = set_run_start(regression_set=regression_set, version=criteria_active(org=org, kind=ItemKind.CONVERSATION))
        held = draft_item(org, "d-held")
        unpublished = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
        ids = {"external_id": conversation.external_id, "draft_id": draft.pk, "trial_id": trial.pk,
               "erasure_id": erasure.pk, "section": "quality", "kind": "conversation", "name": regression_set.name,
               "run_id": run.pk, "review_id": held.pk, "version_id": unpublished.pk}  # fmt: skip
        ids["position"] = 1  # of the targets and the rules set up here
        billing = Pool.objects.get(org=org, name="billing")
        ids["pool"] = Pool.objects.create(org=org, name="refunds").name
        for position in (1, 2):
            ServiceTarget.objects.create(org=org, position=position, kind="conversation", reason="audit", minutes=60)
            AssignmentRule.objects.create(org=org, position=position, kind="conversation", reason="audit", pool=billing)
        key = api_key_create(org=org, name="hostile").plaintext
        yield WorldRows(org.pk, ann.pk, key, ids, {"ann": token_of(ann, org)})


@pytest.fixture
def world(_world_built: WorldRows, db, client) -> Iterator[World]:
    """The module's world, read afresh for the test. A trial starts for every request to start one that is
    accepted: the org's hourly limit of trials would refuse the working request after ten."""
    rows = _world_built
    org, ann = Org.objects.get(pk=rows.org_id), get_user_model().objects.get(pk=rows.ann_id)
    with override_settings(CRITERIA_TRIALS_PER_ORG_PER_HOUR=10_000):
        yield World(client, rows.key, dict(rows.ids), org, ann, dict(rows.tokens))


# --- the tests ---------------------------------------------------------------------------------------------------


def test_every_route_of_the_document_has_a_request_that_works():
    """What the other tests start from (each checks that it works): a new route needs its request in WORKING."""
    assert sorted(WORKING) == ROUTES


def test_the_digest_sees_a_changed_field_but_not_a_credentials_last_use(world):
    """What "a refusal writes nothing" is checked by: a field changed changes the digest, and changed back restores
    it; moving a key's or a token's last use does not change it (any authenticated call may)."""
    before = database_snapshot()
    ApiKey.objects.filter(org=world.org).update(last_used_at=timezone.now())
    PersonalToken.objects.filter(org=world.org).update(last_used_at=timezone.now())
    assert database_snapshot() == before
    ServiceTarget.objects.filter(org=world.org, position=2).update(minutes=61)
    assert database_snapshot() != before
    ServiceTarget.objects.filter(org=world.org, position=2).update(minutes=60)
    assert database_snapshot() == before


@pytest.mark.slow
@pytest.mark.parametrize(("method", "path"), ROUTES, ids=ROUTE_IDS)
def test_each_slot_meets_each_edge_value_without_a_5xx_and_a_refusal_writes_nothing(world, method, path):
    working = world.working(method, path)
    response = world.send(world.prepare(working))
    assert response.status_code < 300, ("the working request", response.content[:500])
    for slot in slots_of(method, path):
        for value in edge_values(slot):
            world.check(working.with_value(slot, value), working)


@pytest.mark.slow
@pytest.mark.parametrize(("method", "path"), ROUTES, ids=ROUTE_IDS)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_values_in_any_mix_of_slots_answer_no_5xx_and_a_refusal_writes_nothing(world, method, path, data):
    working = world.working(method, path)
    slots = slots_of(method, path)
    request = working
    for slot in data.draw(st.lists(st.sampled_from(slots), min_size=1, max_size=3, unique=True)) if slots else []:
        event(f"hostile {slot.label}")
        request = request.with_value(slot, data.draw(hostile_for(slot)))
    event(f"answered {world.check(request, working)}")
