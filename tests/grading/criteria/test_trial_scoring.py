"""Trials scored against people: a trial runs on the items with a human verdict on their present evidence (audit
sample, decisions, labels), never on the version's examples, and its page and API show the trial version's and the
active version's agreement with people, equal to a recomputation from the rows."""

import csv
import hashlib
import io
import re
from collections import Counter, defaultdict

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from grading.api.keys import api_key_create
from grading.checks.definitions import CONVERSATION_DEFAULTS
from grading.criteria.scoring import trial_score
from grading.criteria.trials import trial_count
from grading.figures.agreement import agreement_of
from grading.models import (
    Conversation,
    CriteriaExample,
    CriteriaTrial,
    Decision,
    ItemKind,
    Label,
    Review,
    ReviewState,
    TrialSource,
)
from grading.reviews.examples import criteria_example_add
from grading.reviews.human import human_verdict_of
from grading.reviews.versions import criteria_new_version
from reviewer.criteria.display import coefficient, percent
from reviewer.models import Role
from tests.builders.conversations import llm_judge, support_conversation, upsert
from tests.builders.people import make_person
from tests.builders.scored_trials import ORDER, decide, graded_conversations, label, scored_trial

CHECKS = CONVERSATION_DEFAULTS.keys  # what a version asks that names no checks of its own

pytestmark = pytest.mark.django_db

PASS = {"grounded": "pass", "complete": "pass", "usable": "pass"}
# What the active version said (conversation n), what people said, and what the trial version says.
ACTIVE = {
    0: PASS,
    1: {**PASS, "grounded": "fail"},
    2: {**PASS, "complete": "unknown"},
    3: {**PASS, "usable": "fail"},
    4: PASS,
    5: PASS,
    6: PASS,
    7: {**PASS, "grounded": "fail"},
}
PEOPLE = {0: PASS, 1: PASS, 2: {**PASS, "complete": "fail"}, 3: {**PASS, "usable": "fail"}, 4: PASS, 5: PASS}
TRIAL = {
    0: {**PASS, "grounded": "fail"},  # away from people
    1: PASS,  # toward people on grounded
    2: {**PASS, "complete": "fail"},  # toward people on complete
    3: PASS,  # away on usable
    6: {**PASS, "complete": "fail"},
    7: PASS,
}


@pytest.fixture
def world(org, fake_llm, operator, criteria_admin):
    """Eight graded conversations: 0-5 decided by a person (5's evidence has moved on since), 6 and 7 labelled (7's
    labellers split on grounded), and a new version whose example is conversation 4."""
    conversations = graded_conversations(org, fake_llm, ACTIVE)
    for n, checks in PEOPLE.items():
        decide(conversations[n], operator, checks, note=f"person on {n}")
    moved = support_conversation("cv-5")
    moved["messages"][0]["content"] = f"Please refund order {ORDER + 5}, it arrived broken. And the other one."
    upsert(org, moved)
    for labeller in ("ann", "bo"):
        label(org, conversations[6], labeller, grounded="pass", complete="fail", usable="pass")
    label(org, conversations[7], "ann", grounded="pass", complete="pass")
    label(org, conversations[7], "bo", grounded="fail", complete="pass")
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, author=criteria_admin)
    add_example(version, conversations[4])
    return version, {n: Conversation.objects.get(pk=c.pk) for n, c in conversations.items()}


def add_example(version, conversation: Conversation) -> None:
    criteria_example_add(version=version, subject=conversation, check="grounded")


def ranked(conversations) -> list[Conversation]:
    salt = django_settings.SAMPLING_SALT
    return sorted(conversations, key=lambda c: hashlib.sha256((salt + c.external_id).encode()).hexdigest())


def run_trial(version, fake_llm, source: str, actor) -> CriteriaTrial:
    fake_llm.reset()
    return scored_trial(version, fake_llm, source, actor, TRIAL)


