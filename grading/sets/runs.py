"""Running a regression set under a criteria version, and what a run says.

1. `set_run_start` checks the version (the set's kind, its judge configured, the spend caps for one call per item),
   creates the run and, after commit, sends its items to the judge queue in batches: no more at once than
   GRADING_CONCURRENCY, the bound every grading shares, with the batches shrunk so the workers finish together.
2. `set_run_batch` (the task's service) grades each item of a batch not graded yet in this run, from its frozen copy,
   with the version's judge, through the path live items take (`path_outcome`, `draft_outcome`, as criteria trials
   do), outside any transaction; then, in one short transaction, writes the batch's run items and books the judge's
   spend. The run finishes, with its figures written, when its last item is in. A batch delivered twice grades
   nothing twice (the run items are unique per run and item).
3. `run_figures`: per check, the machine's answers against the expected ones as the dashboard counts agreement
   (`agreement_of`: percent with a Wilson 95% interval, and Cohen's kappa); the whole item's verdict as one more
   row (`pass_fail`); overall, every compared answer of every check and the verdict pooled, with its Wilson
   interval; and the items whose answer changed from the expected one. `passed` is whether the overall agreement
   reaches the run's `min_agreement` (None while it runs, or with no bar). Read while running, over the items
   graded so far.
"""

import math
from collections import Counter
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from grading.conversations.grader import judge_unknown_outcome, path_outcome
from grading.core.evidence import EvidenceMessage
from grading.delivery import enqueue
from grading.drafts.gate import draft_outcome
from grading.figures.agreement import agreement_of, wilson_interval
from grading.figures.definitions import PASS_FAIL, answers_of, checks_of
from grading.judge.backends import UnknownJudge, draft_judge_named, judge_entry, judge_named
from grading.models import (
    DECIDED_ALONE,
    ApiKey,
    CriteriaVersion,
    Draft,
    ItemKind,
    RegressionItem,
    RegressionRun,
    RegressionRunItem,
    RegressionSet,
    Route,
    RunState,
)
from grading.models.audit import audit_record
from grading.reviews.examples import version_examples
from grading.reviews.memory import retrieve_memory
from grading.reviews.services import ReviewOutcome
from grading.reviews.spend import SpendCapPassed, spend_blocked, spend_book, spend_check, spend_entry, utc_day
from grading.sets.build import SetRefused

HELD = "held"  # a run item's route when a reached spend cap held its judge call back
CHANGED_SHOWN = 500  # the changed items a run's figures list; the count says how many there are


def set_run_start(
    *,
    regression_set: RegressionSet,
    version: CriteriaVersion,
    min_agreement: float | None = None,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
) -> RegressionRun:
    """Start a run of the set under `version` (the module's step 1). Raises SetRefused naming the field, or
    SpendCapPassed, and starts nothing."""
    if version.org_id != regression_set.org_id or version.kind != regression_set.kind:
        kind = regression_set.kind
        raise SetRefused("version", f"the set holds {kind}s: run it under a {kind} criteria version of this org")
    if min_agreement is not None and not (math.isfinite(min_agreement) and 0 <= min_agreement <= 1):
        raise SetRefused("min_agreement", "a share from 0 to 1, like 0.9")
    try:
        judge_entry(version.judge)
    except UnknownJudge as exc:
        raise SetRefused("version", f"its judge is not configured: {exc}") from exc
    item_ids = list(regression_set.items.order_by("pk").values_list("pk", flat=True))
    if passed := spend_check(version=version, calls=len(item_ids)).warnings:
        raise SpendCapPassed(passed)
    with transaction.atomic():
        run = RegressionRun.objects.create(
            regression_set=regression_set,
            org_id=regression_set.org_id,
            criteria_version=version,
            min_agreement=min_agreement,
            items=len(item_ids),
            started_by=actor if actor is not None and actor.is_authenticated else None,
            started_by_key=api_key,
        )
        if not item_ids:
            run_finish(run)
        audit_record(
            action="set.run",
            org=regression_set.org,
            actor=actor,
            api_key=api_key,
            target=regression_set,
            detail={"run": run.pk, "criteria_version": version.number, "items": len(item_ids)},
        )
        batches = run_batches(item_ids)
        transaction.on_commit(lambda: enqueue.set_run(run_id=run.pk, batches=batches))
    return run


