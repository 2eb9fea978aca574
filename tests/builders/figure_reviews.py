"""Reviews with everything a dashboard figure reads, drawn by hypothesis and written straight to the tables: every
state (trial, superseded and stale included), every route, odd and missing JSON (checks that are not objects,
verdicts that are not verdicts, findings that are not objects, halves in the thousandths of a sub-score), waits
that run backwards, timestamps a second either side of an ISO week's end, decisions by a person, by one since deleted
or agreed by the people who answered,
labels that do or do not speak about the evidence reviewed, answers of several people (all slots in or not, odd
verdicts among them), thumbs, and due times a decision meets, misses or meets to the second."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from hypothesis import strategies as st

from grading.checks.definitions import CONVERSATION_DEFAULTS, DRAFT_DEFAULTS
from grading.models import (
    Answer,
    Certificate,
    Conversation,
    CriteriaVersion,
    Decision,
    Draft,
    Feedback,
    ItemKind,
    Label,
    Org,
    Review,
    ReviewState,
    Route,
)
from grading.reviews.versions import criteria_active

CHECKS = CONVERSATION_DEFAULTS.keys  # what a version asks that names no checks of its own
SUB_SCORES = DRAFT_DEFAULTS.keys

# A second either side of the end of ISO week 47 of 2026 (Sunday 22 November, UTC), and the days around it.
WEEK_END = datetime(2026, 11, 22, 23, 59, 59, tzinfo=UTC)
moments = st.sampled_from([timedelta(0), timedelta(seconds=1), timedelta(days=-3), timedelta(days=2, hours=5)]).map(
    lambda shift: WEEK_END + shift
)
# Waits on a histogram bound (60 s, 300 s), a fraction either side of one, and long ones.
gaps = st.sampled_from(
    [timedelta(seconds=s) for s in (0, 59.5, 60, 60.5, 300, 301)] + [timedelta(hours=30), timedelta(days=9)]
)
# Answers of every kind (a verdict, a category, a score of 1 to 10), and what no answer is: a word in capitals, a
# number that is not a string, a score past 10, a newline after a verdict.
verdict_text = st.sampled_from(["pass", "fail", "unknown", "billing", "4", "10", "11", "Pass", "pass\n", None, 1])
# A version's checks of its own (issue 39): a custom verdict check and a category check, beside today's three.
CHECK_KEYS = [*CHECKS, "cites_policy", "intent"]
check_entry = st.one_of(verdict_text.map(lambda v: {"verdict": v}), st.just({}), st.just("pass"))
checks = st.one_of(st.dictionaries(st.sampled_from([*CHECK_KEYS, "other"]), check_entry), st.just([]))
codes = st.sampled_from(["banned_word", "filler_phrase", "x" * 70, "x" * 70 + "y"])
finding = st.one_of(codes.map(lambda code: {"code": code}), st.just({"code": 3}), st.just("banned_word"))
# Halves of a thousandth (1.0625 is 1062.5 thousandths exactly) are where rounding rules part ways.
sub_score = st.one_of(st.sampled_from([7, 1.0625, 2.0625, 4.5, -1.0005, 2.0005, True, "7"]), st.floats(-10, 10))
usage = st.one_of(
    st.just({}),
    st.sampled_from([["prompt_tokens"], "prompt_tokens"]),  # not objects: what `?` finds in them still counts
    st.builds(
        lambda p, c: {"prompt_tokens": p, **({} if c is None else {"completion_tokens": c})},
        st.one_of(st.none(), st.integers(0, 5000), st.just(12.7)),
        st.one_of(st.none(), st.integers(0, 500)),
    ),
)
repairs = st.sampled_from([None, {"applied": []}, {"applied": [{"code": "dash"}]}, {"applied": "dash"}, []])


@dataclass(frozen=True)
class ReviewSpec:
    kind: str
    state: str
    route: str
    reason: str
    checks: Any
    findings: Any
    sub_scores: Any
    repairs: Any
    usage: Any
    judge_passed: bool | None
    audit: bool
    application: str
    filed: bool  # the review carries its filing (week, application), as review_record writes it
    started_at: datetime
    verdict_after: timedelta
    submitted_before: timedelta | None
    # outcome, checks, after the verdict, and who: a person, one since deleted (`former`), or the answers (`agreed`)
    decision: tuple[str, dict, timedelta, str] | None
    labels: list[tuple[str, str, bool]]  # check, verdict, about the evidence reviewed
    thumbs: list[str]
    answers: tuple[int, list[tuple[str, dict]]] = (2, [])  # the slots, and each person's outcome and checks
    due_after: timedelta | None = None  # a service-level target's due time after routing (routed when finished)
    slice: Any = None  # the dimension values it was filed under (`Review.slice`); None: none
    pass_probability: float | None = None  # the judge's, as stored (`Review.pass_probability`)
    certified: bool = False  # routed under a certificate (`Review.certificate`)
    confidences: Any = None  # how sure the judge was of each answer (`Review.confidences`); None: of none
    # An earlier review of the same evidence, an audit item since superseded, and people's decision on it (outcome,
    # checks, after this one's verdict): their audit verdict on the evidence this review read too.
    audited_before: tuple[str, dict, timedelta] | None = None


DECIDERS = ("person", "former", "agreed")
# A decision's outcome, checks, and when it was given after the verdict (or before it: both orders are drawn).
decided = st.tuples(
    st.sampled_from(Decision.Outcome.values),
    st.dictionaries(st.sampled_from(CHECK_KEYS), verdict_text),
    st.one_of(gaps, gaps.map(lambda gap: -gap)),
)
reviews = st.builds(
    ReviewSpec,
    kind=st.sampled_from(ItemKind.values),
    state=st.sampled_from(ReviewState.values),
    route=st.sampled_from(Route.values),
    reason=st.sampled_from(["", "unknown_check", "band", "JudgeRejected", "r" * 40]),
    checks=checks,
    findings=st.one_of(st.lists(finding, max_size=3), st.just({})),
    sub_scores=st.one_of(st.dictionaries(st.sampled_from([*SUB_SCORES, "other"]), sub_score), st.just([])),
    repairs=repairs,
    usage=usage,
    judge_passed=st.sampled_from([None, True, False]),
    audit=st.booleans(),
    application=st.sampled_from(["", "billing", "onboarding"]),
    filed=st.booleans(),
    started_at=moments,
    verdict_after=gaps,
    submitted_before=st.one_of(st.none(), gaps, gaps.map(lambda gap: -gap)),
    decision=st.one_of(
        st.none(), st.tuples(decided, st.sampled_from(DECIDERS)).map(lambda given: (*given[0], given[1]))
    ),
    labels=st.lists(
        st.tuples(
            st.sampled_from([*CHECK_KEYS, "pass_fail"]),
            st.sampled_from(["pass", "fail", "unknown", "billing", "refund", "3", "10"]),
            st.booleans(),
        ),
        max_size=4,
    ),
    thumbs=st.lists(st.sampled_from(["up", "down"]), max_size=2),
    answers=st.tuples(
        st.integers(2, 3),
        st.lists(
            st.tuples(
                st.sampled_from(Decision.Outcome.values),
                st.one_of(st.dictionaries(st.sampled_from(CHECK_KEYS), verdict_text), st.just([])),
            ),
            max_size=3,
        ),
    ),
    due_after=st.one_of(st.none(), gaps),
    slice=st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(["release", "model"]), st.sampled_from(["2.3", "2.4", "a=b", "x" * 200])),
        st.just({"release": 2}),  # not a value a review is filed under (only text is): left out in both forms
        st.just([]),
    ),
    # The fixed point's edges: 0, 1, a half, below its resolution, the float just below 1.
    pass_probability=st.one_of(
        st.none(), st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0, 0.5, 2.0**-33, 1.0 - 2.0**-53])
    ),
    certified=st.booleans(),
    confidences=st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from([*CHECK_KEYS, "pass_fail"]), st.one_of(st.none(), st.floats(0.0, 1.0))),
    ),
    audited_before=st.one_of(st.none(), decided),
)


def write_reviews(org: Org, specs: list[ReviewSpec], person) -> list[Review]:
    """Each spec as one review of an item of its own (so no two are each other's history), written as is."""
    versions = {kind: criteria_active(org=org, kind=kind) for kind in ItemKind.values}
    written = []
    for n, spec in enumerate(specs):
        fingerprint = f"fp1:{n}"
        finished = spec.started_at + spec.verdict_after
        if spec.kind == ItemKind.CONVERSATION:
            subject = {
                "conversation": Conversation.objects.create(
                    org=org,
                    external_id=f"c{n}",
                    application=spec.application or "support",
                    started_at=spec.started_at,
                    last_activity_at=spec.started_at,
                    fingerprint=fingerprint,
                )  # fmt: skip
            }
        else:
            subject = {
                "draft": Draft.objects.create(
                    org=org, external_id=f"d{n}", title="t", slug=f"d{n}", body="b", fingerprint=fingerprint
                )
            }
        filed_week = (finished if spec.kind == ItemKind.DRAFT else spec.started_at).date()
        review = Review.objects.create(
            org=org, kind=spec.kind, **subject, fingerprint=fingerprint, criteria_version=versions[spec.kind],
            judge={}, judge_key=f"j{n}", started_at=spec.started_at, finished_at=finished, route=spec.route,
            reason=spec.reason, checks=spec.checks, findings=spec.findings, sub_scores=spec.sub_scores,
            repairs=spec.repairs, usage=spec.usage, judge_passed=spec.judge_passed, state=spec.state,
            audit=spec.audit, application=spec.application if spec.filed else "",
            week=filed_week - timedelta(days=filed_week.weekday()) if spec.filed else None,
            submitted_at=None if spec.submitted_before is None else spec.started_at - spec.submitted_before,
            routed_at=None if spec.due_after is None else finished,
            due_at=None if spec.due_after is None else finished + spec.due_after,
            slice={} if spec.slice is None else spec.slice, pass_probability=spec.pass_probability,
            certificate=_certificate(versions[spec.kind]) if spec.certified else None,
            confidences={} if spec.confidences is None else spec.confidences,
        )  # fmt: skip
        if spec.audited_before is not None:
            outcome, human_checks, after = spec.audited_before
            earlier = Review.objects.create(
                org=org, kind=spec.kind, **subject, fingerprint=fingerprint, criteria_version=versions[spec.kind],
                judge={}, judge_key=f"j{n}-earlier", started_at=spec.started_at, finished_at=finished,
                route=Route.HUMAN, state=ReviewState.SUPERSEDED, audit=True,
            )  # fmt: skip
            Decision.objects.create(
                org=org, review=earlier, outcome=outcome, checks=human_checks, decided_at=finished + after,
                decided_by=person,
            )  # fmt: skip
        if spec.decision is not None:
            outcome, human_checks, after, who = spec.decision
            Decision.objects.create(
                org=org, review=review, outcome=outcome, checks=human_checks, decided_at=finished + after,
                decided_by=person if who == "person" else None,
                basis=Decision.Basis.AGREED if who == "agreed" else Decision.Basis.ONE,
            )  # fmt: skip
        for i, (check, verdict, about_it) in enumerate(spec.labels):
            Label.objects.create(
                org=org, kind=spec.kind, **subject, fingerprint=fingerprint if about_it else "fp1:older",
                check_name=check, verdict=verdict, labeller=f"l{i}", source="test", labelled_at=finished,
            )  # fmt: skip
        slots, answers = spec.answers
        for i, (outcome, human_checks) in enumerate(answers):
            Answer.objects.create(
                org=org, review=review, person=get_user_model().objects.get_or_create(username=f"answerer{i}")[0],
                fingerprint=fingerprint, outcome=outcome, checks=human_checks, answered_at=finished, slots=slots,
            )  # fmt: skip
        if spec.kind == ItemKind.CONVERSATION:
            for i, value in enumerate(spec.thumbs):
                Feedback.objects.create(conversation=subject["conversation"], message_external_id=f"m{i}", value=value)
        written.append(review)
    return written


def _certificate(version: CriteriaVersion) -> Certificate:
    return Certificate.objects.get_or_create(
        org_id=version.org_id, criteria_version=version, judge_key="j", agreement=0.9, confidence=0.9, checks={},
        labels=40, computed_at=WEEK_END,
    )[0]  # fmt: skip


def edge_draft(**changes: Any) -> ReviewSpec:
    """A counting draft decided by a person, on the edges where two forms of a rule most easily part: sub-scores
    on half a thousandth, waits exactly on a histogram bound, decided exactly at its due time, the judge a hair short
    of sure (the float just below 1)."""
    spec = ReviewSpec(
        kind=ItemKind.DRAFT, state=ReviewState.DECIDED, route=Route.HUMAN, reason="band", checks={},
        findings=[{"code": "banned_word"}], sub_scores={"aeo": 1.0625, "writing": -1.0625, "org_fit": 2.0005},
        repairs=None, usage={"prompt_tokens": 10, "completion_tokens": 2}, judge_passed=True, audit=True,
        application="", filed=True, started_at=WEEK_END, verdict_after=timedelta(seconds=60),
        submitted_before=timedelta(seconds=240), decision=("approve", {}, timedelta(seconds=300), "person"),
        labels=[("pass_fail", "fail", True)], thumbs=[], answers=(2, [("approve", {}), ("reject", {})]),
        due_after=timedelta(seconds=300), pass_probability=1.0 - 2.0**-53,
    )  # fmt: skip
    return replace(spec, **changes)
