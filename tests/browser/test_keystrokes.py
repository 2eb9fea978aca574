"""The key map, counted: the demo's ten most common decisions (tallied from the demo's seeded answers and decisions:
conversations answered pass/pass/pass, with one or two checks failed, one adjudicated, a draft rejected) made with
the keyboard alone, one after another as the next item opens by itself, and the keys each took. A note's own text
is typed and not counted; everything else is a key press. Not a test of time."""

import pytest

from grading.models import Decision, ItemKind, SlotsFor
from reviewer.models import Role
from tests.builders.browser import sign_in
from tests.builders.conversations import PATH_IDS, verdicts
from tests.builders.people import PASSWORD, make_person
from tests.builders.queue_items import conversation_item, draft_item, item_answer, slots_ask

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHECKS = ("grounded", "complete", "usable")
KEYS = {"pass": "p", "fail": "f"}
# In the order claim next hands them out (drafts first, then the oldest): what the person decides, and the keys the
# key map asks for it. A conversation: a key per check, Ctrl+Enter from the note. The adjudication: only the check
# the answers differ on (the form starts from what they agree on). The draft: r asks for the note, Ctrl+Enter gives it.
CONVERSATIONS = [
    ("pass", "pass", "pass"),
    ("pass", "fail", "pass"),
    ("fail", "pass", "pass"),
    ("fail", "pass", "fail"),
    ("pass", "pass", "pass"),
    ("pass", "pass", "fail"),
    ("fail", "pass", "pass"),
    ("fail", "fail", "pass"),
]
EXPECTED_KEYS = {"draft reject": 2, **{f"conversation {n}": 4 for n in range(len(CONVERSATIONS))}, "adjudication": 2}


def test_the_ten_most_common_decisions_take_the_keys_the_key_map_promises(browser, live_server, org, operator):
    slots_ask(org, ItemKind.CONVERSATION, 2, SlotsFor.AUDIT)  # the audit sample asks two people, as in the demo
    draft = draft_item(org, "reject-me", minutes_ago=5)
    conversations = [
        conversation_item(org, f"cv-{n}", minutes_ago=200 - n) for n in range(len(CONVERSATIONS))
    ]  # oldest first
    split = conversation_item(org, "cv-split", minutes_ago=10, checks=verdicts(PATH_IDS, complete="unknown"))
    split.audit = True
    split.save(update_fields=["audit"])
    ann, bob = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bob"))
    item_answer(ann, split, checks={"grounded": "pass", "complete": "pass", "usable": "pass"}, note="fine")
    item_answer(bob, split, checks={"grounded": "pass", "complete": "fail", "usable": "pass"}, note="not all")

    tab = browser.new_context(base_url=live_server.url).new_page()
    tab.console_errors = []
    tab.on("console", lambda message: message.type == "error" and tab.console_errors.append(message.text))
    pressed: dict[str, int] = {}

    def press(decision: str, key: str) -> None:
        pressed[decision] = pressed.get(decision, 0) + 1
        tab.keyboard.press(key)

    try:
        sign_in(tab, operator.username, PASSWORD)
        tab.wait_for_url("**/queue/")
        tab.keyboard.press("n")  # the one key that starts the run: every next item opens by itself
        tab.wait_for_url(f"**/queue/items/{draft.pk}/")
        press("draft reject", "r")
        tab.keyboard.type("Cite the source for the 41% figure.")
        press("draft reject", "Control+Enter")
        for n, (review, answers) in enumerate(zip(conversations, CONVERSATIONS, strict=True)):
            tab.wait_for_url(f"**/queue/items/{review.pk}/")
            for answer in answers:
                press(f"conversation {n}", KEYS[answer])
            tab.keyboard.type("Read against the tool results.")
            press(f"conversation {n}", "Control+Enter")
        tab.wait_for_url(f"**/queue/items/{split.pk}/")
        press("adjudication", "p")  # complete: the one check the answers differ on
        tab.keyboard.type("The tool result shows the refund was made.")
        press("adjudication", "Control+Enter")
        tab.wait_for_url("**/queue/")
    finally:
        tab.context.close()

    assert pressed == EXPECTED_KEYS
    assert Decision.objects.get(review=draft).outcome == "reject"
    for review, answers in zip(conversations, CONVERSATIONS, strict=True):
        assert Decision.objects.get(review=review).checks == dict(zip(CHECKS, answers, strict=True))
    adjudicated = Decision.objects.get(review=split)
    assert (adjudicated.basis, adjudicated.decided_by, adjudicated.checks["complete"]) == (
        "adjudicated",
        operator,
        "pass",
    )
    assert tab.console_errors == []
