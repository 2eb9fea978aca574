"""An org with an item in each state of blind review, and words planted in what the machine and each person said,
so a page that shows what it must not is caught by plain text (tests/reviewer/test_blind_review.py).

Audit items are decided by two people (`SlotsFor.AUDIT`):
- `open`: an audit conversation nobody answered;
- `half`: an audit conversation ann answered twice (her answer and the one it replaced), a place still open, with
  her expected reply at m4;
- `split`: an audit conversation ann and bo answered differently: it waits for its adjudication (the answers and
  ann's expected reply are shown now, the machine's verdicts not yet);
- `agreed`: an audit conversation ann and bo answered alike: decided, nothing hidden any more;
- `draft`: an audit draft nobody answered.
"""

from dataclasses import dataclass, field

from grading.checks.definitions import CONVERSATION_DEFAULTS
from grading.models import CriteriaVersion, ItemKind, Review, SlotsFor
from grading.reviews.services import PersonVerdict
from grading.reviews.versions import criteria_active
from reviewer.models import Role
from reviewer.queue.services import claim_take, decision_create
from tests.builders.conversations import PATH_IDS
from tests.builders.expected_replies import expected_reply_write
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

CHECKS = CONVERSATION_DEFAULTS.keys  # what a version asks that names no checks of its own

ALL_PASS = dict.fromkeys(CHECKS, "pass")


def machine_said(tag: str) -> str:
    return f"MACHINE-SAID-{tag.upper()}"


def answer_note(person: str, tag: str) -> str:
    return f"{person.upper()}-NOTE-{tag.upper()}"


def expected_reply(person: str, tag: str) -> str:
    return f"{person.upper()}-EXPECTED-{tag.upper()}"


REPLACED_NOTE = "ANN-EARLIER-NOTE-HALF"


@dataclass
class BlindWorld:
    org: object
    reviews: dict[str, Review]
    people: dict[str, object]
    # What must not be shown to a reader while the items are as built: planted words -> who may see them anyway.
    hidden: dict[str, set[str]] = field(default_factory=dict)
    # What must be shown somewhere (the walk's proof that it would see a leak): planted words.
    shown: set[str] = field(default_factory=set)


def _answer(person, review: Review, checks: dict, note: str) -> None:
    claim_take(user=person, review_id=review.pk)
    decision_create(
        user=person,
        review_id=review.pk,
        fingerprint=review.fingerprint,
        verdict=PersonVerdict(checks=checks, note=note),
    )


def _audit_conversation(org, tag: str) -> Review:
    checks = {
        name: {"verdict": "unknown" if name == "complete" else "pass", "message_ids": PATH_IDS,
               "rationale": f"{machine_said(tag)} {name}"}
        for name in CHECKS
    }  # fmt: skip
    review = conversation_item(org, f"cv-{tag}", checks=checks)
    Review.objects.filter(pk=review.pk).update(audit=True, reason=f"reason-{tag}")
    return Review.objects.get(pk=review.pk)


def blind_world(org) -> BlindWorld:
    for kind in ItemKind.values:
        criteria_active(org=org, kind=kind)
    CriteriaVersion.objects.filter(org=org, is_active=True).update(slots=2, slots_for=SlotsFor.AUDIT)
    people = {
        "ann": make_person("ann", org, Role.OPERATOR),
        "bo": make_person("bo", org, Role.OPERATOR),
        "carl": make_person("carl", org, Role.OPERATOR),  # the adjudicator-to-be: gave no answer anywhere
        "lee": make_person("lee", org, Role.LEAD),
        "sam": make_person("sam", org, Role.STAKEHOLDER),
        # Reads every page of the org: the criteria pages, the audit trail, the dashboard.
        "ada": make_person("ada", org, Role.CRITERIA_ADMIN, Role.ORG_ADMIN, Role.STAKEHOLDER),
    }
    reviews = {tag: _audit_conversation(org, tag) for tag in ("open", "half", "split", "agreed")}
    draft = draft_item(
        org, "draft-blind", audit=True, reason="reason-draft",
        judge_issues=[{"issue": machine_said("draft"), "fix": "Answer first."}],
        findings=[{"code": "banned_word", "message": machine_said("draft-finding"), "severity": "hard", "spans": [],
                   "subject": "delve"}],
    )  # fmt: skip
    reviews["draft"] = draft
    ann, bo = people["ann"], people["bo"]
    expected_reply_write(ann, reviews["half"], "m4", expected_reply("ann", "half"))
    _answer(ann, reviews["half"], ALL_PASS, REPLACED_NOTE)
    _answer(ann, reviews["half"], ALL_PASS | {"usable": "fail"}, answer_note("ann", "half"))
    expected_reply_write(ann, reviews["split"], "m4", expected_reply("ann", "split"))
    _answer(ann, reviews["split"], ALL_PASS, answer_note("ann", "split"))
    _answer(bo, reviews["split"], ALL_PASS | {"grounded": "fail"}, answer_note("bo", "split"))
    _answer(ann, reviews["agreed"], ALL_PASS, answer_note("ann", "agreed"))
    _answer(bo, reviews["agreed"], ALL_PASS, answer_note("bo", "agreed"))
    nobody: set[str] = set()
    hidden = {machine_said(tag): nobody for tag in ("open", "half", "split", "draft", "draft-finding")}
    hidden |= {f"reason-{tag}": nobody for tag in ("open", "half", "split", "draft")}
    hidden |= {answer_note("ann", "half"): {"ann"}, REPLACED_NOTE: {"ann"}, expected_reply("ann", "half"): {"ann"}}
    shown = {machine_said("agreed"), "reason-agreed", answer_note("ann", "split"), answer_note("bo", "split")}
    shown |= {expected_reply("ann", "split")}
    return BlindWorld(org=org, reviews=reviews, people=people, hidden=hidden, shown=shown)