def recomputed(trial: CriteriaTrial, source: str) -> dict:
    """The figures from the rows themselves: trial reviews, the items' counting reviews, decisions or labels."""
    examples = set(CriteriaExample.objects.filter(criteria_version=trial.criteria_version).values_list(
        "conversation_id", flat=True
    ))  # fmt: skip
    pairs = {"trial": defaultdict(Counter), "active": defaultdict(Counter)}
    for review in Review.objects.filter(pk__in=trial.review_ids, state=ReviewState.TRIAL):
        conversation = review.conversation
        if conversation.pk in examples or conversation.fingerprint != review.fingerprint:
            continue
        if source == TrialSource.LABELS:
            said = defaultdict(set)
            for check, verdict in Label.objects.filter(
                conversation=conversation, fingerprint=review.fingerprint
            ).values_list("check_name", "verdict"):
                said[check].add(verdict)
            people = {check: verdicts.pop() for check, verdicts in said.items() if len(verdicts) == 1}
        else:
            people = Decision.objects.get(
                review__conversation=conversation, review__fingerprint=review.fingerprint
            ).checks
        active = Review.objects.counting().get(conversation=conversation)
        for check in CHECKS:
            if check in people:
                pairs["trial"][check][(review.checks[check]["verdict"], people[check])] += 1
                pairs["active"][check][(active.checks[check]["verdict"], people[check])] += 1
    verdicts = ("pass", "fail", "unknown")
    return {
        check: {side: agreement_of(verdicts, pairs[side][check]).as_json() for side in ("trial", "active")}
        for check in CHECKS
    }


def test_the_human_verdict_of_an_item_is_its_decision_on_its_present_evidence_else_its_labels(world):
    _, conversations = world
    decided = human_verdict_of(conversations[2])
    assert (decided.source, decided.checks, decided.note) == ("decision", PEOPLE[2], "person on 2")
    assert human_verdict_of(conversations[5]) is None  # decided, but on evidence it has moved on from
    assert human_verdict_of(conversations[7]).checks == {"complete": "pass"}  # the labellers split on grounded


def test_a_trial_on_decisions_samples_the_decided_items_by_the_fixed_rule_leaving_out_examples(world, fake_llm):
    version, conversations = world
    sample = trial_count(version=version, size=200, source=TrialSource.DECISIONS, judge=llm_judge(fake_llm))
    expected = ranked([conversations[n] for n in (0, 1, 2, 3)])  # 4 is an example, 5 moved on, 6 and 7 labelled
    assert [item.subject for item in sample.items] == expected
    assert [i.subject for i in trial_count(version=version, size=2, source=TrialSource.DECISIONS).items] == expected[:2]
    labelled = trial_count(version=version, size=200, source=TrialSource.LABELS).items
    assert [item.subject for item in labelled] == ranked([conversations[6], conversations[7]])
    audit = trial_count(version=version, size=200, source=TrialSource.AUDIT).items
    assert [item.subject for item in audit] == expected  # every decision here was on an audit item