def run_batches(item_ids: list[int]) -> list[list[int]]:
    """The items in batches of at most GRADING_BATCH_SIZE, and small enough that GRADING_CONCURRENCY graders each
    get one: a run of fewer items than graders is one item per task."""
    size = max(1, min(settings.GRADING_BATCH_SIZE, math.ceil(len(item_ids) / settings.GRADING_CONCURRENCY)))
    return [item_ids[start : start + size] for start in range(0, len(item_ids), size)]


def set_run_batch(*, run_id: int, item_ids: list[int]) -> int:
    """Grade the batch's items not graded yet in the run (the module's step 2); the number graded."""
    run = RegressionRun.objects.select_related("criteria_version__org").filter(pk=run_id).first()
    if run is None or run.state == RunState.DONE:
        return 0
    done = set(RegressionRunItem.objects.filter(run=run, item_id__in=item_ids).values_list("item_id", flat=True))
    items = list(RegressionItem.objects.filter(pk__in=item_ids, regression_set_id=run.regression_set_id).order_by("pk"))
    version = run.criteria_version
    examples = version_examples(version)  # read once: the version may be edited while the run goes on
    judge = _judge(version)
    graded = [(item, _graded(version, item, judge, examples)) for item in items if item.pk not in done]
    now = timezone.now()
    with transaction.atomic():
        locked = RegressionRun.objects.select_for_update().get(pk=run_id)
        # Items erased while they were judged are gone now (grading/sets/erasure.py deletes under these rows' locks).
        present = set(
            RegressionItem.objects.select_for_update()
            .filter(pk__in=[item.pk for item, _ in graded])
            .values_list("pk", flat=True)
        )
        written = RegressionRunItem.objects.bulk_create(
            [
                RegressionRunItem(
                    run=locked,
                    item=item,
                    route=outcome.route if outcome else HELD,
                    reason=outcome.reason[:64] if outcome else "spend_cap",
                    answers=_answers(item.kind, outcome) if outcome else {},
                    judge_calls=_calls(outcome),
                )
                for item, outcome in graded
                if item.pk in present
            ],
            ignore_conflicts=True,  # another delivery of this batch got there first
        )
        for _, outcome in graded:
            if outcome is not None:
                spend_book(spend_entry(org_id=run.org_id, version=version, route=outcome.route, usage=outcome.usage,
                                       calls=_calls(outcome), day=utc_day(now)))  # fmt: skip
        if locked.state == RunState.RUNNING and _all_in(locked):
            run_finish(locked)
    return len(written)


def _judge(version: CriteriaVersion):
    try:
        return (draft_judge_named if version.kind == ItemKind.DRAFT else judge_named)(version.judge)
    except UnknownJudge:
        return None  # removed from JUDGES_FILE since the run started: its items are errors


def _graded(version: CriteriaVersion, item: RegressionItem, judge, examples) -> ReviewOutcome | None:
    """The frozen item graded under the version; None when a reached spend cap holds the judge call back."""
    if judge is None:
        return judge_unknown_outcome(UnknownJudge(version.judge))
    if spend_blocked(version.org_id, version) is not None:
        return None
    if item.kind == ItemKind.DRAFT:
        draft = Draft(org=version.org, external_id=item.external_id, metadata=item.metadata, **item.evidence)
        memory = retrieve_memory(org=version.org, text=f"{draft.title}\n{draft.body}")
        return draft_outcome(draft=draft, criteria=version, memory=memory, judge=judge, examples=examples)
    path = [
        EvidenceMessage(**{**m, "created_at": datetime.fromisoformat(m["created_at"]) if m["created_at"] else None})
        for m in item.evidence
    ]
    return path_outcome(path, version, judge, examples)


