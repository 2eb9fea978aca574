"""Criteria versions over the API (`/api/v1/criteria/...`): what a criteria admin does on the criteria pages, for
the key's org, through the services the pages call (grading/reviews/versions.py, grading/criteria/), so the rules,
refusals and audit events are theirs: list and read versions, clone one into a new unpublished version, edit it
(every refused field named in one 400, nothing written), preview it, count and start a trial, read the publication
plan and publish as planned.

Who acts is `_actor(request)`, the one place each write names its actor: a criteria admin's personal token names the
person, as the pages do; an org key is recorded on the audit event as the key (`api_key`), since a key is no person."""

from datetime import datetime
from typing import Annotated, Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError, ValidationError
from pydantic import ConfigDict

from grading.api.keys import caller_acting
from grading.certify.reads import certification_json
from grading.core.errors import NotFound
from grading.core.schemas import Identifier, Storable
from grading.criteria.impact import (
    PREVIEW_DEFAULT,
    PREVIEW_MAX,
    Preview,
    PublishPlan,
    criteria_preview,
    criteria_publish_planned,
    publish_plan,
)
from grading.criteria.rule_preview import RulePreview, rules_preview
from grading.criteria.trials import (
    TRIAL_DEFAULT,
    TrialCount,
    TrialCountChanged,
    TrialRunning,
    TrialsPerHourReached,
    criteria_trial_start,
    trial_count,
    trial_results,
)
from grading.judge.backends import UnknownJudge
from grading.models import CriteriaTrial, CriteriaVersion, ItemKind, Review, TrialSource
from grading.reviews.blind import reviews_blind
from grading.reviews.spend import SpendCapPassed, SpendCheck, spend_check
from grading.reviews.versions import (
    CriteriaConflict,
    CriteriaImmutable,
    CriteriaInvalid,
    criteria_new_version,
    criteria_update,
)

router = Router(tags=["criteria"])

DRAFT, PUBLISHED, RETIRED = "draft", "published", "retired"  # a version's state: unpublished, active, replaced


# --- errors, as the OpenAPI document describes them -------------------------------------------------------------


class FieldError(Schema):
    field: str  # "rubric", "rules.threshold", "checks.0.question", "body", a query parameter
    message: str


class Refused(Schema):
    detail: str  # why, and what to do


class FieldsRefused(Refused):
    errors: list[FieldError]  # every refused field at once


BAD = {400: FieldsRefused}
MISSING = {404: Refused}
CONFLICT = {409: Refused}


def _actor(request: HttpRequest) -> dict[str, Any]:
    """Who a write is by (`caller_acting`): the person of a personal token (a criteria admin: the token's table lets
    no other role through), else the org key."""
    return caller_acting(request.auth)


def _version(request: HttpRequest, version_id: int) -> CriteriaVersion:
    """The key's org's version; another org's is as unknown as none."""
    version = (
        CriteriaVersion.objects.filter(org=request.auth.org, pk=version_id)
        .select_related("org", "author", "based_on", "updated_by")
        .first()
    )
    if version is None:
        raise NotFound(f"no criteria version {version_id}")
    return version


def _kind(kind: str) -> str:
    if kind not in ItemKind.values:
        raise NotFound(f"no criteria of kind {kind!r}: draft or conversation")
    return kind


def _refused_query(field: str, message: str) -> ValidationError:
    return ValidationError([{"loc": ["query", field], "msg": message}])


# --- versions -------------------------------------------------------------------------------------------------


class VersionRef(Schema):
    id: int
    number: int


class VersionSummaryOut(Schema):
    id: int
    kind: str
    number: int
    state: str  # draft (unpublished, editable), published (the active one), retired (published, then replaced)
    created_at: datetime
    published_at: datetime | None
    based_on: VersionRef | None  # the version it was cloned from (null: the seeded v1)
    author: str | None  # the person who created it; null for a key or the seed
    revision: int  # moves on with every saved edit: pass it back to edit without overwriting someone's save
    judge: str
    checks: list[str]  # the keys of the checks it asks, in order


