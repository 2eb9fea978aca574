"""The request/response layer both clients share, written once without I/O.

Each API operation is a generator: it yields what it needs done (a `Call` to the API, a `Pause`, a `Stream` of
lines, an `Emit` of one item of an iterator) and receives the answer. `Tollgate` drives the operations with blocking
httpx and `time.sleep`, `AsyncTollgate` with `httpx.AsyncClient` and `asyncio.sleep`: the paths, bodies, retries,
errors, polling and paging are this module's alone."""

import email.utils
import json
import random
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from tollgate_client.errors import ApiError, TransportError, Unavailable, WaitTimeout, api_error
from tollgate_client.models import (
    AuditEventsPage,
    Claim,
    ClaimNext,
    Conversation,
    ConversationDetail,
    DecisionResult,
    DraftAccepted,
    DraftStatus,
    Published,
    PublishPlan,
    QueuePage,
    RegressionRun,
    RegressionSet,
    Trial,
    TrialCount,
    Version,
    VersionSummary,
    WhoAmI,
    from_json,
)

USER_AGENT = "tollgate-client/0.1"


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # under /api/v1
    params: Mapping[str, Any] | None = None
    json: Any = None


@dataclass(frozen=True)
class Stream:
    """A GET answered with lines (JSONL or CSV), emitted one by one as they arrive; JSON lines parsed. With `text`,
    the answer's text as it arrives, in chunks, untouched: a CSV cell may hold line breaks (a note's), which
    splitting into lines would lose."""

    path: str
    params: Mapping[str, Any] | None = None
    parse_json: bool = True
    text: bool = False


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Emit:
    value: Any


Step = Call | Stream | Pause | Emit
Operation = Generator[Step, Any, Any]


# --- retries --------------------------------------------------------------------------------------------------------

RETRIED_STATUSES = (429, 503)


@dataclass(frozen=True)
class Retries:
    """How often and how long a refused request is tried again: a 429 or 503 (any method: the server did not do it)
    and, for a GET only, a connection that failed. The server's Retry-After is honoured up to `max_wait` seconds;
    without one, exponential backoff from `backoff` seconds, with jitter, capped at `max_wait`."""

    attempts: int = 5  # in all, the first included
    backoff: float = 0.5
    max_wait: float = 60.0

    def delay(self, attempt: int, retry_after: str | None = None, *, now: datetime | None = None) -> float:
        """Seconds to wait before try `attempt + 1` (the first retry follows attempt 1)."""
        told = retry_after_seconds(retry_after, now=now)
        if told is not None:
            return min(told, self.max_wait)
        exponential = self.backoff * 2 ** (attempt - 1)
        return min(self.max_wait, exponential * random.uniform(0.5, 1.0))  # noqa: S311 - jitter, not secrecy


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: delay-seconds or an HTTP date (RFC 9110 10.2.3); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass(frozen=True)
class Polling:
    """How a wait for a verdict polls: first after `first` seconds, each pause `factor` times the last, at most
    `max_pause`; it gives up (WaitTimeout) after `timeout` seconds of pauses."""

    first: float = 0.25
    factor: float = 1.5
    max_pause: float = 5.0
    timeout: float = 900.0

    def pauses(self) -> Iterable[float]:
        pause, waited = self.first, 0.0
        while waited < self.timeout:
            pause = min(pause, self.max_pause, self.timeout - waited)
            yield pause
            waited += pause
            pause *= self.factor


# --- requests and answers --------------------------------------------------------------------------------------------


