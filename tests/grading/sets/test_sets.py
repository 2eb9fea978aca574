"""Regression sets: items frozen with people's expected answers (decisions, labels, corrections), run under a
criteria version with its judge (the loopback fake) through the grading path live items take, figures equal to a
direct count, nothing written to the live record, and erasure reaching the copies."""

from collections import Counter

import pytest

from grading.erasure.runs import erasure_request, erasure_run
from grading.figures.agreement import agreement_of
from grading.models import (
    Conversation,
    CriteriaVersion,
    Erasure,
    ErasureScope,
    ItemKind,
    RegressionItem,
    RegressionRun,
    RegressionRunItem,
    RegressionSet,
    Review,
    RunState,
    SetSource,
)
from grading.sets.build import SetFilter, SetRefused, set_build
from grading.sets.runs import run_batches, run_json, set_run_batch, set_run_start
from tests.builders.expected_replies import expected_reply_write
from tests.builders.judges import configure_judges, judge_config
from tests.builders.scored_trials import decide, graded_conversations, judge_per_item, label

pytestmark = pytest.mark.django_db

PASS = {"grounded": "pass", "complete": "pass", "usable": "pass"}
MACHINE = {n: PASS for n in range(7)}
PEOPLE = {0: PASS, 1: {**PASS, "grounded": "fail"}, 2: {**PASS, "complete": "fail"}, 3: PASS}
LABELLED = {4: {**PASS, "usable": "fail"}, 5: PASS}
# What the judge says when the set runs: 1 and 2 agree with people now, 0 moved away on complete.
RUN = {0: {**PASS, "complete": "fail"}, 1: {**PASS, "grounded": "fail"}, 2: {**PASS, "complete": "fail"}, 3: PASS,
       4: PASS, 5: PASS, 6: PASS}  # fmt: skip


@pytest.fixture
def world(org, fake_llm, operator, settings):
    """Seven graded conversations: 0-3 decided by a person, 4 and 5 labelled by two people who agree, 6 with an
    expected reply kept and then decided; the org's default judge is the fake."""
    configure_judges(settings, default=judge_config(fake_llm))
    conversations = graded_conversations(org, fake_llm, MACHINE)
    for n, checks in PEOPLE.items():
        decide(conversations[n], operator, checks)
    for n, checks in LABELLED.items():
        for labeller in ("ann", "bo"):
            label(org, conversations[n], labeller, **checks)
    review = Review.objects.counting().get(conversation=conversations[6])
    expected_reply_write(operator, review, "m4", "Refunded: the money is back on your card within five days.")
    decide(conversations[6], operator, PASS)
    return conversations


def run_set(regression_set: RegressionSet, fake_llm, min_agreement: float | None = None) -> RegressionRun:
    """Start a run and grade its batches here, as the judge workers would."""
    version = CriteriaVersion.objects.get(org=regression_set.org, kind=regression_set.kind, is_active=True)
    run = set_run_start(regression_set=regression_set, version=version, min_agreement=min_agreement)
    fake_llm.set_default(judge_per_item(RUN))
    for batch in run_batches(list(regression_set.items.order_by("pk").values_list("pk", flat=True))):
        set_run_batch(run_id=run.pk, item_ids=batch)
    run.refresh_from_db()
    return run


def test_it_builds_a_set_from_decisions_and_skips_and_counts_items_without_one(org, world):
    built = set_build(org=org, name="refunds", kind=ItemKind.CONVERSATION, source=SetSource.DECISIONS,
                      item_filter=SetFilter())  # fmt: skip
    items = {item.external_id: item for item in built.items.all()}
    assert set(items) == {"cv-0", "cv-1", "cv-2", "cv-3", "cv-6"}
    assert built.skipped == 2  # the two labelled conversations have no decision
    assert items["cv-1"].expected == {**PASS, "grounded": "fail"}
    assert items["cv-1"].expected_verdict == "fail"  # people failed a required check: the whole item fails
    assert items["cv-3"].expected_verdict == "pass"
    assert items["cv-0"].evidence[0]["content"] == world[0].messages.get(external_id="m1").content


def test_it_builds_a_set_from_labels_named_by_id(org, world):
    built = set_build(org=org, name="labelled", kind=ItemKind.CONVERSATION, source=SetSource.LABELS,
                      external_ids=["cv-4", "cv-5", "cv-0"])  # fmt: skip
    assert sorted(built.items.values_list("external_id", flat=True)) == ["cv-4", "cv-5"]
    assert built.skipped == 1
    assert built.items.get(external_id="cv-4").expected == {**PASS, "usable": "fail"}