class VersionOut(VersionSummaryOut):
    updated_at: datetime | None
    updated_by: str | None  # the person who saved last; null for a key
    rubric: str
    rules: dict | None  # drafts: the rules document (its threshold and band among them); conversations: null
    threshold: float | None  # drafts: the score a draft needs to pass (rules.threshold)
    band: float | None  # drafts: how near the threshold a score goes to people (rules.band)
    check_set: dict  # the checks document: each check's key, name, question, answers, guidance and rules
    judge_configured: bool  # publishing and trials are refused under a judge that is not configured
    routing: list  # which items go to people whatever the machine decides
    slots: int  # people who decide each item `slots_for` names
    slots_for: str
    slots_share: int
    examples: int  # worked examples the judge reads with it
    certification: dict  # the target the machine decides alone under and the latest certificate


def _state(version: CriteriaVersion) -> str:
    if version.published_at is None:
        return DRAFT
    return PUBLISHED if version.is_active else RETIRED


def _ref(version: CriteriaVersion | None) -> dict | None:
    return None if version is None else {"id": version.pk, "number": version.number}


def _name(user) -> str | None:
    return user.get_username() if user is not None else None


def summary_out(version: CriteriaVersion) -> dict:
    return {
        "id": version.pk,
        "kind": version.kind,
        "number": version.number,
        "state": _state(version),
        "created_at": version.created_at,
        "published_at": version.published_at,
        "based_on": _ref(version.based_on),
        "author": _name(version.author),
        "revision": version.revision,
        "judge": version.judge,
        "checks": version.check_set().keys,
    }


def version_out(version: CriteriaVersion) -> dict:
    rules = version.draft_rules() if version.kind == ItemKind.DRAFT else None
    return {
        **summary_out(version),
        "updated_at": version.updated_at,
        "updated_by": _name(version.updated_by),
        "rubric": version.rubric,
        "rules": rules.model_dump(mode="json") if rules else None,
        "threshold": rules.threshold if rules else None,
        "band": rules.band if rules else None,
        "check_set": version.check_set().model_dump(mode="json"),
        "judge_configured": version.judge in settings.JUDGES,
        "routing": version.routing,
        "slots": version.slots,
        "slots_for": version.slots_for,
        "slots_share": version.slots_share,
        "examples": version.examples.count(),
        "certification": certification_json(version),
    }


@router.get(
    "/criteria/{kind}/versions", response={200: list[VersionSummaryOut], **MISSING}, summary="Every version of a kind"
)
def get_criteria_versions(request: HttpRequest, kind: str) -> list[dict]:
    """The org's versions of `kind` (draft or conversation), newest first; history is kept for ever."""
    versions = (
        CriteriaVersion.objects.filter(org=request.auth.org, kind=_kind(kind))
        .select_related("author", "based_on")
        .order_by("-number")
    )
    return [summary_out(version) for version in versions]


class NewVersionIn(Schema):
    model_config = ConfigDict(extra="forbid")

    source: int | None = None  # the id of the version to clone (any of the kind: rolling back); omitted: the active


@router.post(
    "/criteria/{kind}/versions",
    response={201: VersionOut, **BAD, **MISSING},
    summary="A new unpublished version, cloned",
)
def post_criteria_version(request: HttpRequest, kind: str, payload: NewVersionIn) -> Status[VersionOut]:
    """Cloned from `source` or else from the active version, with its worked examples; editable until published.
    A `source` of another org or kind is a 404. Audited as `criteria.create`."""
    kind = _kind(kind)
    source = None
    if payload.source is not None:
        source = _version(request, payload.source)
        if source.kind != kind:
            raise NotFound(f"no {kind} criteria version {payload.source}")
    actor = _actor(request)
    version = criteria_new_version(
        org=request.auth.org, kind=kind, source=source, author=actor.get("actor"), api_key=actor.get("api_key")
    )
    return Status(201, version_out(_version(request, version.pk)))


@router.get("/criteria/versions/{version_id}", response={200: VersionOut, **MISSING}, summary="A criteria version")
def get_criteria_version(request: HttpRequest, version_id: int) -> dict:
    """What it asks (rubric, checks, rules with threshold and band, judge, routing, people per item), its state and
    what it was cloned from."""
    return version_out(_version(request, version_id))


