"""The regression sets API (/api/v1/sets): build a set from a filter or from ids, list and read sets, start a run of
a criteria version over one and read how it went. Building, running and the figures are grading/sets'; this only
parses and answers. A set is named by its name, unique in the org; another org's set is a 404.

A run's JSON (`RunOut`) is the one the CLI reads: `state` is `running` until every item is graded, then `done`;
`passed` is null until then, or when no `min_agreement` was given. `checks` holds, per check the version asks and
`pass_fail` (the whole item), the machine's answers against the expected ones: `n` compared, `agreed`, `percent`
with its Wilson 95% `percent_interval`, Cohen's kappa and the confusion table. `overall` pools every check's
compared answers; `passed` is `overall.percent >= min_agreement`. `changed` lists (up to 500 of `changed_count`)
the answers that differ from the expected ones.
"""

from datetime import datetime
from typing import Annotated, Literal, Self

from django.db import transaction
from django.http import HttpRequest
from ninja import Router, Schema, Status
from ninja.errors import ValidationError
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from grading.api.keys import Caller, caller_acting
from grading.core.errors import NotFound
from grading.core.schemas import ExternalId
from grading.core.weeks import week_named
from grading.models import CriteriaVersion, ItemKind, Org, RegressionRun, RegressionSet, SetSource
from grading.models.audit import audit_record
from grading.reviews.spend import SpendCapPassed
from grading.sets.build import MAX_ITEMS, NAME_PATTERN, SetFilter, SetRefused, built_from, set_build
from grading.sets.runs import run_json, set_run_start

router = Router(tags=["sets"])

SetName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
DimensionText = Annotated[str, StringConstraints(min_length=1, max_length=200)]


def _refused(field: str, message: str) -> ValidationError:
    return ValidationError([{"loc": ["body", field], "msg": message}])


class SetFilterIn(BaseModel):
    """Which items: every bound given must hold. Weeks are ISO weeks of the item's start, like 2026-W41."""

    model_config = ConfigDict(extra="forbid")

    application: Annotated[str, StringConstraints(max_length=100)] = ""
    since: str | None = None
    until: str | None = None
    dimensions: dict[DimensionText, DimensionText] = Field(default_factory=dict, max_length=3)


class SetIn(BaseModel):
    """A set from a filter or from the items' external ids (exactly one of the two)."""

    model_config = ConfigDict(extra="forbid")

    name: SetName
    kind: Literal["conversation", "draft"]
    source: Literal["decisions", "labels", "corrections"]
    filter: SetFilterIn | None = None
    ids: list[ExternalId] | None = Field(default=None, min_length=1, max_length=MAX_ITEMS)

    @model_validator(mode="after")
    def _filter_or_ids(self) -> Self:
        if (self.filter is None) == (self.ids is None):
            raise ValueError("give exactly one of filter or ids")
        return self


class SetOut(Schema):
    name: str
    kind: str
    built_from: dict
    items: int
    skipped: int  # items asked for that had no expected answer from the source
    erased: int  # items removed since because they were erased
    created_at: datetime
    last_run: dict | None


class SetItemOut(Schema):
    item: str  # the external id of the item it was copied from
    application: str
    fingerprint: str
    source: str
    expected: dict[str, str]
    expected_verdict: str


class SetDetailOut(SetOut):
    set_items: list[SetItemOut]


class RunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, le=2**31 - 1)  # the criteria version's number, of the set's kind
    min_agreement: float | None = Field(default=None, ge=0, le=1)


class RunOut(Schema):
    id: int
    set: str
    criteria_version: int
    min_agreement: float | None
    state: str  # running | done
    started_at: datetime
    finished_at: datetime | None
    items: int
    graded: int
    errors: int
    held_by_spend_cap: int
    checks: dict[str, dict]
    overall: dict
    passed: bool | None
    changed_count: int
    changed: list[dict]


def _run_out(run: RegressionRun) -> dict:
    """The run as the API answers it, its times as the API writes them: the MCP server answers the same."""
    return RunOut.model_validate(run_json(run)).model_dump()


def _set_named(org: Org, name: str) -> RegressionSet:
    regression_set = RegressionSet.objects.filter(org=org, name=name).first()
    if regression_set is None:
        raise NotFound(f"no set named {name!r}")
    return regression_set


def _set_out(regression_set: RegressionSet) -> dict:
    last = regression_set.runs.select_related("criteria_version", "regression_set").order_by("-started_at").first()
    return {
        "name": regression_set.name,
        "kind": regression_set.kind,
        "built_from": regression_set.built_from,
        "items": regression_set.items.count(),
        "skipped": regression_set.skipped,
        "erased": regression_set.erased,
        "created_at": regression_set.created_at,
        "last_run": run_json(last) if last else None,
    }


def _built_from(payload: SetIn, item_filter: SetFilter | None) -> dict:
    return built_from(SetSource(payload.source), item_filter, payload.ids)


def _week(field: str, text: str | None):
    if text is None:
        return None
    try:
        return week_named(text)
    except ValueError as exc:
        raise _refused(f"filter.{field}", str(exc)) from None


