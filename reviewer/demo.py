"""Demo data for `make demo`. Each seeder is idempotent and takes the demo org; later capabilities
append their own seeder to SEEDERS (grading's seeders live in grading and are imported here)."""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from grading.demo import seed_conversations, seed_drafts
from grading.models import ApiKey, Org
from grading.services import api_key_create, api_key_revoke
from reviewer.models import Membership, Role

DEMO_ORG_SLUG = "northwind"
DEMO_KEY_NAME = "demo pipeline"


@dataclass(frozen=True)
class DemoLogin:
    username: str
    password: str
    role: str


DEMO_PEOPLE = [
    DemoLogin("dana", "demo-operator", Role.OPERATOR),
    DemoLogin("casey", "demo-criteria-admin", Role.CRITERIA_ADMIN),
    DemoLogin("sam", "demo-stakeholder", Role.STAKEHOLDER),
]


def seed_people(org: Org) -> None:
    user_model = get_user_model()
    for person in DEMO_PEOPLE:
        user, _ = user_model.objects.get_or_create(username=person.username)
        user.set_password(person.password)
        user.save()
        Membership.objects.get_or_create(user=user, org=org, role=person.role)


SEEDERS: list[Callable[[Org], None]] = [seed_people, seed_conversations, seed_drafts]


def demo_seed() -> Org:
    with transaction.atomic():
        org, _ = Org.objects.get_or_create(slug=DEMO_ORG_SLUG, defaults={"name": "Northwind"})
        for seeder in SEEDERS:
            seeder(org)
    return org


def demo_api_key(org: Org) -> str:
    """A fresh key for the demo pipeline each run: a key can only be shown when it is issued."""
    for old in ApiKey.objects.filter(org=org, name=DEMO_KEY_NAME, revoked_at=None):
        api_key_revoke(api_key=old)
    return api_key_create(org=org, name=DEMO_KEY_NAME).plaintext