class VersionEditIn(Schema):
    """The fields to change; each one given replaces that field whole (read the version, change, send back)."""

    model_config = ConfigDict(extra="forbid")

    revision: int | None = Field(None, ge=1)  # the revision read: refused (409) if someone saved since; omitted: none
    rubric: Annotated[str, Storable] | None = None
    rules: Annotated[dict, Storable] | None = None  # drafts only: the whole rules document (threshold and band in it)
    checks: Annotated[dict, Storable] | None = None  # the checks document, as `check_set` reads
    judge: Annotated[Identifier, Field(max_length=100)] | None = None  # a configured judge's name
    routing: Annotated[list, Storable] | None = None
    slots: int | None = None
    slots_for: Annotated[Identifier, Field(max_length=16)] | None = None
    slots_share: int | None = None


@router.patch(
    "/criteria/versions/{version_id}",
    response={200: VersionOut, **BAD, **MISSING, **CONFLICT},
    summary="Edit an unpublished version",
)
def patch_criteria_version(request: HttpRequest, version_id: int, payload: VersionEditIn) -> dict:
    """The editor's save. Every field the rules refuse is named in one 400 (`errors`), and nothing is written; a
    published version is a 409, and so is a `revision` someone else saved past (naming them). Audited as
    `criteria.update` with the fields it changed."""
    version = _version(request, version_id)
    edit = payload.model_dump(exclude={"revision"}, exclude_none=True)
    try:
        saved = criteria_update(version=version, revision=payload.revision, **edit, **_actor(request))
    except (CriteriaImmutable, CriteriaConflict) as refused:
        raise HttpError(409, str(refused)) from None
    except CriteriaInvalid as invalid:
        errors = [{"loc": ["body", path], "msg": m} for path, messages in invalid.errors.items() for m in messages]
        raise ValidationError(errors) from None
    return version_out(_version(request, saved.pk))


# --- the preview ----------------------------------------------------------------------------------------------


class PreviewOut(Schema):
    version: VersionRef
    kind: str
    asked: int  # the N of "the last N items"
    read: int  # items read (the org may have fewer)
    compared: int  # drafts: with a current review to compare; conversations: scorable paths the rules ran on
    unchecked: int  # drafts: of the compared, past the checks' CPU budget; conversations: paths past it
    rows: list[dict]  # the items whose outcome would change (drafts) or a rule matched (conversations), newest first


BLIND = "people decide this item blind: the machine's verdicts on it are not shown"


def _blind(reviews: list[Review | None]) -> set[int]:
    """Of these current reviews, those of items people decide blind: nobody sees what the machine said of them
    (grading/reviews/blind.py), a key no more than a person."""
    hidden = reviews_blind([review for review in reviews if review is not None])
    return {review_id for review_id, blind in hidden.items() if blind.verdicts}


def _draft_preview(preview: Preview) -> list[dict]:
    blind = _blind([row.review for row in preview.rows])
    rows = []
    for row in preview.rows:
        hidden = row.review.pk in blind
        rows.append(
            {
                "item": {"kind": ItemKind.DRAFT, "id": row.draft.pk, "external_id": row.draft.external_id},
                "title": row.draft.title,
                "new_findings": row.new_findings,
                "gone_findings": None if hidden else row.gone_findings,
                "route_before": None if hidden else row.route_before,
                "route_after": row.route_after,  # null: only the judge can tell
                "hidden": BLIND if hidden else "",
            }
        )
    return rows


def _conversation_preview(preview: RulePreview) -> list[dict]:
    blind = _blind([row.review for row in preview.rows])
    rows = []
    for row in preview.rows:
        hidden = row.review is not None and row.review.pk in blind
        rows.append(
            {
                "item": {"kind": ItemKind.CONVERSATION, "id": row.conversation.pk,
                         "external_id": row.conversation.external_id},
                "matches": [
                    {"check": m.key, "sets": m.sets, "findings": m.findings, "notes": m.notes,
                     "answer_now": None if hidden else m.answer_now}
                    for m in row.matches
                ],
                "route_before": None if hidden else row.route_before or None,
                "route_after": row.route_after or None,  # null: the judge decides
                "hidden": BLIND if hidden else "",
            }
        )  # fmt: skip
    return rows


