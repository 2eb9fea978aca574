"""A trial scored against people: for a trial run on items with a human verdict (TrialSource audit, decisions or
labels), how far the trial version and the active version each agree with people on the same items.

Per check (conversations: each check the trial's version asks; drafts: pass_fail, the machine's verdict being
MACHINE_PASS_FAIL of grading/figures/definitions.py), for each side: agreement, Cohen's kappa, their intervals and
the confusion table over the check's answers (`agreement_of`, as the dashboard's; a score check adds weighted kappa
and ordinal alpha); the items whose answer changed, toward people or away from them; and what the trial spent. A
check the active version does not ask (the trial's version adds it) is scored for the trial alone, and says so;
a check only the active version asks is named as dropped.

What is compared, and why:
- The human verdict is the item's from the trial's source on its present evidence (grading/reviews/human.py), and
  it is compared only where the trial review read that same evidence (fingerprints equal): a verdict on other
  evidence says nothing about what the judge read.
- The active side is the item's counting review (under the active version) when it read that evidence too.
- An item that is an example of the trial's version NOW is left out: a version is never scored on its own
  examples (the page says how many were left out).
- A check both versions ask is compared on the items where people, the trial and the active version all give a
  verdict, so the two sides' figures stand on the same items; a check the trial adds, where people and the trial do.

The coverage the trial's version would reach (`TrialCoverage`): its compared items are calibration points as a
certificate's are (grading/certify/calibration.py: the trial review's confidence in each certified answer, paired
with people's verdict), certified as a certificate is (`certified_checks`) at the version's target, or at 90%/90%
when it has none. Only from the audit sample's decisions and labels: every decision includes the items the machine
sent to people, the hard ones, and a threshold calibrated on them says nothing about the items it would decide alone.
"""

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import datetime

from django.contrib.postgres.aggregates import JSONBAgg
from django.db import transaction
from django.db.models import F, Func, Q, Subquery
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from grading.certify.calibration import calibration_point, certified_keys
from grading.certify.services import Target, certified_checks
from grading.certify.thresholds import CalibrationPoint, CheckCertificate
from grading.checks.definitions import AnswerKind
from grading.core.sql_expressions import JsonArrayLength, RowsAndSum, RowsWritten, id_in, json_array_slice
from grading.criteria.trials import HELD_BY_SPEND_CAP
from grading.figures.agreement import Agreement, agreement_of
from grading.figures.definitions import PASS_FAIL, SCORED, answers_of, checks_of, machine_verdict
from grading.figures.expressions import Lit
from grading.figures.raters import ScoreAgreement, score_agreement
from grading.models import (
    Conversation,
    CriteriaExample,
    CriteriaTrial,
    CriteriaVersion,
    Draft,
    ItemKind,
    Review,
    TrialFigures,
    TrialFiguresItem,
    TrialItem,
    TrialSource,
)
from grading.reviews.human import HumanVerdict, human_verdicts
from grading.reviews.sql import trial_items_save

TOWARD, AWAY, ASIDE = "toward", "away", "aside"  # a changed verdict moved to people's, off it, or between others
EXAMPLE = "an example of this version: a version is not scored on its own examples"
NOT_ASKED = "the active version does not ask this check: the trial's version adds it"
# The target a trial's coverage is read at when its version has none: 90% agreement, with 90% confidence.
DEFAULT_TARGET = Target(alpha=0.1, delta=0.1)
# The people sources whose items were drawn without regard to what the machine said (`TrialSource`).
UNBIASED_SOURCES = (TrialSource.AUDIT, TrialSource.LABELS)


@dataclass(frozen=True)
class TrialCoverage:
    """The certificate the trial's version would get from the trial's items: per certified key, the threshold and
    the share of the items the machine would decide alone on it."""

    target: Target
    own_target: bool  # the version's target; False: it has none, and DEFAULT_TARGET was used
    labels: int  # compared items with a calibration point on some key
    checks: dict[str, CheckCertificate]

    def as_json(self) -> dict:
        return {
            "agreement": 1 - self.target.alpha,
            "confidence": 1 - self.target.delta,
            "versions_target": self.own_target,
            "labels": self.labels,
            "checks": {key: certificate.as_json() for key, certificate in self.checks.items()},
        }


