"""What can go wrong talking to Tollgate, as exceptions that carry what the server said."""

from dataclasses import dataclass


class TollgateError(Exception):
    """Every error this package raises."""


class ConfigurationError(TollgateError):
    """No base URL or token, or a config file that cannot be read."""


@dataclass(frozen=True)
class FieldError:
    """One refused field of a 400: `field` is a dotted path into the body or the query (`labels.3.item`)."""

    field: str
    message: str


class ApiError(TollgateError):
    """The server answered with an error status. `detail` is the server's own message; `errors` the refused fields
    of a 400; `body` the whole answer (a 413 also names the `limit` and the `value`)."""

    def __init__(self, status: int, detail: str, *, errors: list[FieldError] | None = None, body: object = None):
        self.status = status
        self.detail = detail
        self.errors = errors or []
        self.body = body
        super().__init__(f"{status}: {detail}")


class InvalidRequest(ApiError):
    """400: the request was refused and nothing was written; `errors` names each field."""


class Unauthorized(ApiError):
    """401 or 403: a missing, wrong or revoked token, or one without the role the call needs."""


class NotFound(ApiError):
    """404: no such item in the token's org."""


class TooLarge(ApiError):
    """413: a request over one of the server's limits (`body["limit"]` names it)."""


class Unavailable(ApiError):
    """429 or 503 still, after the retries (`attempts` of them)."""

    attempts: int = 0


class TransportError(TollgateError):
    """The server could not be reached (refused, reset, timed out), after the retries a safe request gets."""


class WaitTimeout(TollgateError):
    """A verdict (a draft's, a trial's, a regression run's) did not come within the wait's timeout; the work goes on
    (`draft_id`: the draft's, when it was a draft)."""

    def __init__(self, message: str, *, draft_id: int | None = None):
        self.draft_id = draft_id
        super().__init__(message)


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Unauthorized,
    404: NotFound,
    413: TooLarge,
    429: Unavailable,
    503: Unavailable,
}


def api_error(status: int, body: object, text: str) -> ApiError:
    """The exception for an error answer: the server's `detail` and field `errors` when it sent JSON, its text else."""
    detail = text.strip()[:500] or f"HTTP {status}"
    errors: list[FieldError] = []
    if isinstance(body, dict):
        detail = str(body.get("detail") or detail)
        errors = [
            FieldError(field=str(e.get("field", "")), message=str(e.get("message", "")))
            for e in body.get("errors") or []
            if isinstance(e, dict)
        ]
    kind = _BY_STATUS.get(status, ApiError)
    return kind(status, detail, errors=errors, body=body)