@router.get(
    "/criteria/versions/{version_id}/preview",
    response={200: PreviewOut, **BAD, **MISSING},
    summary="What the version's checks change on recent items, no judge calls",
)
def get_criteria_preview(request: HttpRequest, version_id: int, n: int = PREVIEW_DEFAULT) -> dict:
    """The preview page's: a draft version's deterministic checks over the org's last `n` drafts beside their
    current reviews (the route each would take with the judge's recorded score); a conversation version's rules over
    the last `n` conversations. No judge is called, nothing is written; what the judge would say is a trial's."""
    if not 1 <= n <= PREVIEW_MAX:
        raise _refused_query("n", f"must be from 1 to {PREVIEW_MAX}")
    version = _version(request, version_id)
    if version.kind == ItemKind.CONVERSATION:
        rules = rules_preview(version=version, limit=n)
        compared, rows = rules.checked, _conversation_preview(rules)
        read, unchecked = rules.read, rules.unchecked
    else:
        drafts = criteria_preview(version=version, limit=n)
        compared, rows = drafts.compared, _draft_preview(drafts)
        read, unchecked = drafts.read, drafts.unchecked
    return {"version": _ref(version), "kind": version.kind, "asked": n, "read": read, "compared": compared,
            "unchecked": unchecked, "rows": rows}  # fmt: skip


# --- trials ---------------------------------------------------------------------------------------------------


class CapWarningOut(Schema):
    scope: str  # org, or criteria_version
    period: str  # day or week
    measure: str  # tokens or cost
    spent: int
    estimate: int | None  # null: not estimated; the cap is reached already
    limit: int
    message: str


class SpendOut(Schema):
    judge_calls: int
    tokens: int | None  # null: no estimate yet
    cost_micros: int | None
    warnings: list[CapWarningOut]  # the caps this would pass, or that are reached: starting is refused then


def spend_out(check: SpendCheck) -> dict:
    return {
        "judge_calls": check.estimate.calls,
        "tokens": check.estimate.tokens,
        "cost_micros": check.estimate.cost_micros,
        "warnings": [
            {
                "scope": "org" if w.cap.criteria_version_id is None else "criteria_version",
                "period": w.cap.period,
                "measure": w.measure,
                "spent": w.spent,
                "estimate": w.estimate,
                "limit": w.limit,
                "message": w.describe(),
            }
            for w in check.warnings
        ],
    }


class TrialItemOut(Schema):
    kind: str
    id: int
    external_id: str
    judge_calls: int


class TrialCountOut(Schema):
    version: VersionRef
    k: int
    source: str
    items: list[TrialItemOut]  # the sample, by the fixed rule
    judge_calls: int  # pass it as `counted_calls` to start: refused if the sample changed since
    spend: SpendOut


def _trial_source(source: str) -> str:
    if source not in TrialSource.values:
        raise _refused_query("source", f"must be one of {', '.join(TrialSource.values)}")
    return source


def _trial_size(k: int) -> int:
    if not 1 <= k <= settings.CRITERIA_TRIAL_MAX_ITEMS:
        raise _refused_query("k", f"must be from 1 to {settings.CRITERIA_TRIAL_MAX_ITEMS}")
    return k


def count_out(count: TrialCount, source: str, k: int) -> dict:
    return {
        "version": _ref(count.version),
        "k": k,
        "source": source,
        "items": [
            {
                "kind": count.version.kind,
                "id": item.subject.pk,
                "external_id": item.subject.external_id,
                "judge_calls": item.judge_calls,
            }
            for item in count.items
        ],  # fmt: skip
        "judge_calls": count.judge_calls,
        "spend": spend_out(spend_check(version=count.version, calls=count.judge_calls)),
    }


@router.get(
    "/criteria/versions/{version_id}/trial-count",
    response={200: TrialCountOut, **BAD, **MISSING, **CONFLICT},
    summary="The judge calls a trial of k items would make",
)
def get_criteria_trial_count(
    request: HttpRequest, version_id: int, k: int = TRIAL_DEFAULT, source: str = TrialSource.CURRENT
) -> dict:
    """Counted before anything is spent: the sample (the items with the smallest hash among those with a current
    review, or with a human verdict from `source`: audit, decisions or labels) and its judge calls, with the spend
    caps they would pass. 409 when the version's judge is not configured."""
    k, source = _trial_size(k), _trial_source(source)
    version = _version(request, version_id)
    try:
        return count_out(trial_count(version=version, size=k, source=source), source, k)
    except UnknownJudge as refused:
        raise HttpError(409, f"{refused} Choose a configured judge first.") from None


