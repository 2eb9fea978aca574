"""Demo data for `make demo`. Each seeder is idempotent and takes the demo org; later capabilities
append their own seeder to SEEDERS (grading's seeders live in grading and are imported here)."""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from grading.api.keys import api_key_create, api_key_revoke
from grading.checks.definitions import AnswerKind, CheckDefinition
from grading.core.outcomes import UNKNOWN_CHECK
from grading.dashboard.sampling import audit_sample_send
from grading.demo import grade_demo_items, seed_certification, seed_conversations, seed_drafts, seed_labels
from grading.figures.definitions import PASS_FAIL
from grading.models import (
    ApiKey,
    CriteriaVersion,
    Decision,
    Draft,
    ItemKind,
    Org,
    Review,
    Route,
    ServiceTarget,
    SlotsFor,
    SpendCap,
)
from grading.reviews.examples import ExampleRefused, criteria_example_add
from grading.reviews.reads import review_slots
from grading.reviews.rollups import rollups_rebuild
from grading.reviews.services import PersonVerdict
from grading.reviews.spend import spend_cap_set
from grading.reviews.targets import due_times_refresh
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish, criteria_update
from reviewer.models import AssignmentRule, Escalation, Membership, Pool, Role
from reviewer.queue.services import claim_take, decision_create

DEMO_ORG_SLUG = "northwind"
DEMO_KEY_NAME = "demo pipeline"


@dataclass(frozen=True)
class DemoLogin:
    username: str
    password: str
    role: str
    applications: tuple[str, ...] | None = None  # a membership limited to these applications (and no drafts)


DEMO_PEOPLE = [
    DemoLogin("dana", "demo-operator", Role.OPERATOR),
    DemoLogin("casey", "demo-criteria-admin", Role.CRITERIA_ADMIN),
    DemoLogin("sam", "demo-stakeholder", Role.STAKEHOLDER),
    # Two people answer each audited conversation (the active conversation criteria ask two): ravi beside dana,
    # and kim, who answers nothing and so may adjudicate where they differ.
    DemoLogin("ravi", "demo-operator-2", Role.OPERATOR),
    DemoLogin("kim", "demo-operator-3", Role.OPERATOR),
    # A billing team's operator: her queue, dashboard, lists and exports hold the billing assistant alone.
    DemoLogin("lin", "demo-billing", Role.OPERATOR, applications=("billing-assistant",)),
    # A lead: works the queue, and assigns its items (the billing team's pool takes the billing assistant's unsure
    # conversations first, by rule).
    DemoLogin("lee", "demo-lead", Role.LEAD),
    # An org admin: members and their roles, API keys, the webhook secret, retention, erasure, the audit trail.
    DemoLogin("ada", "demo-org-admin", Role.ORG_ADMIN),
]
BILLING_TEAM = ("dana", "lin")


def seed_people(org: Org) -> None:
    user_model = get_user_model()
    for person in DEMO_PEOPLE:
        user, _ = user_model.objects.get_or_create(username=person.username)
        user.set_password(person.password)
        user.save()
        applications = list(person.applications) if person.applications is not None else None
        reach = {"applications": applications, "drafts": applications is None}
        Membership.objects.update_or_create(user=user, org=org, role=person.role, defaults=reach)