@dataclass(frozen=True)
class ScoredCheck:
    check: str
    trial: Agreement  # the trial version's verdicts against people's
    active: Agreement  # the active version's, on the same items (none when it does not ask the check)
    added: bool = False  # the trial's version asks it and the active version does not
    trial_scores: ScoreAgreement | None = None  # a score check: weighted kappa and ordinal alpha
    active_scores: ScoreAgreement | None = None

    def as_json(self) -> dict:
        out = {"trial": self.trial.as_json(), "active": self.active.as_json()}
        if self.trial_scores is not None and self.active_scores is not None:
            out["trial"]["scores"] = self.trial_scores.as_json()
            out["active"]["scores"] = self.active_scores.as_json()
        return out


@dataclass(frozen=True)
class ChangedVerdict:
    item_id: int
    external_id: str
    check: str
    active: str
    trial: str
    human: str
    direction: str  # TOWARD | AWAY | ASIDE


@dataclass(frozen=True)
class ScoredItem:
    """One sample item as the scoring read it: None where a side has no verdict to compare."""

    index: int
    item_id: int
    external_id: str
    human: HumanVerdict | None
    trial_review_id: int | None
    active_review_id: int | None
    trial: dict[str, str]
    active: dict[str, str]
    left_out: str  # why the item is not compared ("" when it is)


@dataclass(frozen=True)
class TrialScore:
    trial: CriteriaTrial
    active_version: CriteriaVersion | None  # the version the other side was graded under
    checks: list[ScoredCheck]
    dropped: list[str]  # checks the active version asks and the trial's version does not
    changed: list[ChangedVerdict]
    items: list[ScoredItem]
    examples_left_out: int  # sample items that are examples of the version now
    judge_calls: int
    prompt_tokens: int
    completion_tokens: int
    compared: int  # items compared, of every item (`items` may hold the first few only)
    changed_total: int  # verdicts that changed, of every item (`changed` may hold the first few only)
    coverage: TrialCoverage | None = None  # None: not scored, or against every decision (a biased sample)

    def as_json(self) -> dict:
        version = self.trial.criteria_version
        return {
            "id": self.trial.pk,
            "kind": version.kind,
            "criteria_version": version.number,
            "active_criteria_version": self.active_version.number if self.active_version else None,
            "source": self.trial.source,
            "scored_against_people": is_scored(self.trial),
            "finished": self.trial.finished_at is not None,
            "items": len(self.trial.sample),
            "graded": self.trial.graded,
            "compared": self.compared,
            "examples_left_out": self.examples_left_out,
            "judge_calls_counted": self.trial.judge_calls,
            "judge_calls": self.judge_calls,
            "tokens": {
                "prompt": self.prompt_tokens,
                "completion": self.completion_tokens,
                "total": self.prompt_tokens + self.completion_tokens,
            },
            "checks": {s.check: s.as_json() for s in self.checks} if is_scored(self.trial) else {},
            # Checks the trial's version adds (scored for the trial alone), and those it no longer asks.
            "added_checks": [s.check for s in self.checks if s.added],
            "dropped_checks": self.dropped,
            "coverage": self.coverage.as_json() if self.coverage is not None else None,
            "changed": [
                {
                    "item": c.external_id,
                    "check": c.check,
                    "active": c.active,
                    "trial": c.trial,
                    "human": c.human,
                    "direction": c.direction,
                }
                for c in self.changed
            ],
        }


