"""The services the set-up pages and the `manage.py` commands share refuse a change naming what to correct
(`ChangeRefused.field`): the page shows the refusal at that field, the command prints the same words."""

from io import StringIO

import pytest
from django.core.management import call_command

from grading.management import selectors
from grading.management.options import ChangeRefused
from grading.management.service_targets import minutes_within, target_insert
from reviewer.models import Membership, Pool, Role
from reviewer.setup.escalations import warn_minutes_checked, webhook_url_checked
from reviewer.setup.pools import pool_name, pool_set
from reviewer.setup.rules import rule_fields
from tests.builders.conversations import applications_of
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db


def refusal_of(change) -> ChangeRefused:
    with pytest.raises(ChangeRefused) as refused:
        change()
    return refused.value


@pytest.fixture
def people(org):
    """sam, a stakeholder; dee, an operator of the drafts only; the pool billing; the application billing."""
    applications_of(org, "billing")
    dee = make_person("dee")
    Membership.objects.create(user=dee, org=org, role=Role.OPERATOR, applications=[], drafts=True)
    Pool.objects.create(org=org, name="billing")
    return {"sam": make_person("sam", org, Role.STAKEHOLDER), "dee": dee}


def a_rule(org, *, selection: dict | None = None, hours=None, person=None, pool=None):
    selection = {"kind": "", "application": None, "reason": ""} | (selection or {})
    return lambda: rule_fields(org, selection=selection, hours=hours, person=person, pool=pool, warn=print)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda org, people: a_rule(org, hours=0, pool="billing"), "hours"),
        (lambda org, people: a_rule(org, pool="gone"), "pool"),
        (lambda org, people: a_rule(org, person=people["sam"]), "person"),
        # "drafts only" in the words: still the person, not the application.
        (lambda org, people: a_rule(org, selection={"application": "billing"}, person=people["dee"]), "person"),
        (lambda org, people: a_rule(org, selection={"kind": "draft", "application": "billing"}, pool="billing"),
         "application"),
        (lambda org, people: a_rule(org, selection={"application": "biling"}, pool="billing"), "application"),
        (lambda org, people: lambda: selectors.fields({"kind": "", "application": " ", "reason": ""}, what="rule"),
         "application"),
        (lambda org, people: lambda: pool_name("  "), "name"),
        (lambda org, people: lambda: pool_set(org=org, name="billing", members=[people["sam"]]), "members"),
        (lambda org, people: lambda: minutes_within(minutes=None, hours=0), "hours"),
        (lambda org, people: lambda: minutes_within(minutes=0, hours=None), "minutes"),
        (lambda org, people: lambda: target_insert(org=org, fields={"minutes": 60}, ahead_of=3), "ahead_of"),
        (lambda org, people: lambda: warn_minutes_checked(-1), "warn_minutes"),
        (lambda org, people: lambda: webhook_url_checked("http://127.0.0.1/hook"), "webhook"),
    ],
)  # fmt: skip
def test_it_names_the_field_each_refusal_is_about(org, people, change, field):
    assert refusal_of(change(org, people)).field == field


def test_it_prints_the_same_refusal_from_the_command(org, people):
    said = str(refusal_of(a_rule(org, selection={"application": "billing"}, person=people["dee"])))
    with pytest.raises(ChangeRefused) as refused:
        call_command(
            "assign", "rule", "--org", org.slug, "--application", "billing", "--person", "dee",
            stdout=StringIO(), stderr=StringIO(),
        )  # fmt: skip
    assert str(refused.value) == said and refused.value.field == "person"