# The conversation rubric's v2 says what v1 left open: an answer that only points elsewhere is not usable.
CONVERSATION_V2_USABLE = (
    "A reply that only points the user somewhere else (a link, a team, a form) without doing what was asked fails."
)
# The unpublished conversation v3 an admin is working on: a check of the team's own, which a phrase in a reply fails
# before the judge is asked, and the intent of each conversation, counted and shown (it routes nothing).
CONVERSATION_V3_CHECKS = [
    {
        "key": "cites_policy",
        "name": "Cites the policy",
        "question": "When the assistant promises the user something (a refund, a credit, a date), does it name the "
        "policy or the tool result that allows it?",
        "guidance": {
            "pass": "Every promise names the policy or the tool result behind it, or nothing is promised.",
            "fail": "Something is promised that no policy or tool result in the conversation allows.",
            "unknown": "The policy that applies cannot be told from the conversation.",
        },
        "rules": [
            {
                "kind": "phrases",
                "phrases": ["will be applied within", "guaranteed"],
                "scopes": ["assistant"],
                "sets": "fail",
                "note": "A promise of a date or an outcome is the policy's to make, never the assistant's.",
            }
        ],
    },
    {
        "key": "intent",
        "name": "Intent",
        "question": "What did the user come for?",
        "kind": "category",
        "categories": ["refund", "plan_question", "docs_question", "other"],
        "guidance": {"other": "Anything else, or more than one of these."},
        "required": False,
    },
]
# The unpublished draft v2 an admin is working on: two more intensifiers banned and a stricter threshold.
DRAFT_V2_BANNED = ["simply", "truly"]
DRAFT_V2_THRESHOLD = 7.5


