"""`Tollgate` (blocking) and `AsyncTollgate` (asyncio): the same operations (tollgate_client/_core.py), two drivers.

from tollgate_client import Tollgate

with Tollgate() as tollgate:  # TOLLGATE_URL and TOLLGATE_TOKEN, or ~/.config/tollgate/config.toml
    status = tollgate.submit_draft(title=..., body=..., external_id="run-7/a-1", slug="a-1", wait=True)
    print(status.route, [f.message for f in status.findings])
"""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any

import httpx

from tollgate_client import _core
from tollgate_client._core import Call, Emit, Operation, Pause, Polling, Retries, Stream
from tollgate_client.config import resolve
from tollgate_client.models import (
    AuditEvent,
    AuditEventsPage,
    Claim,
    Conversation,
    ConversationDetail,
    DecisionResult,
    DraftStatus,
    Published,
    PublishPlan,
    QueuePage,
    RegressionRun,
    RegressionSet,
    Review,
    Trial,
    TrialCount,
    Version,
    VersionSummary,
    WhoAmI,
)

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
AUDIT_PAGE_SIZE = 200
QUEUE_PAGE_SIZE = 50


class _Settings:
    def __init__(
        self,
        base_url: str | None,
        token: str | None,
        profile: str | None,
        config: str | None,
        retries: Retries | None,
        polling: Polling | None,
    ):
        settings = resolve(base_url=base_url, token=token, profile=profile, config=config)
        self.base_url, self.token = settings.base_url, settings.token
        self.retries = retries or Retries()
        self.polling = polling or Polling()

    def polled(self, timeout: float | None) -> Polling:
        if timeout is None:
            return self.polling
        p = self.polling
        return Polling(first=p.first, factor=p.factor, max_pause=p.max_pause, timeout=timeout)