@router.post(
    "/sets", response={201: SetDetailOut, 200: SetDetailOut}, summary="Build a regression set from a filter or from ids"
)
def post_set(request: HttpRequest, payload: SetIn) -> Status[SetDetailOut]:
    """Copies the items with their expected answers from `source`; an item with none is skipped and counted. Asking
    again for a set the org already has under that name, of the same kind and built the same way, answers it as it
    is (200), so a retried request builds nothing twice; another set under a taken name is refused."""
    item_filter = None
    if payload.filter is not None:
        item_filter = SetFilter(
            application=payload.filter.application,
            since=_week("since", payload.filter.since),
            until=_week("until", payload.filter.until),
            dimensions=payload.filter.dimensions,
        )
    same = RegressionSet.objects.filter(
        org=request.auth.org, name=payload.name, kind=payload.kind, built_from=_built_from(payload, item_filter)
    ).first()
    if same is not None:
        return Status(200, _set_detail(same))
    try:
        regression_set = set_build(
            org=request.auth.org,
            name=payload.name,
            kind=ItemKind(payload.kind),
            source=SetSource(payload.source),
            item_filter=item_filter,
            external_ids=payload.ids,
            **caller_acting(request.auth),
        )
    except SetRefused as exc:
        raise _refused(exc.field, exc.message) from None
    return Status(201, _set_detail(regression_set))


@router.get("/sets", response=list[SetOut], summary="The org's regression sets, with each one's last run")
def get_sets(request: HttpRequest) -> list[dict]:
    return [_set_out(s) for s in RegressionSet.objects.filter(org=request.auth.org).order_by("name")]


@router.get("/sets/{name}", response=SetDetailOut, summary="A regression set: its items and counts")
def get_set(request: HttpRequest, name: SetName) -> dict:
    return _set_detail(_set_named(request.auth.org, name))


def _set_detail(regression_set: RegressionSet) -> dict:
    items = regression_set.items.order_by("pk").values(
        "external_id", "application", "fingerprint", "source", "expected", "expected_verdict"
    )
    return {**_set_out(regression_set), "set_items": [{"item": row.pop("external_id"), **row} for row in items]}


@router.delete("/sets/{name}", response={204: None}, summary="Delete a regression set and its runs")
def delete_set(request: HttpRequest, name: SetName) -> Status[None]:
    """Deleting a set the org does not have (already deleted) answers 204 too: a retried delete is not an error."""
    with transaction.atomic():
        regression_set = RegressionSet.objects.filter(org=request.auth.org, name=name).first()
        if regression_set is None:
            return Status(204, None)
        audit_record(
            action="set.delete",
            org=request.auth.org,
            target=regression_set,
            **caller_acting(request.auth),
            detail={"name": name, "items": regression_set.items.count()},
        )
        regression_set.delete()
    return Status(204, None)


@router.post("/sets/{name}/runs", response={202: RunOut}, summary="Run a criteria version over a regression set")
def post_run(request: HttpRequest, name: SetName, payload: RunIn) -> Status[RunOut]:
    """Accepted at once; the judge workers grade the items. `GET /sets/{name}/runs/{id}` reads it, running or done."""
    try:
        return Status(202, run_started(caller=request.auth, name=name, payload=payload))
    except SetRefused as exc:
        raise _refused(exc.field, exc.message) from None
    except SpendCapPassed as exc:
        raise _refused("version", str(exc)) from None


def run_started(*, caller: Caller, name: str, payload: RunIn) -> dict:
    """Start a run of the caller's org's set `name` (a RunOut): what `POST /sets/{name}/runs` answers, and the MCP
    server's `run_regression_set`. The run and its audit name the caller: a person's token, its person; an org key,
    the key. Raises NotFound for no such set, SetRefused naming the field, SpendCapPassed; starts nothing then."""
    regression_set = _set_named(caller.org, name)
    version = CriteriaVersion.objects.filter(org=caller.org, kind=regression_set.kind, number=payload.version).first()
    if version is None:
        raise SetRefused("version", f"the org has no {regression_set.kind} criteria version {payload.version}")
    run = set_run_start(
        regression_set=regression_set,
        version=version,
        min_agreement=payload.min_agreement,
        **caller_acting(caller),
    )
    return _run_out(run)


@router.get("/sets/{name}/runs/{run_id}", response=RunOut, summary="A run of a regression set: state and figures")
def get_run(request: HttpRequest, name: SetName, run_id: int) -> dict:
    return run_read(org=request.auth.org, name=name, run_id=run_id)


def run_read(*, org: Org, name: str, run_id: int) -> dict:
    """A run of the org's set `name` (a RunOut), running or done: what `GET /sets/{name}/runs/{run_id}` answers, and
    the MCP server's `read_regression_run`. Raises NotFound for no such set or run."""
    regression_set = _set_named(org, name)
    run = (
        RegressionRun.objects.filter(regression_set=regression_set, pk=run_id)
        .select_related("criteria_version", "regression_set")
        .first()
    )
    if run is None:
        raise NotFound(f"set {name!r} has no run {run_id}")
    return _run_out(run)