def seed_criteria(org: Org) -> None:
    """History for the criteria pages: conversation v1 published and then replaced by v2, an unpublished conversation
    v3 asking two checks of the team's own, and an unpublished draft v2 waiting for its preview, trial and plan.
    Seeded before anything is graded, so every review is under the active versions."""
    admin = get_user_model().objects.get(username="casey")
    conversation_v1 = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    if not CriteriaVersion.objects.filter(org=org, kind=ItemKind.CONVERSATION, number__gt=1).exists():
        v2 = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, author=admin)
        criteria_update(
            version=v2,
            actor=admin,
            rubric=f"{conversation_v1.rubric.rstrip()} {CONVERSATION_V2_USABLE}\n",
            slots=2,
            slots_for=SlotsFor.AUDIT,
        )
        criteria_publish(version=v2, actor=admin)
    if not CriteriaVersion.objects.filter(org=org, kind=ItemKind.CONVERSATION, published_at__isnull=True).exists():
        v3 = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, author=admin)
        checks = v3.check_set().model_dump(mode="json")
        checks["checks"] += CONVERSATION_V3_CHECKS
        criteria_update(version=v3, actor=admin, checks=checks)
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
    rebuilt. Audited conversations ask two people: ravi answers them too, kim adjudicates half of the items they
    split on (the rest await adjudication), and on the rest of the audit sample ravi's answer waits for dana's.
    Whatever is not decided waits in the queue, blind. Then certified decisions (`seed_certification`)."""
    grade_demo_items(org)
    audit_sample_send(org=org, per_week=1, weeks=8, salt=settings.SAMPLING_SALT)
    dana, ravi, kim = (get_user_model().objects.get(username=name) for name in ("dana", "ravi", "kim"))
    to_decide, second_only = [], []
    for kind in ItemKind.values if not Decision.objects.filter(org=org).exists() else ():  # decided once
        waiting = list(Review.objects.waiting().filter(org=org, kind=kind).order_by("pk"))
        audit, unsure = [r for r in waiting if r.audit], [r for r in waiting if not r.audit]
        decided = -(-len(audit) * 2 // 3)  # two thirds and a half, rounded up
        to_decide += audit[:decided] + unsure[::2]
        second_only += audit[decided:]
    for index, review in enumerate(to_decide):
        _demo_answer(dana, review, _demo_verdict(review, disagree=index % 4 == 3))
        if review_slots(review) > 1:
            _demo_answer(ravi, review, _demo_verdict(review, disagree=index % 3 == 1))
            if index % 2 and not Decision.objects.filter(review=review).exists():  # kim settles half the splits
                _demo_answer(kim, review, _demo_verdict(review, disagree=False, note="The tool result decides it."))
    for review in second_only:  # ravi answered first: dana's place is open, and she answers blind
        if review_slots(review) > 1:
            _demo_answer(ravi, review, _demo_verdict(review, disagree=False))
    seed_labels(org)
    seed_certification(org)
    rollups_rebuild(org_id=org.pk)


def _demo_answer(person, review: Review, verdict: PersonVerdict) -> None:
    claim_take(user=person, review_id=review.pk)
    decision_create(user=person, review_id=review.pk, fingerprint=review.fingerprint, verdict=verdict)


def _demo_verdict(review: Review, *, disagree: bool, note: str = "Checked against the tool results.") -> PersonVerdict:
    if review.kind == ItemKind.DRAFT:
        approve = (review.route == Route.PASS or (review.route == Route.HUMAN and review.judge_passed)) != disagree
        return PersonVerdict(outcome="approve" if approve else "reject", note=note)
    # The machine's answer to each check its version asks; where it said unknown, the person reads a pass.
    checks = {}
    for check in review.criteria_version.check_set().checks:
        said = str((review.checks.get(check.key) or {}).get("verdict", "unknown"))
        checks[check.key] = said if said != "unknown" else _passing_answer(check)
    if disagree and "grounded" in checks:
        checks["grounded"] = "fail" if checks["grounded"] == "pass" else "pass"
    return PersonVerdict(checks=checks, note=note)


def _passing_answer(check: CheckDefinition) -> str:
    if check.kind == AnswerKind.CATEGORY:
        return (check.passing or check.categories)[0]
    if check.kind == AnswerKind.SCORE:
        return str(check.pass_from or check.scale)
    return "pass"


DEMO_DAY_CAP_TOKENS = 2_000_000


def seed_judging(org: Org) -> None:
    """The loop from people's verdicts to a better judge, started: draft v2 holds as a worked example the first
    draft dana decided, and the org's judge spend is capped per day (the spend page and the dashboard show it
    against the spend)."""
    admin = get_user_model().objects.get(username="casey")
    draft_v2 = CriteriaVersion.objects.filter(org=org, kind=ItemKind.DRAFT, published_at__isnull=True).first()
    if draft_v2 is not None and not draft_v2.examples.exists():
        decided = Review.objects.counting().filter(org=org, kind=ItemKind.DRAFT, decision__isnull=False)
        for draft in Draft.objects.filter(pk__in=decided.values("draft_id")).order_by("pk"):
            try:
                criteria_example_add(version=draft_v2, subject=draft, check=PASS_FAIL, actor=admin)
            except ExampleRefused:  # too long to quote in every prompt: the next one
                continue
            break
    if not SpendCap.objects.filter(org=org).exists():
        spend_cap_set(org=org, version=None, period="day", tokens=DEMO_DAY_CAP_TOKENS, cost_micros=None, actor=admin)


def seed_targets(org: Org) -> None:
    """Drafts are decided within an hour (a pipeline waits on each), conversations within a day; lee hears of them
    a quarter of an hour ahead."""
    for position, (kind, minutes) in enumerate(((ItemKind.DRAFT, 60), (ItemKind.CONVERSATION, 24 * 60)), start=1):
        ServiceTarget.objects.update_or_create(org=org, position=position, defaults={"kind": kind, "minutes": minutes})
    due_times_refresh(org.pk)
    Escalation.objects.get_or_create(org=org, defaults={"warn_minutes": 15, "swept_until": timezone.now()})
    get_user_model().objects.filter(username="lee", email="").update(email="lee@northwind.example")


def seed_assignment(org: Org) -> None:
    """The billing team's pool, and a rule: the billing assistant's unknown checks are theirs for four hours."""
    pool, _ = Pool.objects.get_or_create(org=org, name="billing team")
    pool.members.set(get_user_model().objects.filter(username__in=BILLING_TEAM))
    rule = {"application": "billing-assistant", "reason": UNKNOWN_CHECK, "pool": pool, "hours": 4}
    AssignmentRule.objects.update_or_create(org=org, position=1, defaults=rule)


SEEDERS: list[Callable[[Org], None]] = [
    seed_people,
    seed_assignment,
    seed_criteria,
    seed_conversations,
    seed_drafts,
    seed_review_history,
    seed_judging,
    seed_targets,
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