class Tollgate:
    """A blocking client. `base_url` and `token` default to TOLLGATE_URL and TOLLGATE_TOKEN, then the config file's
    profile (`profile`, TOLLGATE_PROFILE, else "default"). `sleep` is how it waits (retries, polling)."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        profile: str | None = None,
        config: str | None = None,
        retries: Retries | None = None,
        polling: Polling | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
        http: httpx.Client | None = None,
    ):
        self._settings = _Settings(base_url, token, profile, config, retries, polling)
        self.base_url = self._settings.base_url
        self._http = http or httpx.Client(timeout=timeout)
        self._sleep = sleep

    def __enter__(self) -> "Tollgate":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- the API -----------------------------------------------------------------------------------------------------

    def whoami(self) -> WhoAmI:
        return self._run(_core.whoami())

    def submit_draft(
        self,
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
        wait: bool = False,
        timeout: float | None = None,
    ) -> DraftStatus:
        """Submit a draft to the gate. `wait=True` polls (with backoff) until the verdict and returns it; otherwise
        the status is `pending`. A wait past `timeout` seconds raises WaitTimeout (the draft is still graded)."""
        payload = _core.draft_payload(
            title=title,
            body=body,
            external_id=external_id,
            slug=slug,
            source_urls=source_urls,
            run_id=run_id,
            metadata=metadata,
            callback_url=callback_url,
            end_user=end_user,
        )
        return self._run(_core.submit_draft(payload, wait=wait, polling=self._settings.polled(timeout)))

    def draft(self, draft_id: int) -> DraftStatus:
        return self._run(_core.draft(draft_id))

    def wait_for_draft(self, draft_id: int, *, timeout: float | None = None) -> DraftStatus:
        return self._run(_core.wait_for_draft(draft_id, polling=self._settings.polled(timeout)))

    def wait_for_drafts(self, draft_ids: Iterable[int], *, timeout: float | None = None) -> Iterator[DraftStatus]:
        """Each draft's verdict as it comes, in the order they finish."""
        return self._iterate(_core.wait_for_drafts(draft_ids, polling=self._settings.polled(timeout)))

    def submit_conversation(self, payload: Mapping[str, Any]) -> Conversation:
        """Create or replace a conversation (the body of POST /api/v1/conversations: external_id, application,
        messages, ...); grading follows on its own."""
        return self._run(_core.submit_conversation(dict(payload)))

    def append_messages(self, external_id: str, payload: Mapping[str, Any]) -> Conversation:
        return self._run(_core.append_messages(external_id, dict(payload)))

    def conversation(self, external_id: str) -> ConversationDetail:
        return self._run(_core.conversation(external_id))

    def review(self, external_id: str) -> Review | None:
        """A conversation's current review (None while it is not graded)."""
        return self._run(_core.review(external_id))

    def audit_events(self, *, page_size: int = AUDIT_PAGE_SIZE, **filters: Any) -> Iterator[AuditEvent]:
        """Every audit event the filters keep (actor, api_key, action, object_type, object_id, item_kind, item_id,
        conversation, since, until), newest first, every page."""
        return self._iterate(_core.audit_events(filters, page_size=page_size))

    def audit_events_page(
        self, *, before: str | None = None, limit: int = AUDIT_PAGE_SIZE, **filters: Any
    ) -> AuditEventsPage:
        return self._run(_core.audit_events_page(filters, before=before, limit=limit))

    def export_audit_csv(self, **filters: Any) -> Iterator[str]:
        """The audit events as CSV lines (the header first), streamed."""
        return self._iterate(_core.audit_csv(filters))

    def export_corrections(self, *, format: str = "jsonl", **filters: Any) -> Iterator[dict[str, Any]]:
        """The org's corrections, one object each, streamed (filters as the API names them, `from` as `since`)."""
        return self._iterate(_core.corrections(_weeks(filters), file_format=format))

    def criteria(self, kind: str, *, number: int | None = None) -> dict[str, Any]:
        return self._run(_core.criteria(kind, number))

    def writer_rules(self) -> dict[str, Any]:
        return self._run(_core.writer_rules())

    def queue_service(self, **filters: Any) -> dict[str, Any]:
        return self._run(_core.queue_service(_weeks(filters)))

    def export_reviews(self, *, format: str = "jsonl", **filters: Any) -> Iterator[Any]:
        """The dashboard's reviews export, streamed: one dict a review (jsonl), or the CSV's text in chunks (csv).
        Filters as the page's links name them (`since`/`until` for `from`/`to`, `slice` a list)."""
        return self._iterate(_core.reviews_export(_weeks(filters), file_format=format))

    def criteria_versions(self, kind: str) -> list[VersionSummary]:
        return self._run(_core.criteria_versions(kind))

    def criteria_version(self, version_id: int) -> Version:
        return self._run(_core.criteria_version(version_id))

    def criteria_clone(self, kind: str, *, source: int | None = None) -> Version:
        """A new unpublished version cloned from `source` (a version's id) or the active one."""
        return self._run(_core.criteria_clone(kind, source))

    def criteria_edit(self, version_id: int, *, revision: int | None = None, **fields: Any) -> Version:
        """Replace the given fields (rubric, rules, checks, routing, judge, slots...) of an unpublished version."""
        return self._run(_core.criteria_edit(version_id, fields, revision=revision))

    def trial_count(self, version_id: int, *, k: int, source: str) -> TrialCount:
        return self._run(_core.trial_count(version_id, k=k, source=source))

    def trial_start(self, version_id: int, *, k: int, source: str) -> Trial:
        return self._run(_core.trial_start(version_id, k=k, source=source))

    def wait_for_trial(self, version_id: int, trial_id: int, *, timeout: float | None = None) -> tuple[Trial, dict]:
        """The finished trial and its figures (GET /criteria/trials/{id})."""
        return self._run(_core.wait_for_trial(version_id, trial_id, polling=self._settings.polled(timeout)))

    def publish_plan(self, version_id: int) -> PublishPlan:
        return self._run(_core.publish_plan(version_id))

    def publish(self, version_id: int, *, replaces: int, regrade_now: bool = False) -> Published:
        """Publish as planned: `replaces` is the plan's active version's number."""
        return self._run(_core.publish(version_id, replaces=replaces, regrade_now=regrade_now))

    def queue(self, *, after: int | None = None, limit: int = QUEUE_PAGE_SIZE, **filters: Any) -> QueuePage:
        return self._run(_core.queue(filters, after=after, limit=limit))

    def claim_next(self, **filters: Any) -> Claim | None:
        return self._run(_core.claim_next(filters))

    def claim(self, review_id: int) -> Claim:
        return self._run(_core.claim(review_id))

    def decide(
        self, review_id: int, *, outcome: str = "", checks: Mapping[str, str] | None = None, note: str = "",
        fingerprint: str | None = None, keep_as_learning: bool = False,
    ) -> DecisionResult:  # fmt: skip
        """A draft's `outcome` or a conversation's `checks`, with a note; see `_core.decide` for `fingerprint`."""
        body = _decision(outcome, checks, note, keep_as_learning)
        return self._run(_core.decide(review_id, body, fingerprint=fingerprint))

    def sets(self) -> list[RegressionSet]:
        return self._run(_core.sets())

    def set_create(self, **body: Any) -> RegressionSet:
        """The body of POST /api/v1/sets: name, kind, source, and filter or ids."""
        return self._run(_core.set_create(body))

    def set_run_start(self, name: str, *, version: int, min_agreement: float | None = None) -> RegressionRun:
        return self._run(_core.set_run_start(name, version=version, min_agreement=min_agreement))

    def set_run(self, name: str, run_id: int) -> RegressionRun:
        return self._run(_core.set_run(name, run_id))

    def wait_for_run(self, name: str, run_id: int, *, timeout: float | None = None) -> RegressionRun:
        return self._run(_core.wait_for_run(name, run_id, polling=self._settings.polled(timeout)))

    # --- the driver ---------------------------------------------------------------------------------------------------

    def _run(self, operation: Operation) -> Any:
        values = list(self._drive(operation, emitting=False))
        return values[0] if values else None

    def _iterate(self, operation: Operation) -> Iterator[Any]:
        return self._drive(operation, emitting=True)

    def _drive(self, operation: Operation, *, emitting: bool) -> Iterator[Any]:
        answer: Any = None
        try:
            while True:
                step = operation.send(answer)
                answer = None
                if isinstance(step, Call):
                    answer = self._call(step)
                elif isinstance(step, Pause):
                    self._sleep(step.seconds)
                elif isinstance(step, Emit):
                    yield step.value
                elif isinstance(step, Stream):
                    yield from self._stream(step)
        except StopIteration as done:
            if not emitting:
                yield done.value

    def _call(self, call: Call) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(**_core.request_of(call, self.base_url, self._settings.token))
            except httpx.TransportError as exc:
                pause = _core.transport_retry_wanted(call.method, attempt, self._settings.retries)
                if pause is None:
                    raise _core.transport_failed(exc, call, attempt) from exc
                self._sleep(pause)
                continue
            pause = _core.retry_wanted(response, attempt, self._settings.retries)
            if pause is None:
                return _core.answer_of(response, attempt)
            self._sleep(pause)

    def _stream(self, stream: Stream) -> Iterator[Any]:
        attempt = 0
        while True:
            attempt += 1
            arguments = _core.request_of(stream, self.base_url, self._settings.token)
            try:
                with self._http.stream(**arguments) as response:
                    pause = _core.retry_wanted(response, attempt, self._settings.retries)
                    if pause is None:
                        if response.status_code >= 400:
                            response.read()
                            _core.answer_of(response, attempt)
                        if stream.text:
                            yield from response.iter_text()
                            return
                        for line in response.iter_lines():
                            if line:
                                yield _core.line_of(line, stream.parse_json)
                        return
            except httpx.TransportError as exc:
                pause = _core.transport_retry_wanted("GET", attempt, self._settings.retries)
                if pause is None:
                    raise _core.transport_failed(exc, stream, attempt) from exc
            self._sleep(pause)