def _answers(kind: str, outcome: ReviewOutcome) -> dict[str, str]:
    """The machine's answer per check, and on the whole item as the dashboard reads it (MACHINE_PASS_FAIL)."""
    checks = outcome.checks.items()
    answers = {key: check["verdict"] for key, check in checks if isinstance(check, dict) and "verdict" in check}
    if outcome.route in DECIDED_ALONE:
        answers[PASS_FAIL] = outcome.route
    elif outcome.route == Route.HUMAN:
        answers[PASS_FAIL] = ("pass" if outcome.judge_passed else "fail") if kind == ItemKind.DRAFT else "unknown"
    return answers


def _calls(outcome: ReviewOutcome | None) -> int:
    """The judge calls grading the item made: its stages (one for a draft the judge was asked about)."""
    return outcome.stages if outcome is not None else 0


def _all_in(run: RegressionRun) -> bool:
    left = RegressionItem.objects.filter(regression_set_id=run.regression_set_id).exclude(
        pk__in=RegressionRunItem.objects.filter(run=run).values("item_id")
    )
    return not left.exists()


def run_finish(run: RegressionRun) -> None:
    """Close the run with its figures (in the caller's transaction, the run's row locked or new)."""
    run.state, run.finished_at = RunState.DONE, timezone.now()
    run.figures = run_figures(run)
    run.save(update_fields=["state", "finished_at", "figures"])


def run_figures(run: RegressionRun) -> dict:
    """The run's figures over the items graded so far (the module's step 3), as the API returns them."""
    version = run.criteria_version
    kind = version.kind
    checks = [*(c for c in checks_of(kind, version) if c != PASS_FAIL), PASS_FAIL]
    pairs: dict[str, Counter] = {check: Counter() for check in checks}
    changed = []
    graded = errors = held = 0
    rows = RegressionRunItem.objects.filter(run=run).values_list(
        "route", "answers", "item__external_id", "item__item_id", "item__expected", "item__expected_verdict"
    )
    for route, answers, external_id, item_id, expected, expected_verdict in rows.iterator(chunk_size=2000):
        graded += 1
        errors += route == Route.ERROR
        held += route == HELD
        wanted = {**expected, **({PASS_FAIL: expected_verdict} if expected_verdict else {})}
        for check in checks:
            if check not in wanted or check not in answers:
                continue
            pairs[check][(answers[check], wanted[check])] += 1
            if answers[check] != wanted[check]:
                changed.append({"item": external_id, "item_id": item_id, "check": check,
                                "expected": wanted[check], "answer": answers[check]})  # fmt: skip
    per_check = {}
    for check in checks:
        agreement = agreement_of(answers_of(kind, version, check), pairs[check])
        per_check[check] = agreement.as_json()
    compared = sum(a["n"] for a in per_check.values())
    agreed = sum(a["agreed"] for a in per_check.values())
    overall = agreed / compared if compared else None
    interval = wilson_interval(agreed, compared)
    finished = run.state == RunState.DONE
    return {
        "items": run.items,
        "graded": graded,
        "errors": errors,
        "held_by_spend_cap": held,
        "checks": per_check,
        "overall": {
            "n": compared,
            "agreed": agreed,
            "percent": overall,
            "percent_interval": list(interval) if interval else None,
            "percent_interval_method": "wilson",
        },
        "passed": (overall is not None and overall >= run.min_agreement)
        if finished and run.min_agreement is not None
        else None,
        "changed_count": len(changed),
        "changed": changed[:CHANGED_SHOWN],
    }


def run_json(run: RegressionRun) -> dict:
    """A run as the API returns it: its state and times, and its figures (stored once it finished)."""
    figures = run.figures if run.state == RunState.DONE else run_figures(run)
    return {
        "id": run.pk,
        "set": run.regression_set.name,
        "criteria_version": run.criteria_version.number,
        "min_agreement": run.min_agreement,
        "state": run.state,
        "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        **figures,
    }
