"""Corrections over the API (`GET /api/v1/corrections`): the key's org's corrections, streamed as JSONL or as chat
fine-tuning examples, with the dashboard export's filters (grading/dashboard/corrections.py). A key reads the whole
org, and, as any reader, no correction of an item people decide blind now."""

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Query, Router
from ninja.errors import ValidationError

from grading.dashboard.correction_figures import correction_figures
from grading.dashboard.corrections import (
    FORMATS,
    InvalidCorrectionFilter,
    as_jsonl,
    correction_filter_from,
    corrections_behind,
    export_corrections,
)
from grading.dashboard.figures import InvalidScope, scope_for
from grading.models import ItemKind

router = Router(tags=["corrections"])


def _refused(field: str, message: str) -> ValidationError:
    return ValidationError([{"loc": ["query", field], "msg": message}])


@router.get("/corrections", response=dict, summary="The org's corrections as JSONL, or as chat fine-tuning examples")
def get_corrections(
    request: HttpRequest, since: str | None = Query(None, alias="from"), until: str | None = Query(None, alias="to"),
    application: str | None = None, kind: str | None = None, state: str | None = None, author: str | None = None,
    check: str | None = None, format: str = "jsonl",
):  # fmt: skip
    """What people said items should have been. `format=jsonl` (one object per correction: the original and the
    corrected text, the fingerprints, the corrected review's checks, the gate's review of a corrected draft, the
    decisions, author and times) or `format=chat` (each expected reply as `{"messages": [...]}`: the conversation's
    active path before the corrected message, then the reply as the assistant's turn). `from` and `to` are ISO weeks
    of the correction (default the last eight), `application` narrows the expected replies, `kind` is draft or
    conversation, `state` a correction's state, `author` a user id, `check` a check that failed on the corrected
    review (a finding's code, a conversation check's key). Streamed, oldest first."""
    if format not in FORMATS:
        raise _refused("format", f"must be {' or '.join(FORMATS)}")
    try:
        scope = scope_for(request.auth.org, since=since, until=until, application=application)
        correction_filter = correction_filter_from(request.GET)
    except (InvalidScope, InvalidCorrectionFilter) as exc:
        raise _refused(exc.field, exc.message) from exc
    if format == "chat" and correction_filter.kind == ItemKind.DRAFT:
        raise _refused("format", "chat holds the expected replies of conversations, not drafts")
    rows = export_corrections(corrections_behind(scope, correction_filter), f=correction_filter, file_format=format)
    response = StreamingHttpResponse(as_jsonl(rows), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="corrections-{request.auth.org.slug}-{format}.jsonl"'
    return response


@router.get("/corrections/figures", response=dict, summary="How often people correct, and their repairs beside ours")
def get_correction_figures(
    request: HttpRequest, since: str | None = Query(None, alias="from"), until: str | None = Query(None, alias="to"),
    application: str | None = None,
) -> dict:  # fmt: skip
    """The dashboard's corrections panel (grading/dashboard/correction_figures.py) for the key's org: `choices`, per
    kind, people's decisions of the weeks as corrected, approved, rejected, sent back or unknown, in total, per ISO
    week and per check that failed, each with the share corrected; `repairs`, per finding code, the drafts Tollgate
    repaired, those people corrected with the finding and those people fixed. `from` and `to` are ISO weeks
    (default the last eight); `application` narrows the conversations."""
    try:
        scope = scope_for(request.auth.org, since=since, until=until, application=application)
    except InvalidScope as exc:
        raise _refused(exc.field, exc.message) from exc
    return correction_figures(scope)
