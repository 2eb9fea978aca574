"""The erasure API (/api/v1/erasures): a pipeline asks to erase one conversation, one draft, or every item naming an
end user, and reads how far the erasure is. The erasing is grading/erasure's; this only parses and answers."""

from datetime import datetime
from typing import Self

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import BaseModel, ConfigDict, model_validator

from grading.core.errors import NotFound
from grading.core.schemas import ExternalId
from grading.erasure.runs import ItemNotFound, erasure_counts, erasure_request
from grading.models import Erasure, ErasureScope

router = Router(tags=["erasures"])


class ErasureIn(BaseModel):
    """Exactly one of: a conversation's external id, a draft's external id, an end user's id."""

    model_config = ConfigDict(extra="forbid")

    conversation: ExternalId | None = None
    draft: ExternalId | None = None
    end_user: ExternalId | None = None  # an end user's id, as the items name it (never empty)

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        given = [name for name in ("conversation", "draft", "end_user") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of conversation, draft or end_user")
        return self

    @property
    def scope(self) -> tuple[str, str]:
        if self.conversation is not None:
            return ErasureScope.CONVERSATION, self.conversation
        if self.draft is not None:
            return ErasureScope.DRAFT, self.draft
        return ErasureScope.END_USER, self.end_user


class ErasureOut(Schema):
    id: int
    scope: str
    kind: str  # blank: both kinds (an end user's items)
    target: str  # the external id, or the SHA-256 of the end user's id (never the id)
    state: str
    requested_at: datetime
    finished_at: datetime | None
    counts: dict[str, int]  # rows erased so far, per kind of row


def erasure_out(erasure: Erasure) -> dict:
    return {
        "id": erasure.pk,
        "scope": erasure.scope,
        "kind": erasure.kind,
        "target": erasure.target,
        "state": erasure.state,
        "requested_at": erasure.requested_at,
        "finished_at": erasure.finished_at,
        "counts": erasure_counts(erasure),
    }


@router.post("/erasures", response={202: ErasureOut}, summary="Erase a conversation, a draft or an end user's items")
def post_erasure(request: HttpRequest, payload: ErasureIn) -> Status[ErasureOut]:
    """Accepted at once and worked by a worker in batches; `GET /erasures/{id}` says when it is done. What goes and
    what stays is docs/org-admins.md, "Retention and erasure". An item the key's org does not have is a 404."""
    scope, target = payload.scope
    try:
        erasure = erasure_request(org=request.auth.org, scope=scope, target=target, api_key=request.auth)
    except ItemNotFound as exc:
        raise NotFound(str(exc)) from None
    return Status(202, erasure_out(erasure))


@router.get("/erasures/{erasure_id}", response=ErasureOut, summary="An erasure's state and what it erased")
def get_erasure(request: HttpRequest, erasure_id: int) -> dict:
    erasure = Erasure.objects.filter(org=request.auth.org, pk=erasure_id).first()
    if erasure is None:
        raise NotFound(f"no erasure {erasure_id}")
    return erasure_out(erasure)