def trial_score(trial: CriteriaTrial) -> TrialScore:
    """The trial's figures against people (see the module's docstring), with every item as scored. For a running
    trial, over the items graded so far."""
    trial = trial.items_read()
    version = trial.criteria_version
    kind = version.kind
    active_version = CriteriaVersion.objects.filter(org_id=trial.org_id, kind=kind, is_active=True).first()
    checks = checks_of(kind, version)
    asked_before = checks_of(kind, active_version) if active_version is not None else ()
    calibrated = _calibrated(version) if trial.source in UNBIASED_SOURCES else None
    items, trial_reviews = _scored_items(trial, checks, asked_before, calibrated, tokens=True)
    examples_left_out = sum(1 for item in items if item.left_out == EXAMPLE)
    asked = {
        check: (answers_of(kind, version, check), _scale(version, check), check in asked_before or check == PASS_FAIL)
        for check in checks
    }
    scored, changed = _compare(items, asked)
    return TrialScore(
        trial=trial,
        active_version=active_version,
        checks=scored,
        dropped=[check for check in asked_before if check not in checks],
        changed=changed,
        items=items,
        examples_left_out=examples_left_out,
        judge_calls=trial.judge_calls_made,
        prompt_tokens=sum(_tokens(row["prompt_tokens"]) for row in trial_reviews),
        completion_tokens=sum(_tokens(row["completion_tokens"]) for row in trial_reviews),
        compared=sum(1 for item in items if not item.left_out),
        changed_total=len(changed),
        coverage=calibrated.coverage() if calibrated is not None else None,
    )


def _scored_items(
    trial: CriteriaTrial,
    checks: tuple[str, ...],
    asked_before: tuple[str, ...],
    calibrated: "_Calibrated | None" = None,
    *,
    tokens: bool = False,
) -> tuple[list[ScoredItem], list[dict]]:
    """The trial's items (in sample order) as scored, and the trial reviews read for them (with their token counts
    if `tokens`); each compared item's calibration points go to `calibrated`."""
    version = trial.criteria_version
    kind = version.kind
    field = kind  # the review's foreign key to its item
    model = Draft if kind == ItemKind.DRAFT else Conversation
    sample, review_ids = trial.sample, trial.review_ids
    read = (*checks, *(check for check in asked_before if check not in checks))
    subjects = dict(model.objects.filter(id_in("pk", sample)).values_list("pk", "external_id"))
    trial_reviews = _verdict_rows(Review.objects.filter(id_in("pk", (r for r in review_ids if r))), read, tokens=tokens)
    active_reviews = {
        row["item_id"]: row
        for row in _verdict_rows(Review.objects.counting().filter(id_in(f"{field}_id", sample)), read, field)
    }
    humans = (
        human_verdicts(org_id=trial.org_id, kind=kind, source=trial.source, item_ids=sample) if is_scored(trial) else {}
    )
    examples = set(version.examples.filter(id_in(f"{field}_id", sample)).values_list(f"{field}_id", flat=True))
    by_review = {row["id"]: row for row in trial_reviews}
    verdicts = {check: machine_verdict(Lit(check)).fn for check in checks}  # compiled once: a trial holds thousands
    items = []
    for index, (item_id, review_id) in enumerate(zip(sample, review_ids, strict=True)):
        human = humans.get(item_id)
        mine = by_review.get(review_id) if review_id else None
        theirs = active_reviews.get(item_id)
        if human is not None and theirs is not None and theirs["fingerprint"] != human.fingerprint:
            theirs = None  # the active review read other evidence than the person did
        items.append(
            ScoredItem(
                index=index,
                item_id=item_id,
                external_id=subjects.get(item_id, ""),
                human=human,
                trial_review_id=mine["id"] if mine else None,
                active_review_id=theirs["id"] if theirs else None,
                trial=_verdicts(mine, verdicts),
                active=_verdicts(theirs, verdicts),
                left_out=_left_out(item_id, human, mine, examples, review_id),
            )
        )
        if calibrated is not None and not items[-1].left_out:
            calibrated.add(mine, human)
    return items, trial_reviews


