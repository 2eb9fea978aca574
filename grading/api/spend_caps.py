"""The spend caps over the API: set, raise or remove the org's cap per day or week, or a criteria version's, as the
spend page does (reviewer/criteria/views/spend.py), through the same service (`spend_cap_set`): audited with the old
and the new limits under the org's key or the token's person (a criteria admin, as on the page), and a cap raised or
removed lets grading start again at once. A bad figure is a 400 naming each wrong field; another org's criteria
version is a 404; nothing is written on a refusal."""

from typing import Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError, ValidationError
from pydantic import Field, model_validator

from grading.api.errors import ErrorOut
from grading.api.keys import caller_acting
from grading.models import CriteriaVersion, Org
from grading.reviews.spend import CAP_MAX, SpendCapInvalid, spend_cap_set

router = Router(tags=["spend"])

Period = Literal["day", "week"]


class CapIn(Schema):
    period: Period  # the cap counts what the judge spent today (UTC) or this ISO week
    criteria_version: int | None = None  # a criteria version's id: its own cap; null: the whole org's
    tokens: int | None = Field(default=None, ge=0, le=CAP_MAX)  # null: no cap on tokens
    cost_micros: int | None = Field(default=None, ge=0, le=CAP_MAX)  # in millionths of SPEND_CURRENCY; null: none

    @model_validator(mode="after")
    def _some_limit(self) -> "CapIn":
        if self.tokens is None and self.cost_micros is None:
            raise ValueError("give a cap on tokens, on cost_micros, or both (DELETE removes the cap)")
        return self


class CapScope(Schema):
    period: Period
    criteria_version: int | None = None  # null: the whole org's cap


class CapOut(Schema):
    period: str
    criteria_version: int | None  # the version's id; null: the whole org's cap
    tokens: int | None
    cost_micros: int | None


def _version(org: Org, version_id: int | None) -> CriteriaVersion | None:
    """The org's criteria version; another org's is as unknown as none (404)."""
    if version_id is None:
        return None
    version = CriteriaVersion.objects.filter(org=org, pk=version_id).first()
    if version is None:
        raise HttpError(404, f"no criteria version {version_id}")
    return version


def _refused(invalid: SpendCapInvalid) -> ValidationError:
    return ValidationError([{"loc": ["body", invalid.field], "msg": str(invalid)}])


@router.put("/spend/caps", response={200: CapOut, 404: ErrorOut}, summary="Set or change a spend cap")
def put_spend_cap(request: HttpRequest, payload: CapIn) -> dict:
    """The org's cap for the period, or the criteria version's: its limits become exactly these."""
    org = request.auth.org
    version = _version(org, payload.criteria_version)
    try:
        spend_cap_set(
            org=org, version=version, period=payload.period, tokens=payload.tokens,
            cost_micros=payload.cost_micros, **caller_acting(request.auth),
        )  # fmt: skip
    except SpendCapInvalid as invalid:
        raise _refused(invalid) from None
    return payload.model_dump()


@router.delete("/spend/caps", response={204: None, 404: ErrorOut}, summary="Remove a spend cap")
def delete_spend_cap(request: HttpRequest, scope: Query[CapScope]) -> Status[None]:
    """Grading the cap held back starts again at once. Removing a cap there is none of is no change (204 all the
    same)."""
    org = request.auth.org
    version = _version(org, scope.criteria_version)
    spend_cap_set(
        org=org, version=version, period=scope.period, tokens=None, cost_micros=None, remove=True,
        **caller_acting(request.auth),
    )  # fmt: skip
    return Status(204, None)