class AsyncTollgate:
    """The asyncio client: `Tollgate`'s methods, awaited (iterators are async iterators)."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        profile: str | None = None,
        config: str | None = None,
        retries: Retries | None = None,
        polling: Polling | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        http: httpx.AsyncClient | None = None,
    ):
        self._settings = _Settings(base_url, token, profile, config, retries, polling)
        self.base_url = self._settings.base_url
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._sleep = sleep

    async def __aenter__(self) -> "AsyncTollgate":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- the API -----------------------------------------------------------------------------------------------------

    async def whoami(self) -> WhoAmI:
        return await self._run(_core.whoami())

    async def submit_draft(
        self,
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
        wait: bool = False,
        timeout: float | None = None,
    ) -> DraftStatus:
        payload = _core.draft_payload(
            title=title,
            body=body,
            external_id=external_id,
            slug=slug,
            source_urls=source_urls,
            run_id=run_id,
            metadata=metadata,
            callback_url=callback_url,
            end_user=end_user,
        )
        return await self._run(_core.submit_draft(payload, wait=wait, polling=self._settings.polled(timeout)))

    async def draft(self, draft_id: int) -> DraftStatus:
        return await self._run(_core.draft(draft_id))

    async def wait_for_draft(self, draft_id: int, *, timeout: float | None = None) -> DraftStatus:
        return await self._run(_core.wait_for_draft(draft_id, polling=self._settings.polled(timeout)))

    def wait_for_drafts(self, draft_ids: Iterable[int], *, timeout: float | None = None) -> AsyncIterator[DraftStatus]:
        return self._iterate(_core.wait_for_drafts(draft_ids, polling=self._settings.polled(timeout)))

    async def submit_conversation(self, payload: Mapping[str, Any]) -> Conversation:
        return await self._run(_core.submit_conversation(dict(payload)))

    async def append_messages(self, external_id: str, payload: Mapping[str, Any]) -> Conversation:
        return await self._run(_core.append_messages(external_id, dict(payload)))

    async def conversation(self, external_id: str) -> ConversationDetail:
        return await self._run(_core.conversation(external_id))

    async def review(self, external_id: str) -> Review | None:
        return await self._run(_core.review(external_id))

    def audit_events(self, *, page_size: int = AUDIT_PAGE_SIZE, **filters: Any) -> AsyncIterator[AuditEvent]:
        return self._iterate(_core.audit_events(filters, page_size=page_size))

    async def audit_events_page(
        self, *, before: str | None = None, limit: int = AUDIT_PAGE_SIZE, **filters: Any
    ) -> AuditEventsPage:
        return await self._run(_core.audit_events_page(filters, before=before, limit=limit))

    def export_audit_csv(self, **filters: Any) -> AsyncIterator[str]:
        return self._iterate(_core.audit_csv(filters))

    def export_corrections(self, *, format: str = "jsonl", **filters: Any) -> AsyncIterator[dict[str, Any]]:
        return self._iterate(_core.corrections(_weeks(filters), file_format=format))

    async def criteria(self, kind: str, *, number: int | None = None) -> dict[str, Any]:
        return await self._run(_core.criteria(kind, number))

    async def writer_rules(self) -> dict[str, Any]:
        return await self._run(_core.writer_rules())

    async def queue_service(self, **filters: Any) -> dict[str, Any]:
        return await self._run(_core.queue_service(_weeks(filters)))

    def export_reviews(self, *, format: str = "jsonl", **filters: Any) -> AsyncIterator[Any]:
        return self._iterate(_core.reviews_export(_weeks(filters), file_format=format))

    async def criteria_versions(self, kind: str) -> list[VersionSummary]:
        return await self._run(_core.criteria_versions(kind))

    async def criteria_version(self, version_id: int) -> Version:
        return await self._run(_core.criteria_version(version_id))

    async def criteria_clone(self, kind: str, *, source: int | None = None) -> Version:
        return await self._run(_core.criteria_clone(kind, source))

    async def criteria_edit(self, version_id: int, *, revision: int | None = None, **fields: Any) -> Version:
        return await self._run(_core.criteria_edit(version_id, fields, revision=revision))

    async def trial_count(self, version_id: int, *, k: int, source: str) -> TrialCount:
        return await self._run(_core.trial_count(version_id, k=k, source=source))

    async def trial_start(self, version_id: int, *, k: int, source: str) -> Trial:
        return await self._run(_core.trial_start(version_id, k=k, source=source))

    async def wait_for_trial(
        self, version_id: int, trial_id: int, *, timeout: float | None = None
    ) -> tuple[Trial, dict]:
        return await self._run(_core.wait_for_trial(version_id, trial_id, polling=self._settings.polled(timeout)))

    async def publish_plan(self, version_id: int) -> PublishPlan:
        return await self._run(_core.publish_plan(version_id))

    async def publish(self, version_id: int, *, replaces: int, regrade_now: bool = False) -> Published:
        return await self._run(_core.publish(version_id, replaces=replaces, regrade_now=regrade_now))

    async def queue(self, *, after: int | None = None, limit: int = QUEUE_PAGE_SIZE, **filters: Any) -> QueuePage:
        return await self._run(_core.queue(filters, after=after, limit=limit))

    async def claim_next(self, **filters: Any) -> Claim | None:
        return await self._run(_core.claim_next(filters))

    async def claim(self, review_id: int) -> Claim:
        return await self._run(_core.claim(review_id))

    async def decide(
        self, review_id: int, *, outcome: str = "", checks: Mapping[str, str] | None = None, note: str = "",
        fingerprint: str | None = None, keep_as_learning: bool = False,
    ) -> DecisionResult:  # fmt: skip
        body = _decision(outcome, checks, note, keep_as_learning)
        return await self._run(_core.decide(review_id, body, fingerprint=fingerprint))

    async def sets(self) -> list[RegressionSet]:
        return await self._run(_core.sets())

    async def set_create(self, **body: Any) -> RegressionSet:
        return await self._run(_core.set_create(body))

    async def set_run_start(self, name: str, *, version: int, min_agreement: float | None = None) -> RegressionRun:
        return await self._run(_core.set_run_start(name, version=version, min_agreement=min_agreement))

    async def set_run(self, name: str, run_id: int) -> RegressionRun:
        return await self._run(_core.set_run(name, run_id))

    async def wait_for_run(self, name: str, run_id: int, *, timeout: float | None = None) -> RegressionRun:
        return await self._run(_core.wait_for_run(name, run_id, polling=self._settings.polled(timeout)))

    # --- the driver ---------------------------------------------------------------------------------------------------

    async def _run(self, operation: Operation) -> Any:
        async with contextlib.aclosing(self._drive(operation, emitting=False)) as values:
            async for value in values:
                return value
        return None

    def _iterate(self, operation: Operation) -> AsyncIterator[Any]:
        return self._drive(operation, emitting=True)

    async def _drive(self, operation: Operation, *, emitting: bool) -> AsyncIterator[Any]:
        answer: Any = None
        try:
            while True:
                step = operation.send(answer)
                answer = None
                if isinstance(step, Call):
                    answer = await self._call(step)
                elif isinstance(step, Pause):
                    await self._sleep(step.seconds)
                elif isinstance(step, Emit):
                    yield step.value
                elif isinstance(step, Stream):
                    async for line in self._stream(step):
                        yield line
        except StopIteration as done:
            if not emitting:
                yield done.value

    async def _call(self, call: Call) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(**_core.request_of(call, self.base_url, self._settings.token))
            except httpx.TransportError as exc:
                pause = _core.transport_retry_wanted(call.method, attempt, self._settings.retries)
                if pause is None:
                    raise _core.transport_failed(exc, call, attempt) from exc
                await self._sleep(pause)
                continue
            pause = _core.retry_wanted(response, attempt, self._settings.retries)
            if pause is None:
                return _core.answer_of(response, attempt)
            await self._sleep(pause)

    async def _stream(self, stream: Stream) -> AsyncIterator[Any]:
        attempt = 0
        while True:
            attempt += 1
            arguments = _core.request_of(stream, self.base_url, self._settings.token)
            try:
                async with self._http.stream(**arguments) as response:
                    pause = _core.retry_wanted(response, attempt, self._settings.retries)
                    if pause is None:
                        if response.status_code >= 400:
                            await response.aread()
                            _core.answer_of(response, attempt)
                        if stream.text:
                            async for chunk in response.aiter_text():
                                yield chunk
                            return
                        async for line in response.aiter_lines():
                            if line:
                                yield _core.line_of(line, stream.parse_json)
                        return
            except httpx.TransportError as exc:
                pause = _core.transport_retry_wanted("GET", attempt, self._settings.retries)
                if pause is None:
                    raise _core.transport_failed(exc, stream, attempt) from exc
            await self._sleep(pause)


def _decision(outcome: str, checks: Mapping[str, str] | None, note: str, keep_as_learning: bool) -> dict[str, Any]:
    return {"outcome": outcome, "checks": dict(checks or {}), "note": note, "keep_as_learning": keep_as_learning}


def _weeks(filters: dict[str, Any]) -> dict[str, Any]:
    """`since`/`until` as the API's `from`/`to` (a keyword argument cannot be named `from`)."""
    renamed = {"since": "from", "until": "to"}
    return {renamed.get(name, name): value for name, value in filters.items()}