class _Calibrated:
    """The trial's compared items as calibration points, per key the version certifies."""

    def __init__(self, version: CriteriaVersion, target: Target, own_target: bool) -> None:
        self.version, self.target, self.own_target = version, target, own_target
        self.check_set = version.check_set() if version.kind == ItemKind.CONVERSATION else None
        self.points: dict[str, list[CalibrationPoint]] = {key: [] for key in certified_keys(version)}
        self.labels = 0

    def add(self, review: dict, human: HumanVerdict) -> None:
        paired = False
        for key, points in self.points.items():
            point = calibration_point(self.check_set, key, review, human)
            if point is not None:
                points.append(point)
                paired = True
        self.labels += paired

    def coverage(self) -> TrialCoverage:
        checks = certified_checks(self.version, self.points, target=self.target)
        return TrialCoverage(target=self.target, own_target=self.own_target, labels=self.labels, checks=checks)


def _calibrated(version: CriteriaVersion) -> _Calibrated:
    target = Target.of(version)
    return _Calibrated(version, target or DEFAULT_TARGET, own_target=target is not None)


def _scale(version: CriteriaVersion, check: str) -> int | None:
    """The scale of `check` when `version` asks it as a score (a conversation check)."""
    if version.kind == ItemKind.DRAFT or check == PASS_FAIL:
        return None
    definition = version.check_set()[check]
    return definition.scale if definition.kind == AnswerKind.SCORE else None


def _verdict_rows(reviews, checks: tuple[str, ...], field: str | None = None, *, tokens: bool = False) -> list[dict]:
    """The columns the machine's answers to `checks` are read from (MACHINE_PASS_FAIL, CheckVerdict), the item's
    id, and if `tokens` the token counts."""
    columns = ["id", "kind", "route", "judge_passed", "fingerprint", "confidences"]
    # Only the verdicts and token counts, extracted by the database: decoding every review's whole `checks` (with
    # its rationales) and `usage` was most of a 10,000-item trial page's time (bench/README.md, bench_trials).
    extracted = {f"verdict_{check}": KeyTextTransform("verdict", KeyTransform(check, "checks")) for check in checks}
    if tokens:
        extracted |= {name: KeyTextTransform(name, "usage") for name in ("prompt_tokens", "completion_tokens")}
    rows = list(reviews.values(*columns, *([f"{field}_id"] if field else []), **extracted))
    for row in rows:
        row["item_id"] = row.get(f"{field}_id")
        row["checks"] = {check: {"verdict": row.pop(f"verdict_{check}")} for check in checks}
    return rows


def _verdicts(row: dict | None, verdicts: dict[str, Callable[[dict], str]]) -> dict[str, str]:
    if row is None or not SCORED.fn(row):
        return {}
    return {check: verdict(row) for check, verdict in verdicts.items()}


def _left_out(
    item_id: int, human: HumanVerdict | None, trial_row: dict | None, examples: set[int], review_id: int | None
) -> str:
    if item_id in examples:
        return EXAMPLE
    if review_id == HELD_BY_SPEND_CAP:
        return "held back by a spend cap: no judge call was made"
    if human is None:
        return "no human verdict on its present evidence"
    if review_id is None:
        return "not graded yet"
    if trial_row is None:
        return "gone before it was graded"
    if trial_row["fingerprint"] != human.fingerprint:
        return "its evidence changed since the trial read it"
    return ""