def test_the_scored_trial_equals_a_recomputation_from_the_rows_on_the_page_and_the_api(
    world, fake_llm, org, other_org, client, client_for, criteria_admin
):
    version, conversations = world
    trial = run_trial(version, fake_llm, TrialSource.DECISIONS, criteria_admin)
    calls = len(fake_llm.chat_requests())
    assert trial.finished_at is not None and calls == trial.judge_calls == trial.judge_calls_made == 4
    add_example(version, conversations[3])  # an example now: left out of the agreement, though it was graded

    expected = recomputed(trial, TrialSource.DECISIONS)
    assert expected["grounded"]["trial"]["n"] == 3 and expected["usable"]["active"]["n"] == 3
    score = trial_score(trial)
    assert {s.check: {"trial": s.trial.as_json(), "active": s.active.as_json()} for s in score.checks} == expected
    assert score.examples_left_out == 1 and score.compared == 3
    changed = {(c.external_id, c.check, c.direction) for c in score.changed}
    assert changed == {("cv-0", "grounded", "away"), ("cv-1", "grounded", "toward"), ("cv-2", "complete", "toward")}

    key = api_key_create(org=org, name="pipeline").plaintext
    answer = client.get(f"/api/v1/criteria/trials/{trial.pk}", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert answer["checks"] == expected
    tokens = sum(r.usage["total_tokens"] for r in Review.objects.filter(pk__in=trial.review_ids))
    assert (answer["judge_calls"], answer["tokens"]["total"], answer["examples_left_out"]) == (calls, tokens, 1)
    assert {(c["item"], c["check"], c["direction"]) for c in answer["changed"]} == changed
    exported = client.get(f"/api/v1/criteria/trials/{trial.pk}?format=csv", HTTP_AUTHORIZATION=f"Bearer {key}")
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert [row["item"] for row in rows] == [c.external_id for c in ranked([conversations[n] for n in (0, 1, 2, 3)])]
    assert {row["item"]: row["compared"] for row in rows}["cv-3"] == "False"

    page = client_for(criteria_admin).get(reverse("criteria_trial_detail", args=[trial.pk]))
    html = page.content.decode()
    for check, sides in expected.items():
        for side, figures in sides.items():
            row = re.search(rf'<tr data-check="{check}" data-side="{side}">(.*?)</tr>', html, re.S).group(1)
            shown = dict(re.findall(r'data-figure="(\w+)">([^<]*)<', row))
            assert shown["percent"] == percent(figures["percent"]), (check, side)
            assert shown["kappa"] == coefficient(figures["kappa"]), (check, side)
            assert shown["n"] == str(figures["n"])
    assert "1 item left out: it is an example of v2" in html
    assert f'<b id="trial-calls">{calls}</b>' in html and f'<b id="trial-tokens">{tokens}</b>' in html
    signed_in_csv = client_for(criteria_admin).get(reverse("criteria_trial_csv", args=[trial.pk]))
    assert signed_in_csv.content == exported.content  # the page's CSV link gives what the API's does

    other_key = api_key_create(org=other_org, name="theirs").plaintext
    other = client.get(f"/api/v1/criteria/trials/{trial.pk}", HTTP_AUTHORIZATION=f"Bearer {other_key}")
    assert other.status_code == 404
    olive = make_person("olive", other_org, Role.CRITERIA_ADMIN)
    assert client_for(olive).get(reverse("criteria_trial_detail", args=[trial.pk])).status_code == 404


def test_a_trial_on_labels_scores_each_check_where_the_labellers_agree(world, fake_llm, criteria_admin):
    version, _ = world
    trial = run_trial(version, fake_llm, TrialSource.LABELS, criteria_admin)
    expected = recomputed(trial, TrialSource.LABELS)
    assert (expected["grounded"]["trial"]["n"], expected["complete"]["trial"]["n"]) == (1, 2)
    score = trial_score(trial)
    assert {s.check: {"trial": s.trial.as_json(), "active": s.active.as_json()} for s in score.checks} == expected


def test_the_trial_form_takes_the_source_and_starts_a_scored_trial(world, client_for, criteria_admin):
    version, conversations = world
    client = client_for(criteria_admin)
    counted = client.get(reverse("criteria_trial", args=[version.pk]), {"k": 200, "source": "decisions"})
    assert counted.status_code == 200 and "4 items, <b>4</b> judge calls" in counted.content.decode()
    started = client.post(reverse("criteria_trial", args=[version.pk]), {"k": 200, "source": "decisions",
                                                                         "counted_calls": 4})  # fmt: skip
    trial = CriteriaTrial.objects.get(criteria_version=version)
    assert started.status_code == 302 and (trial.source, len(trial.sample)) == ("decisions", 4)
    refused = client.get(reverse("criteria_trial", args=[version.pk]), {"k": 201, "source": "nobody"})
    assert refused.status_code == 400 and CriteriaTrial.objects.count() == 1