def request_of(call: Call | Stream, base_url: str, token: str) -> dict[str, Any]:
    """httpx.request's arguments for a call."""
    params = {k: v for k, v in (call.params or {}).items() if v is not None}
    arguments: dict[str, Any] = {
        "url": f"{base_url}/api/v1{call.path}",
        "params": params,
        "headers": {"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT, "Accept": "application/json"},
    }
    if isinstance(call, Call):
        arguments["method"] = call.method
        if call.json is not None:
            arguments["json"] = call.json
    else:
        arguments["method"] = "GET"
    return arguments


def retry_wanted(response: httpx.Response, attempt: int, retries: Retries) -> float | None:
    """The pause before trying again, or None: not retried, or out of attempts."""
    if response.status_code not in RETRIED_STATUSES or attempt >= retries.attempts:
        return None
    return retries.delay(attempt, response.headers.get("Retry-After"))


def transport_retry_wanted(method: str, attempt: int, retries: Retries) -> float | None:
    # Only a GET is safe to send twice when the first may have arrived: a POST of a draft that did arrive would be
    # submitted again (harmless by external id, but a second grading may be owed).
    if method != "GET" or attempt >= retries.attempts:
        return None
    return retries.delay(attempt)


def answer_of(response: httpx.Response, attempts: int) -> Any:
    """The JSON of a success; the exception of an error, with the server's detail and field errors."""
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = None
        error = api_error(response.status_code, body, response.text)
        if isinstance(error, Unavailable):
            error.attempts = attempts
        raise error
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:  # a proxy's page, say: the server at that URL is not Tollgate's API
        kind = response.headers.get("Content-Type", "no content type")
        raise ApiError(response.status_code, f"the answer is not JSON ({kind}): is {response.url} Tollgate?") from None


def transport_failed(exc: httpx.TransportError, call: Call | Stream, attempts: int) -> TransportError:
    path = call.path
    return TransportError(f"could not reach Tollgate for {path} after {attempts} attempt(s): {exc!r}")


def line_of(raw: str, parse_json: bool) -> Any:
    return json.loads(raw) if parse_json else raw


# --- the operations --------------------------------------------------------------------------------------------------


def whoami() -> Operation:
    return from_json(WhoAmI, (yield Call("GET", "/whoami")))


def draft_payload(
    *,
    title: str,
    body: str,
    external_id: str,
    slug: str,
    source_urls: Iterable[str] = (),
    run_id: str | None = None,
    metadata: Mapping[str, str] | None = None,
    callback_url: str | None = None,
    end_user: str | None = None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "external_id": external_id,
        "title": title,
        "slug": slug,
        "body": body,
        "source_urls": list(source_urls),
    }
    optional = {
        "run_id": run_id,
        "metadata": dict(metadata) if metadata else None,
        "callback_url": callback_url,
        "end_user": end_user,
    }
    return payload | {k: v for k, v in optional.items() if v is not None}


def submit_draft(payload: dict[str, Any], *, wait: bool, polling: Polling) -> Operation:
    accepted = from_json(DraftAccepted, (yield Call("POST", "/drafts", json=payload)))
    if not wait:
        return DraftStatus(id=accepted.id, external_id=payload["external_id"], route=accepted.route)
    return (yield from wait_for_draft(accepted.id, polling=polling))


def draft(draft_id: int) -> Operation:
    return from_json(DraftStatus, (yield Call("GET", f"/drafts/{int(draft_id)}")))


def wait_for_draft(draft_id: int, *, polling: Polling) -> Operation:
    """The draft's status once graded (any route but `pending`), polled with growing pauses."""
    for pause in polling.pauses():
        status = yield from draft(draft_id)
        if status.graded:
            return status
        yield Pause(pause)
    status = yield from draft(draft_id)
    if status.graded:
        return status
    waiting = f" (waiting: {status.waiting.get('reason')})" if status.waiting else ""
    raise WaitTimeout(f"draft {draft_id} was not graded within {polling.timeout:g} s{waiting}", draft_id=draft_id)


def wait_for_drafts(draft_ids: Iterable[int], *, polling: Polling) -> Operation:
    """Each draft's status as it is graded, in the order they finish: one polling round asks every draft still
    pending, then pauses (so many drafts cost one pause, not one each)."""
    pending = list(dict.fromkeys(int(i) for i in draft_ids))
    pauses = iter(polling.pauses())
    while pending:
        still = []
        for draft_id in pending:
            status = yield from draft(draft_id)
            if status.graded:
                yield Emit(status)
            else:
                still.append(draft_id)
        pending = still
        if pending:
            pause = next(pauses, None)
            if pause is None:
                raise WaitTimeout(
                    f"{len(pending)} draft(s) not graded within {polling.timeout:g} s: "
                    f"{', '.join(map(str, pending[:10]))}",
                    draft_id=pending[0],
                )
            yield Pause(pause)


def submit_conversation(payload: dict[str, Any]) -> Operation:
    return from_json(Conversation, (yield Call("POST", "/conversations", json=payload)))


def append_messages(external_id: str, payload: dict[str, Any]) -> Operation:
    answer = yield Call("POST", f"/conversations/{_segment(external_id)}/messages", json=payload)
    return from_json(Conversation, answer)


def conversation(external_id: str) -> Operation:
    return from_json(ConversationDetail, (yield Call("GET", f"/conversations/{_segment(external_id)}")))


def review(external_id: str) -> Operation:
    """The conversation's current review, None while it has none."""
    detail: ConversationDetail = yield from conversation(external_id)
    return detail.review


def audit_events_page(filters: Mapping[str, Any], *, before: str | None, limit: int) -> Operation:
    answer = yield Call("GET", "/audit-events", params={**filters, "before": before, "limit": limit})
    return from_json(AuditEventsPage, answer)


def audit_events(filters: Mapping[str, Any], *, page_size: int) -> Operation:
    """Every event the filters keep, newest first, a page at a time (the `next` cursor)."""
    before = None
    while True:
        page = yield from audit_events_page(filters, before=before, limit=page_size)
        for event in page.events:
            yield Emit(event)
        if not page.next:
            return
        before = page.next


def audit_csv(filters: Mapping[str, Any]) -> Operation:
    yield Stream("/audit-events", params={**filters, "format": "csv"}, parse_json=False)


def corrections(filters: Mapping[str, Any], *, file_format: str) -> Operation:
    yield Stream("/corrections", params={**filters, "format": file_format})


def criteria(kind: str, number: int | None) -> Operation:
    return (yield Call("GET", f"/criteria/{_segment(kind)}", params={"number": number}))


def writer_rules() -> Operation:
    return (yield Call("GET", "/criteria/draft/writer-rules"))


def queue_service(filters: Mapping[str, Any]) -> Operation:
    return (yield Call("GET", "/queue/service", params=filters))


def reviews_export(filters: Mapping[str, Any], *, file_format: str) -> Operation:
    """The dashboard's export: JSON objects (jsonl), or the CSV's text in chunks as it arrives (csv)."""
    jsonl = file_format == "jsonl"
    yield Stream("/reviews/export", params={**filters, "format": file_format}, parse_json=jsonl, text=not jsonl)


# --- criteria versions ------------------------------------------------------------------------------------------------


def criteria_versions(kind: str) -> Operation:
    answer = yield Call("GET", f"/criteria/{_segment(kind)}/versions")
    return [from_json(VersionSummary, version) for version in answer]


def criteria_version(version_id: int) -> Operation:
    return from_json(Version, (yield Call("GET", f"/criteria/versions/{int(version_id)}")))


def criteria_clone(kind: str, source: int | None) -> Operation:
    body = {"source": source} if source is not None else {}
    return from_json(Version, (yield Call("POST", f"/criteria/{_segment(kind)}/versions", json=body)))


def criteria_edit(version_id: int, fields: Mapping[str, Any], *, revision: int | None) -> Operation:
    """Replace the fields given, whole. Without `revision`, the version's own now is sent: the edit is refused
    (409) only when someone saves between that read and this write."""
    if revision is None:
        revision = (yield from criteria_version(version_id)).revision
    body = {**fields, "revision": revision}
    return from_json(Version, (yield Call("PATCH", f"/criteria/versions/{int(version_id)}", json=body)))


def trial_count(version_id: int, *, k: int, source: str) -> Operation:
    answer = yield Call("GET", f"/criteria/versions/{int(version_id)}/trial-count", params={"k": k, "source": source})
    return from_json(TrialCount, answer)


def trial_start(version_id: int, *, k: int, source: str) -> Operation:
    """Count the sample's judge calls, then start the trial with that count (refused if the sample changed)."""
    count: TrialCount = yield from trial_count(version_id, k=k, source=source)
    body = {"k": k, "source": source, "counted_calls": count.judge_calls}
    return from_json(Trial, (yield Call("POST", f"/criteria/versions/{int(version_id)}/trials", json=body)))


def trial_figures(trial_id: int) -> Operation:
    return (yield Call("GET", f"/criteria/trials/{int(trial_id)}"))


def wait_for_trial(version_id: int, trial_id: int, *, polling: Polling) -> Operation:
    """The trial once every item is graded, then its figures: (Trial, figures)."""
    for pause in (*polling.pauses(), None):
        answer = yield Call("GET", f"/criteria/versions/{int(version_id)}/trials")
        trial = next((from_json(Trial, t) for t in answer if t["id"] == trial_id), None)
        if trial is not None and trial.finished_at is not None:
            return trial, (yield from trial_figures(trial_id))
        if pause is None:
            break
        yield Pause(pause)
    raise WaitTimeout(f"trial {trial_id} did not finish within {polling.timeout:g} s")


def publish_plan(version_id: int) -> Operation:
    return from_json(PublishPlan, (yield Call("GET", f"/criteria/versions/{int(version_id)}/publish-plan")))


def publish(version_id: int, *, replaces: int, regrade_now: bool) -> Operation:
    body = {"replaces": replaces, "regrade_now": regrade_now}
    return from_json(Published, (yield Call("POST", f"/criteria/versions/{int(version_id)}/publish", json=body)))


# --- the queue --------------------------------------------------------------------------------------------------------


def queue(filters: Mapping[str, Any], *, after: int | None, limit: int) -> Operation:
    return from_json(QueuePage, (yield Call("GET", "/queue", params={**filters, "after": after, "limit": limit})))


def claim_next(filters: Mapping[str, Any]) -> Operation:
    return from_json(ClaimNext, (yield Call("POST", "/queue/claim-next", params=filters))).claimed


def claim(review_id: int) -> Operation:
    return from_json(Claim, (yield Call("POST", f"/queue/items/{int(review_id)}/claim")))


def decide(review_id: int, body: dict[str, Any], *, fingerprint: str | None) -> Operation:
    """Decide (or answer) the item. Without `fingerprint`, the item is claimed again first (renewing a lease
    you hold) and decided on the evidence that claim names."""
    if fingerprint is None:
        fingerprint = (yield from claim(review_id)).fingerprint
    answer = yield Call("POST", f"/queue/items/{int(review_id)}/decision", json={**body, "fingerprint": fingerprint})
    return from_json(DecisionResult, answer)


# --- regression sets --------------------------------------------------------------------------------------------------


def sets() -> Operation:
    return [from_json(RegressionSet, s) for s in (yield Call("GET", "/sets"))]


def set_create(body: dict[str, Any]) -> Operation:
    return from_json(RegressionSet, (yield Call("POST", "/sets", json=body)))


def set_run_start(name: str, *, version: int, min_agreement: float | None) -> Operation:
    body = {"version": version} | ({"min_agreement": min_agreement} if min_agreement is not None else {})
    return from_json(RegressionRun, (yield Call("POST", f"/sets/{_segment(name)}/runs", json=body)))


def set_run(name: str, run_id: int) -> Operation:
    return from_json(RegressionRun, (yield Call("GET", f"/sets/{_segment(name)}/runs/{int(run_id)}")))


def wait_for_run(name: str, run_id: int, *, polling: Polling) -> Operation:
    """The run once every item is graded (`state` done)."""
    for pause in (*polling.pauses(), None):
        run: RegressionRun = yield from set_run(name, run_id)
        if run.state == "done":
            return run
        if pause is None:
            break
        yield Pause(pause)
    raise WaitTimeout(f"run {run_id} of set {name!r} did not finish within {polling.timeout:g} s")


def _segment(value: str) -> str:
    return quote(str(value), safe="")