def _compare(
    items: list[ScoredItem], asked: dict[str, tuple[tuple[str, ...], int | None, bool]]
) -> tuple[list[ScoredCheck], list[ChangedVerdict]]:
    """Per check (with its answers, its scale if a score, and whether the active version asks it too), the two
    sides against people; a check the active version does not ask, the trial's side alone."""
    trial_pairs: dict[str, Counter] = {check: Counter() for check in asked}
    active_pairs: dict[str, Counter] = {check: Counter() for check in asked}
    changed = []
    for item in items:
        if item.left_out:
            continue
        for check, (categories, _, both_ask) in asked.items():
            human, mine, theirs = item.human.checks.get(check), item.trial.get(check), item.active.get(check)
            if not all(v in categories for v in (human, mine, *((theirs,) if both_ask else ()))):
                continue
            trial_pairs[check][(mine, human)] += 1
            if not both_ask:
                continue
            active_pairs[check][(theirs, human)] += 1
            if mine != theirs:
                direction = TOWARD if mine == human else AWAY if theirs == human else ASIDE
                changed.append(ChangedVerdict(item.item_id, item.external_id, check, theirs, mine, human, direction))
    scored = []
    for check, (categories, scale, both_ask) in asked.items():
        active = agreement_of(categories, active_pairs[check])
        if not both_ask:
            active = replace(active, note=NOT_ASKED)
        scored.append(
            ScoredCheck(
                check,
                agreement_of(categories, trial_pairs[check]),
                active,
                added=not both_ask,
                trial_scores=score_agreement(scale, trial_pairs[check]) if scale else None,
                active_scores=score_agreement(scale, active_pairs[check]) if scale else None,
            )
        )
    return scored, changed


# The form of the stored figures and of the rule that counts them: a new one makes every stored figure stale, so
# change it with anything above that changes what a trial's figures say.
FIGURES_FORM = 2


def trial_figures(trial: CriteriaTrial, *, items: range = range(0), changed: range | None = None) -> TrialScore:
    """`trial_score`'s figures, with the trial's items at the positions `items` as scored (a page of them) and its
    changed verdicts at the positions `changed` (None: every one). A finished scored trial's are counted once and
    stored (`TrialFigures`) with the key of what they were counted from (`_inputs`: the rows `trial_score` reads
    for the trial's own items, its versions and the trial itself). They are read back only while that key stands,
    so a read never shows figures a recount would not; otherwise they are counted again, and stored. Nothing is
    written on the grading path. The items as scored are stored with them, a row each (`TrialFiguresItem`), and a
    page of them is read in the statement that reads the key."""
    if trial.finished_at is None or not is_scored(trial):  # its figures still move as it runs: counted each time
        return _page(trial_score(trial), items, changed)
    inputs = _inputs(trial)
    page = {"page_items": _stored_items(trial, items)} if items else {}
    found = (
        CriteriaTrial.objects.filter(pk=trial.pk)
        .annotate(
            **inputs,
            stored_key=_stored_field(trial, "key"),
            figures=_stored_field(trial, "figures"),
            first_changed=_stored_field(trial, "changed" if changed is None else json_array_slice("changed", changed)),
            changed_total=_stored_field(trial, JsonArrayLength("changed")),
            **page,
        )
        .values_list(*inputs, "stored_key", "figures", "first_changed", "changed_total", *page)
        .get()
    )
    # The key is read in the same statement as the figures and their items, before any recount: a write committed
    # after it moves the key on, and the next read counts again.
    key = _key(found[: len(inputs)])
    stored_key, figures, first_changed, changed_total, *page_items = found[len(inputs) :]
    if stored_key == key:
        return _restored(trial, figures, first_changed, changed_total, page_items[0] if page_items else None)
    score = trial_score(trial)
    _store(trial, key, score)
    return _page(score, items, changed)


def _store(trial: CriteriaTrial, key: str, score: TrialScore) -> None:
    """The figures and their items under `key`, in one transaction. The figures' row is written first: a second
    count storing at once waits on it, then replaces the first one's items."""
    with transaction.atomic():
        TrialFigures.objects.bulk_create(
            [
                TrialFigures(
                    trial=trial, key=key, figures=_stored(score), changed=[_changed_json(c) for c in score.changed]
                )
            ],
            update_conflicts=True,
            unique_fields=["trial"],
            update_fields=["key", "figures", "changed"],
        )
        TrialFiguresItem.objects.filter(figures_id=trial.pk).delete()
        trial_items_save(trial.pk, [(item.index, _item_json(item)) for item in score.items])


