"""Demo data for `make demo`. Each seeder is idempotent and takes the demo org; later capabilities
append their own seeder to SEEDERS (grading's seeders live in grading and are imported here)."""

from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from grading.criteria import criteria_active, criteria_new_version, criteria_publish, criteria_update
from grading.demo import seed_conversations, seed_drafts
from grading.models import ApiKey, CriteriaVersion, ItemKind, Org
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


# The conversation rubric's v2 says what v1 left open: an answer that only points elsewhere is not usable.
CONVERSATION_V2_USABLE = (
    "A reply that only points the user somewhere else (a link, a team, a form) without doing what was asked fails."
)
# The unpublished draft v2 an admin is working on: two more intensifiers banned and a stricter threshold.
DRAFT_V2_BANNED = ["simply", "truly"]
DRAFT_V2_THRESHOLD = 7.5


def seed_criteria(org: Org) -> None:
    """History for the criteria pages: conversation v1 published and then replaced by v2, and an unpublished draft
    v2 waiting for its preview, trial and plan. Seeded before anything is graded, so every review is under the
    active versions."""
    admin = get_user_model().objects.get(username="casey")
    conversation_v1 = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    if not CriteriaVersion.objects.filter(org=org, kind=ItemKind.CONVERSATION, number__gt=1).exists():
        v2 = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, author=admin)
        criteria_update(version=v2, actor=admin, rubric=f"{conversation_v1.rubric.rstrip()} {CONVERSATION_V2_USABLE}\n")
        criteria_publish(version=v2, actor=admin)
    draft_v1 = criteria_active(org=org, kind=ItemKind.DRAFT)
    if not CriteriaVersion.objects.filter(org=org, kind=ItemKind.DRAFT, published_at__isnull=True).exists():
        v2 = criteria_new_version(org=org, kind=ItemKind.DRAFT, author=admin)
        rules = draft_v1.draft_rules().model_dump(mode="json")
        rules["banned_words"]["terms"] += [t for t in DRAFT_V2_BANNED if t not in rules["banned_words"]["terms"]]
        rules["threshold"] = DRAFT_V2_THRESHOLD
        criteria_update(version=v2, actor=admin, rules=rules)


SEEDERS: list[Callable[[Org], None]] = [seed_people, seed_criteria, seed_conversations, seed_drafts]


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
