"""The set-up page's pools: a lead (of the whole org) or an org admin creates one with some of the org's operators
and leads, sets its members, removes it; each change `manage.py assign pool`'s (audited, with the person), each
refusal at the top and at its field, as a 4xx that writes nothing."""

import pytest
from django.urls import reverse

from grading.models import AuditEvent
from reviewer.models import AssignmentRule, Pool, Role
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db

PAGE = reverse("setup_pools")


@pytest.fixture
def lead(org):
    return make_person("lee", org, Role.LEAD)


@pytest.fixture
def team(org):
    return {name: make_person(name, org, Role.OPERATOR) for name in ("ann", "bob")}


def pools(org) -> dict[str, list[str]]:
    return {
        pool.name: sorted(member.username for member in pool.members.all())
        for pool in Pool.objects.filter(org=org).prefetch_related("members")
    }


def test_it_lets_a_lead_create_a_pool_and_set_its_members(client_for, org, lead, team):
    client = client_for(lead)
    created = client.post(PAGE, {"org": org.pk, "name": " billing ", "members": [team["ann"].pk, lead.pk]})
    assert created.status_code == 302
    assert pools(org) == {"billing": ["ann", "lee"]}
    assert "created: northwind  billing  ann, lee" in client.get(created.url).content.decode()

    assert client.post(PAGE, {"org": org.pk, "name": "billing", "members": [team["bob"].pk]}).status_code == 302
    assert pools(org) == {"billing": ["bob"]}
    events = list(AuditEvent.objects.order_by("pk"))
    assert [(event.action, event.actor_id) for event in events] == [("pool.create", lead.pk), ("pool.update", lead.pk)]
    assert events[1].detail == {"name": "billing", "before": {"members": ["ann", "lee"]}, "after": {"members": ["bob"]}}


def test_it_lets_an_org_admin_remove_a_pool_with_the_rules_naming_it(client_for, org, team):
    admin = make_person("olive", org, Role.ORG_ADMIN)
    pool = Pool.objects.create(org=org, name="billing")
    pool.members.set([team["ann"]])
    AssignmentRule.objects.create(org=org, position=1, pool=pool)
    client = client_for(admin)

    response = client.post(reverse("setup_pool_remove"), {"org": org.pk, "name": "billing"})

    assert response.status_code == 302
    assert "and 1 assignment rule naming it" in client.get(response.url).content.decode()
    assert pools(org) == {}
    assert not AssignmentRule.objects.exists()
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_id, event.detail["rules"]) == ("pool.delete", admin.pk, 1)


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"name": "  "}, "name", "name is empty: a pool needs a name"),
        ({"name": "x" * 101}, "name", "pool names are at most 100 characters"),
        ({"name": "billing", "members": ["999999"]}, "members", "Select a valid choice."),
    ],
)
def test_it_refuses_a_bad_pool_at_the_top_and_at_its_field_writing_nothing(client_for, org, lead, fields, field, says):
    response = client_for(lead).post(PAGE, {"org": org.pk, **fields})
    assert response.status_code == 400
    page = response.content.decode()
    top = page[page.index('id="form-errors"') :]
    assert says in top[: top.index("</div>")]
    assert says in page[page.index(f'id="{field}-errors"') :][:300]
    assert pools(org) == {}
    assert not AuditEvent.objects.exists()


def test_it_offers_and_takes_only_the_orgs_operators_and_leads(client_for, org, other_org, lead, team):
    stakeholder = make_person("sam", org, Role.STAKEHOLDER)
    stranger = make_person("mallory", other_org, Role.OPERATOR)
    client = client_for(lead)
    page = client.get(PAGE).content.decode()
    assert "ann" in page and "lee" in page
    assert "sam" not in page and "mallory" not in page
    for outsider in (stakeholder, stranger):
        response = client.post(PAGE, {"org": org.pk, "name": "billing", "members": [outsider.pk]})
        assert response.status_code == 400
    assert pools(org) == {}


def test_it_keeps_what_was_ticked_when_it_refuses(client_for, org, lead, team):
    response = client_for(lead).post(PAGE, {"org": org.pk, "name": " ", "members": [team["bob"].pk]})
    assert f'value="{team["bob"].pk}" checked' in response.content.decode()


def test_it_answers_another_orgs_pool_as_no_org_and_changes_nothing(client_for, org, other_org, lead):
    Pool.objects.create(org=other_org, name="theirs")
    client = client_for(lead)
    assert client.post(PAGE, {"org": other_org.pk, "name": "theirs"}).status_code == 404
    assert client.post(reverse("setup_pool_remove"), {"org": other_org.pk, "name": "theirs"}).status_code == 404
    assert pools(other_org) == {"theirs": []}
    assert not AuditEvent.objects.exists()


def test_it_refuses_to_remove_a_pool_that_is_gone(client_for, org, lead):
    response = client_for(lead).post(reverse("setup_pool_remove"), {"org": org.pk, "name": "billing"})
    assert response.status_code == 409
    assert "no pool &#x27;billing&#x27; in northwind; nothing removed" in response.content.decode()


# --- renaming -------------------------------------------------------------------------------------------------------

RENAME = reverse("setup_pool_rename")


def test_it_renames_a_pool_keeping_its_members_and_the_rules_naming_it_audited(client_for, org, lead, team):
    pool = Pool.objects.create(org=org, name="billing")
    pool.members.set([team["ann"]])
    AssignmentRule.objects.create(org=org, position=1, pool=pool)
    client = client_for(lead)

    response = client.post(RENAME, {"org": org.pk, "name": "billing", "to": " billing-emea "})

    assert response.status_code == 302
    assert "renamed: northwind  billing-emea  ann (was billing)" in client.get(response.url).content.decode()
    assert pools(org) == {"billing-emea": ["ann"]}
    assert AssignmentRule.objects.get().pool_id == pool.pk
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_id) == ("pool.rename", lead.pk)
    assert event.detail == {"before": {"name": "billing"}, "after": {"name": "billing-emea"}}


@pytest.mark.parametrize(
    ("to", "status", "says"),
    [
        ("  ", 400, "to is empty: a pool needs a name"),
        ("x" * 101, 400, "pool names are at most 100 characters"),
        ("support", 409, "northwind has a pool &#x27;support&#x27; already: choose another name"),
    ],
)
def test_it_refuses_a_bad_new_name_at_the_top_and_on_the_pools_row_writing_nothing(
    client_for, org, lead, to, status, says
):
    Pool.objects.create(org=org, name="billing")
    Pool.objects.create(org=org, name="support")
    response = client_for(lead).post(RENAME, {"org": org.pk, "name": "billing", "to": to})
    assert response.status_code == status
    page = response.content.decode()
    top = page[page.index('id="form-errors"') :]
    assert says in top[: top.index("</div>")]
    row = page[page.index('data-name="billing"') : page.index('data-name="support"')]
    assert says in row[row.index('id="to-errors"') :]
    assert pools(org) == {"billing": [], "support": []}
    assert not AuditEvent.objects.exists()


def test_it_refuses_to_rename_a_pool_that_is_gone_or_another_orgs(client_for, org, other_org, lead):
    Pool.objects.create(org=other_org, name="theirs")
    client = client_for(lead)
    gone = client.post(RENAME, {"org": org.pk, "name": "billing", "to": "emea"})
    assert gone.status_code == 409
    assert "no pool &#x27;billing&#x27; in northwind; nothing renamed" in gone.content.decode()
    assert client.post(RENAME, {"org": other_org.pk, "name": "theirs", "to": "mine"}).status_code == 404
    assert pools(other_org) == {"theirs": []}
    assert not AuditEvent.objects.exists()