def _stored_items(trial: CriteriaTrial, positions: range) -> Subquery:
    """The trial's stored items at `positions`, in order, as one JSON array; NULL when none are stored there."""
    rows = TrialFiguresItem.objects.filter(
        figures_id=trial.pk, position__gte=positions.start, position__lt=positions.stop
    )
    return Subquery(
        rows.order_by().values("figures_id").annotate(rows=JSONBAgg("row", order_by="position")).values("rows")
    )


def _inputs(trial: CriteriaTrial) -> dict[str, Subquery]:
    """What `trial_score` reads, for a query of the trial's row: the trial (its items and reviews), its version and
    the active one, and the version's examples as written-rows figures (`RowsWritten`) of exactly those rows; the
    items, every review of them (the trial's, the counting ones, their states and audit marks), the decisions on
    those and the items' labels as the trial's own count of the writes to them (`TrialItem`, kept by the
    database): one row an item, rather than each of the rows it counts."""
    version = trial.criteria_version
    read = {
        "trial": CriteriaTrial.objects.filter(pk=trial.pk).values(written=RowsWritten()),
        "versions": CriteriaVersion.objects.filter(
            Q(pk=version.pk) | Q(org_id=trial.org_id, kind=version.kind, is_active=True)
        ).values(written=RowsWritten()),
        "examples": CriteriaExample.objects.filter(criteria_version_id=version.pk).values(written=RowsWritten()),
        "items": TrialItem.objects.filter(trial_id=trial.pk).values(counted=RowsAndSum("written")),
    }
    return {f"inputs_{name}": Subquery(rows.order_by()) for name, rows in read.items()}


def _stored_field(trial: CriteriaTrial, field: str | Func | F) -> Subquery:
    """A column (or an expression of the columns) of the trial's stored figures; NULL when none are stored."""
    value = F(field) if isinstance(field, str) else field
    return Subquery(TrialFigures.objects.filter(trial_id=trial.pk).values(value=value))


def _key(written: tuple[str, ...]) -> str:
    return ";".join((str(FIGURES_FORM), *written))


def _page(score: TrialScore, items: range, changed: range | None) -> TrialScore:
    return replace(
        score,
        items=score.items[items.start : items.stop],
        changed=score.changed if changed is None else score.changed[changed.start : changed.stop],
    )


def _stored(score: TrialScore) -> dict:
    """The figures as stored: every number exactly as counted (JSON keeps a float's shortest repr)."""
    coverage = score.coverage
    return {
        "active_version": score.active_version.pk if score.active_version else None,
        "checks": [
            {
                "check": s.check,
                "trial": asdict(s.trial),
                "active": asdict(s.active),
                "added": s.added,
                "trial_scores": asdict(s.trial_scores) if s.trial_scores else None,
                "active_scores": asdict(s.active_scores) if s.active_scores else None,
            }
            for s in score.checks
        ],
        "dropped": score.dropped,
        "examples_left_out": score.examples_left_out,
        "judge_calls": score.judge_calls,
        "prompt_tokens": score.prompt_tokens,
        "completion_tokens": score.completion_tokens,
        "compared": score.compared,
        "coverage": None
        if coverage is None
        else {
            "alpha": coverage.target.alpha,
            "delta": coverage.target.delta,
            "own_target": coverage.own_target,
            "labels": coverage.labels,
            "checks": {key: asdict(certificate) for key, certificate in coverage.checks.items()},
        },
    }


def _item_json(item: ScoredItem) -> list:
    """An item as scored, as stored: its dicts as pairs, in their order (JSONB orders an object's keys its own way)."""
    human = item.human
    return [
        item.index, item.item_id, item.external_id,
        None if human is None else [human.item_id, human.fingerprint, list(human.checks.items()), human.note,
                                    human.source, human.review_id, human.at.isoformat()],
        item.trial_review_id, item.active_review_id, list(item.trial.items()), list(item.active.items()),
        item.left_out,
    ]  # fmt: skip