def test_it_builds_a_set_from_corrections_with_the_expected_reply_in_the_agents_place(org, world):
    built = set_build(org=org, name="corrected", kind=ItemKind.CONVERSATION, source=SetSource.CORRECTIONS,
                      item_filter=SetFilter())  # fmt: skip
    (item,) = built.items.all()
    assert item.external_id == "cv-6"
    assert item.expected_verdict == "pass" and item.expected == {}
    assert item.evidence[-1]["content"] == "Refunded: the money is back on your card within five days."
    assert built.skipped == 6


def test_it_refuses_an_id_the_org_does_not_have_and_a_name_taken_writing_nothing(org, other_org, world):
    with pytest.raises(SetRefused) as refused:
        set_build(org=other_org, name="x", kind="conversation", source="decisions", external_ids=["cv-0"])
    assert refused.value.field == "ids"
    set_build(org=org, name="x", kind=ItemKind.CONVERSATION, source=SetSource.DECISIONS, external_ids=["cv-0"])
    with pytest.raises(SetRefused) as refused:
        set_build(org=org, name="x", kind=ItemKind.CONVERSATION, source=SetSource.DECISIONS, external_ids=["cv-1"])
    assert refused.value.field == "name"
    assert RegressionSet.objects.count() == 1


def test_it_runs_a_set_and_each_checks_agreement_is_the_direct_count(org, world, fake_llm):
    built = set_build(org=org, name="refunds", kind=ItemKind.CONVERSATION, source=SetSource.DECISIONS,
                      item_filter=SetFilter())  # fmt: skip
    reviews_before = list(Review.objects.order_by("pk").values_list("pk", "state"))
    run = run_set(built, fake_llm, min_agreement=0.5)
    assert run.state == RunState.DONE
    figures = run_json(run)
    pairs: dict[str, Counter] = {check: Counter() for check in PASS}
    for n in (0, 1, 2, 3, 6):
        people = PEOPLE.get(n, PASS)
        for check in PASS:
            pairs[check][(RUN[n][check], people[check])] += 1
    for check in PASS:
        assert figures["checks"][check] == agreement_of(("pass", "fail", "unknown"), pairs[check]).as_json()
    assert figures["checks"]["grounded"]["percent_interval"] is not None
    changed = {(c["item"], c["check"]) for c in figures["changed"]}
    assert ("cv-0", "complete") in changed and ("cv-0", "pass_fail") in changed
    assert figures["passed"] is True
    # Nothing reached the live record: no review written or changed.
    assert list(Review.objects.order_by("pk").values_list("pk", "state")) == reviews_before


def test_a_run_under_the_bar_reports_passed_false(org, world, fake_llm):
    built = set_build(org=org, name="refunds", kind=ItemKind.CONVERSATION, source=SetSource.DECISIONS,
                      item_filter=SetFilter())  # fmt: skip
    run = run_set(built, fake_llm, min_agreement=0.99)
    assert run_json(run)["overall"]["percent"] < 0.99
    assert run_json(run)["passed"] is False


def test_a_run_is_read_while_it_runs_over_the_items_graded_so_far(org, world, fake_llm):
    built = set_build(org=org, name="refunds", kind=ItemKind.CONVERSATION, source=SetSource.DECISIONS,
                      item_filter=SetFilter())  # fmt: skip
    version = CriteriaVersion.objects.get(org=org, kind=ItemKind.CONVERSATION, is_active=True)
    run = set_run_start(regression_set=built, version=version, min_agreement=0.5)
    fake_llm.set_default(judge_per_item(RUN))
    first = built.items.order_by("pk").first()
    set_run_batch(run_id=run.pk, item_ids=[first.pk])
    set_run_batch(run_id=run.pk, item_ids=[first.pk])  # delivered twice: graded once
    run.refresh_from_db()
    figures = run_json(run)
    assert (figures["state"], figures["graded"], figures["items"], figures["passed"]) == ("running", 1, 5, None)


def test_erasing_a_conversation_removes_its_copy_from_every_set_and_says_so(org, world, fake_llm):
    built = set_build(org=org, name="refunds", kind=ItemKind.CONVERSATION, source=SetSource.DECISIONS,
                      item_filter=SetFilter())  # fmt: skip
    run = run_set(built, fake_llm)
    erasure = erasure_request(org=org, scope=ErasureScope.CONVERSATION, target="cv-0")
    erasure_run(erasure_id=erasure.pk)
    built.refresh_from_db()
    assert not RegressionItem.objects.filter(external_id="cv-0").exists()
    assert not RegressionRunItem.objects.filter(run=run, item__external_id="cv-0").exists()
    assert (built.items.count(), built.erased) == (4, 1)
    assert Erasure.objects.get(pk=erasure.pk).erased["regressionitem"] == 1
    run.refresh_from_db()
    assert run.figures["graded"] == 4
    assert all(c["item"] != "cv-0" for c in run.figures["changed"])
    assert Conversation.objects.filter(external_id="cv-0").count() == 0
