"""The dashboard's export over the API (`GET /api/v1/reviews/export`): the reviews behind the page (or one of its
numbers) as CSV or JSONL, streamed, with the page export's filters as query parameters; the same rows the page
export streams (reviewer/dashboards/export.py `export_rows`), within the caller's reach (an org key's whole org, a
person's memberships), blind review held as the page holds it for that person. An org key names no one, so it reads
as a person with no answers of their own: while places are open, nobody's answers of an item people decide blind."""

from django.http import HttpRequest, QueryDict, StreamingHttpResponse
from ninja import Query, Router
from ninja.errors import ValidationError

from grading.api.errors import AUTH_ERRORS, FieldErrorsOut
from grading.api.keys import caller_reach
from grading.dashboard.figures import InvalidScope
from reviewer.dashboards import export, reads

router = Router(tags=["dashboard"])

FORMATS = ("csv", "jsonl")
# `slice` may come more than once (one value per dimension), as the page's links write it.
_SLICES = Query(None, description="a dimension value, name=value (release=2.4); repeatable")
_CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}


@router.get(
    "/reviews/export",
    response={200: None, **AUTH_ERRORS, 400: FieldErrorsOut},
    summary="The reviews behind the dashboard (or one number of it), as CSV or JSONL",
    openapi_extra={
        "responses": {
            200: {
                "description": "The rows, streamed: CSV with a header, or one JSON object a line",
                "content": {
                    "text/csv": {"schema": {"type": "string"}},
                    "application/x-ndjson": {"schema": {"type": "string"}},
                },
            }
        }
    },
)
def get_reviews_export(
    request: HttpRequest, format: str = "csv", since: str | None = Query(None, alias="from"),
    until: str | None = Query(None, alias="to"), application: str | None = None, slice: list[str] | None = _SLICES,
    kind: str | None = None, set: str | None = None, route: str | None = None, reason: str | None = None,
    check: str | None = None, verdict: str | None = None, finding: str | None = None, repaired: bool = False,
    decision: str | None = None, sample: str | None = None, machine: str | None = None, human: str | None = None,
    people: str | None = None, operator: str | None = None, decided: bool = False, due: str | None = None,
):  # fmt: skip
    """What the dashboard's export streams, row for row: each review with its score identity, slice, state, the
    answer per check (`check_<key>`), decision, labels and people's answers. Filters as the page's links write them:
    `from`/`to` ISO weeks (default the last eight), `application`, `slice` (`release=2.4`, repeatable), `kind`
    (conversation, draft or any), `set` (counting, stale, errors), `route` (comma-separated), `reason`, `check` with
    `verdict`, `finding`, `repaired`, `decision`, `sample` with `machine`/`human`, `people`, `operator` (a user id),
    `decided`, `due` (overdue, late, on_time). A filter it does not know a value of is a 400 naming it. Oldest
    first, streamed from a server-side cursor."""
    if format not in FORMATS:
        raise ValidationError([{"loc": ["query", "format"], "msg": f"must be {' or '.join(FORMATS)}"}])
    params = _page_params(request.GET, repaired=repaired, decided=decided)
    org = request.auth.org
    try:
        scope = reads.scope_from(org, params, caller_reach(request.auth))
        review_filter = reads.filter_from(params, org)
    except (InvalidScope, reads.InvalidFilter) as exc:
        raise ValidationError([{"loc": ["query", exc.field], "msg": exc.message}]) from exc
    reviews = reads.reviews_behind(org, scope, review_filter)
    checks = reads.checks_asked(org, review_filter.kind)
    person = request.auth.person
    rows = export.export_rows(
        reviews, f=review_filter, reader_id=person.pk if person is not None else None, checks=checks
    )
    columns = export.columns_for(checks)
    lines = export.as_csv(rows, columns) if format == "csv" else export.as_jsonl(rows, columns)
    response = StreamingHttpResponse(lines, content_type=_CONTENT_TYPES[format])
    weeks = scope.as_query()
    name = f"tollgate-{org.slug}-{review_filter.kind}-reviews-{weeks['from']}-{weeks['to']}"
    response["Content-Disposition"] = f'attachment; filename="{name}.{format}"'
    return response


def _page_params(params: QueryDict, *, repaired: bool, decided: bool) -> QueryDict:
    """The query as the page's links write it: the page reads a flag as `1`, the API takes any boolean
    (true, 1, yes), which ninja has checked."""
    page = params.copy()
    page["repaired"] = "1" if repaired else ""
    page["decided"] = "1" if decided else ""
    return page