def _item(row: list) -> ScoredItem:
    index, item_id, external_id, human, trial_review_id, active_review_id, trial, active, left_out = row
    if human is not None:
        human_id, fingerprint, checks, note, source, review_id, at = human
        human = HumanVerdict(human_id, fingerprint, dict(checks), note, source, review_id, datetime.fromisoformat(at))
    return ScoredItem(
        index, item_id, external_id, human, trial_review_id, active_review_id, dict(trial), dict(active), left_out
    )


def _changed_json(change: ChangedVerdict) -> list:
    return [change.item_id, change.external_id, change.check, change.active, change.trial, change.human,
            change.direction]  # fmt: skip


def _restored(trial: CriteriaTrial, figures: dict, changed: list, changed_total: int, items: list | None) -> TrialScore:
    active_id = figures["active_version"]
    active_version = CriteriaVersion.objects.filter(pk=active_id).first() if active_id is not None else None
    coverage = figures["coverage"]
    return TrialScore(
        trial=trial,
        active_version=active_version,
        checks=[
            ScoredCheck(
                check=s["check"],
                trial=_agreement(s["trial"]),
                active=_agreement(s["active"]),
                added=s["added"],
                trial_scores=_score_agreement(s["trial_scores"]),
                active_scores=_score_agreement(s["active_scores"]),
            )
            for s in figures["checks"]
        ],
        dropped=figures["dropped"],
        changed=[ChangedVerdict(*row) for row in changed],
        items=[_item(row) for row in items or ()],
        examples_left_out=figures["examples_left_out"],
        judge_calls=figures["judge_calls"],
        prompt_tokens=figures["prompt_tokens"],
        completion_tokens=figures["completion_tokens"],
        compared=figures["compared"],
        changed_total=changed_total,
        coverage=None
        if coverage is None
        else TrialCoverage(
            target=Target(alpha=coverage["alpha"], delta=coverage["delta"]),
            own_target=coverage["own_target"],
            labels=coverage["labels"],
            checks={key: CheckCertificate(**certificate) for key, certificate in coverage["checks"].items()},
        ),
    )


def _pair(value: list | None) -> tuple | None:
    return tuple(value) if value is not None else None


def _agreement(stored: dict) -> Agreement:
    return Agreement(
        **stored
        | {
            "categories": tuple(stored["categories"]),
            "table": tuple(tuple(row) for row in stored["table"]),
            "percent_interval": _pair(stored["percent_interval"]),
            "kappa_interval": _pair(stored["kappa_interval"]),
        }
    )


def _score_agreement(stored: dict | None) -> ScoreAgreement | None:
    if stored is None:
        return None
    return ScoreAgreement(
        **stored
        | {
            "weighted_kappa_interval": _pair(stored["weighted_kappa_interval"]),
            "alpha_interval": _pair(stored["alpha_interval"]),
        }
    )


def trial_rows(score: TrialScore) -> Iterator[list[object]]:
    """The trial's items as rows for a CSV (header first): per check, people's, the trial's and the active
    version's verdicts, and why an item is not compared."""
    checks = [scored.check for scored in score.checks]
    yield [
        "index", "item", "trial_review", "active_review", "compared", "left_out",
        *(f"{check}_{side}" for check in checks for side in ("human", "trial", "active")),
    ]  # fmt: skip
    for item in score.items:
        human = item.human.checks if item.human else {}
        yield [
            item.index, item.external_id, item.trial_review_id, item.active_review_id, not item.left_out,
            item.left_out,
            *(v.get(check, "") for check in checks for v in (human, item.trial, item.active)),
        ]  # fmt: skip


def _tokens(value: str | None) -> int:
    """A token count as the usage JSON's text holds it; anything but a whole number counts nothing."""
    return int(value) if value is not None and value.isdigit() else 0


def is_scored(trial: CriteriaTrial) -> bool:
    """Whether the trial is scored against people (its source is people's verdicts, not the current reviews)."""
    return trial.source != TrialSource.CURRENT