class TrialStartIn(Schema):
    model_config = ConfigDict(extra="forbid")

    k: int = TRIAL_DEFAULT  # items in the sample
    source: str = TrialSource.CURRENT  # current, audit, decisions or labels
    counted_calls: int  # the `judge_calls` of the count read: refused if the sample changed since


class TrialOut(Schema):
    id: int
    version: VersionRef
    source: str
    items: int
    judge_calls: int  # counted before it started
    graded: int
    requested_at: datetime
    finished_at: datetime | None  # null: running; its figures are GET /criteria/trials/{id}


def trial_out(trial: CriteriaTrial) -> dict:
    return {
        "id": trial.pk,
        "version": _ref(trial.criteria_version),
        "source": trial.source,
        "items": len(trial.sample),
        "judge_calls": trial.judge_calls,
        "graded": trial.graded,
        "requested_at": trial.requested_at,
        "finished_at": trial.finished_at,
    }


@router.post(
    "/criteria/versions/{version_id}/trials",
    response={202: TrialOut, **BAD, **MISSING, **CONFLICT, 429: Refused},
    summary="Start a trial: the sample graded under the version by its judge",
)
def post_criteria_trial(request: HttpRequest, version_id: int, payload: TrialStartIn) -> Status[TrialOut]:
    """Started if the judge calls are still `counted_calls`; the workers grade it, and GET /criteria/trials/{id}
    reads its figures. 409: the version is published, its judge is not configured, the count changed, a trial of it
    is running, or a spend cap would be passed; 429: the org started as many trials this hour as it may. Audited as
    `criteria.trial`."""
    k, source = _trial_size(payload.k), _trial_source(payload.source)
    version = _version(request, version_id)
    try:
        trial = criteria_trial_start(
            version=version, size=k, counted_calls=payload.counted_calls, source=source, **_actor(request)
        )
    except (CriteriaImmutable, TrialCountChanged, TrialRunning, SpendCapPassed) as refused:
        raise HttpError(409, str(refused)) from None
    except UnknownJudge as refused:
        raise HttpError(409, f"{refused} Choose a configured judge first.") from None
    except TrialsPerHourReached as refused:
        raise HttpError(429, str(refused)) from None
    return Status(202, trial_out(trial))


def _review_summary(review: Review | None) -> dict | None:
    if review is None:
        return None
    return {"route": review.route, "reason": review.reason, "score": review.score,
            "criteria_version": review.criteria_version.number}  # fmt: skip


def trial_results_out(trial: CriteriaTrial) -> list[dict]:
    """A trial compared with the current reviews (not scored against people), as its page lists it: per sample
    item, its current review and its trial review, or why it has none; both hidden while people decide it blind."""
    results = trial_results(trial)
    blind = _blind([current for _, current, _, _ in results])
    rows = []
    for item, current, review, why in results:
        hidden = current is not None and current.pk in blind
        rows.append(
            {
                "item": item.external_id if item is not None else None,  # null: gone
                "current": None if hidden else _review_summary(current),
                "trial": None if hidden else _review_summary(review),
                "missing": why,  # why the trial review is null for good ("" while it waits for the judge)
                "hidden": BLIND if hidden else "",
            }
        )
    return rows


@router.get(
    "/criteria/versions/{version_id}/trials", response={200: list[TrialOut], **MISSING}, summary="A version's trials"
)
def get_criteria_trials(request: HttpRequest, version_id: int) -> list[dict]:
    """Newest first."""
    version = _version(request, version_id)
    return [trial_out(trial) for trial in version.trials.select_related("criteria_version").order_by("-pk")]


# --- publishing -----------------------------------------------------------------------------------------------


class StaleGroupOut(Schema):
    application: str  # conversations: the application; drafts: "drafts"
    reviews: int
    judge_calls: int


