"""Demo data for `make demo`. Each seeder is idempotent and takes the demo org; later capabilities
append their own seeder to SEEDERS (grading's seeders live in grading and are imported here)."""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from grading.api.keys import api_key_create, api_key_revoke
from grading.criteria.versions import criteria_active, criteria_new_version, criteria_publish, criteria_update
from grading.demo import grade_demo_items, seed_conversations, seed_drafts, seed_labels
from grading.figures.rollups import rollups_rebuild
from grading.figures.sampling import audit_sample_send
from grading.models import ApiKey, CriteriaVersion, Decision, ItemKind, Org, Review, Route
from grading.outcomes import CHECKS
from reviewer.models import Membership, Role
from reviewer.queue.services import claim_take, decision_create

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


def seed_review_history(org: Org) -> None:
    """What the dashboard reads besides the machine's verdicts: everything graded (with the demo judges), the
    review cycle's audit sample sent to the queue, two thirds of it and half of the unsure items decided by the
    demo operator (who now and then disagrees with the machine), labels from a spreadsheet; then the rollups
    rebuilt. The rest of the audit sample waits in the queue, blind."""
    grade_demo_items(org)
    audit_sample_send(org=org, per_week=1, weeks=8, salt=settings.SAMPLING_SALT)
    operator = get_user_model().objects.get(username=DEMO_PEOPLE[0].username)
    to_decide = []
    for kind in ItemKind.values if not Decision.objects.filter(org=org).exists() else ():  # decided once
        waiting = list(Review.objects.waiting().filter(org=org, kind=kind).order_by("pk"))
        audit, unsure = [r for r in waiting if r.audit], [r for r in waiting if not r.audit]
        to_decide += audit[: -(-len(audit) * 2 // 3)] + unsure[::2]  # two thirds and a half, rounded up
    for index, review in enumerate(to_decide):
        claim_take(user=operator, org_ids=[org.pk], review_id=review.pk)
        verdict = _demo_verdict(review, disagree=index % 4 == 3)
        note = "Checked against the tool results."
        decision_create(
            user=operator, org_ids=[org.pk], review_id=review.pk, fingerprint=review.fingerprint, note=note, **verdict
        )
    seed_labels(org)
    rollups_rebuild(org_id=org.pk)


def _demo_verdict(review: Review, *, disagree: bool) -> dict:
    if review.kind == ItemKind.DRAFT:
        approve = (review.route == Route.PASS or (review.route == Route.HUMAN and review.judge_passed)) != disagree
        return {"outcome": "approve" if approve else "reject"}
    checks = {name: (review.checks.get(name) or {}).get("verdict", "unknown") for name in CHECKS}
    checks = {name: "pass" if verdict == "unknown" else verdict for name, verdict in checks.items()}
    if disagree:
        checks["grounded"] = "fail" if checks["grounded"] == "pass" else "pass"
    return {"checks": checks}


SEEDERS: list[Callable[[Org], None]] = [
    seed_people,
    seed_criteria,
    seed_conversations,
    seed_drafts,
    seed_review_history,
]


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