class PlanOut(Schema):
    version: VersionRef
    replaces: VersionRef | None  # the active version now: pass its number as `replaces` to publish
    made_at: datetime
    judge: str
    judge_configured: bool  # publishing is refused (409) when it is not
    judge_changes: bool  # the version names another judge than the active one's
    stale: int  # current reviews that stop counting
    groups: list[StaleGroupOut]
    decided: int  # of them, decided by people: their decisions stop counting with them
    items: int  # items of the kind: every one is graded again under the version
    waiting: int  # of them, items with no current review now
    judge_calls: int
    tokens: int | None  # null: no review of the kind recorded its usage yet
    spend: SpendOut
    pass_cap: int  # judge tasks one grading pass enqueues, every org and kind together
    next_pass_takes_at_least: int
    next_pass_takes_at_most: int
    passes: int  # hourly passes until every item is enqueued, at worst


def plan_out(plan: PublishPlan) -> dict:
    version = plan.version
    return {
        "version": _ref(version),
        "replaces": _ref(plan.active),
        "made_at": plan.made_at,
        "judge": version.judge,
        "judge_configured": plan.judge_configured,
        "judge_changes": plan.judge_changes,
        "stale": plan.stale,
        "groups": [
            {"application": g.application, "reviews": g.reviews, "judge_calls": g.judge_calls} for g in plan.groups
        ],  # fmt: skip
        "decided": plan.decided,
        "items": plan.items,
        "waiting": plan.waiting,
        "judge_calls": plan.judge_calls,
        "tokens": plan.tokens,
        "spend": spend_out(spend_check(version=version, calls=plan.judge_calls, estimate=plan.estimate)),
        "pass_cap": plan.cap,
        "next_pass_takes_at_least": plan.next_pass_takes_at_least,
        "next_pass_takes_at_most": plan.next_pass_takes_at_most,
        "passes": plan.passes,
    }


@router.get(
    "/criteria/versions/{version_id}/publish-plan",
    response={200: PlanOut, **MISSING, **CONFLICT},
    summary="What publishing the version would do",
)
def get_criteria_publish_plan(request: HttpRequest, version_id: int) -> dict:
    """The plan the publish page shows before the admin confirms: what goes stale, the judge calls and tokens the
    re-grade takes, when the passes get to it. 409 when the version is published already."""
    version = _version(request, version_id)
    if version.published_at is not None:
        raise HttpError(409, f"{version} is published already: it has no plan")
    return plan_out(publish_plan(version=version))


class PublishIn(Schema):
    model_config = ConfigDict(extra="forbid")

    replaces: int  # the number of the plan's `replaces`: refused (409) if another version was published since
    regrade_now: bool = False  # run a grading pass once published, rather than at the next hourly one


class PublishedOut(Schema):
    version: VersionOut
    published_now: bool  # false: it was published already (nothing changed)
    replaced: VersionRef | None
    grading_pass: dict | None  # with `regrade_now`: {"enqueued", "backlog"} of the pass run


@router.post(
    "/criteria/versions/{version_id}/publish",
    response={200: PublishedOut, **BAD, **MISSING, **CONFLICT},
    summary="Publish as planned",
)
def post_criteria_publish(request: HttpRequest, version_id: int, payload: PublishIn) -> dict:
    """Makes the version immutable and active: every current review of its kind stops counting and is graded again.
    Refused (409, nothing changed) when another version was published after the plan was read (`replaces` is not
    the active one), or its judge is not configured. Publishing a published version again changes nothing
    (`published_now` false), as the page does. Audited as `criteria.publish`."""
    version = _version(request, version_id)
    if version.published_at is not None:
        return {"version": version_out(version), "published_now": False, "replaced": None, "grading_pass": None}
    replaced = CriteriaVersion.objects.filter(org=request.auth.org, kind=version.kind, number=payload.replaces).first()
    if replaced is None or replaced.published_at is None:
        message = f"no published {version.kind} version {payload.replaces}"
        raise ValidationError([{"loc": ["body", "replaces"], "msg": message}])
    try:
        published, regrade = criteria_publish_planned(
            version=version, plan_active_id=replaced.pk, regrade_now=payload.regrade_now, **_actor(request)
        )
    except (CriteriaConflict, CriteriaImmutable, UnknownJudge) as refused:
        raise HttpError(409, str(refused)) from None
    run = regrade.run if regrade is not None else None
    return {
        "version": version_out(_version(request, published.pk)),
        "published_now": True,
        "replaced": _ref(replaced),
        "grading_pass": {"enqueued": run.enqueued, "backlog": run.backlog} if run is not None else None,
    }
