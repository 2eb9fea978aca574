"""The shapes of the API's refusals, for the OpenAPI document to describe each route's errors with
(grading/api/views.py writes them)."""

from ninja import Schema


class ErrorOut(Schema):
    detail: str  # what went wrong, in words: 401 no live credential, 403 not yours to do, 404 no such thing


class FieldError(Schema):
    field: str  # `checks.grounded`, `note`, `body`
    message: str


class FieldErrorsOut(Schema):
    """400: what to correct, naming each field; nothing was written."""

    detail: str
    errors: list[FieldError]


class ConflictOut(Schema):
    """409: the item is not in a state to do this now (held by someone else, decided, changed since); nothing was
    written."""

    detail: str
    code: str  # held, decided, changed, not_claimed, expired, released, answered, declined, assigned, answers


AUTH_ERRORS = {401: ErrorOut, 403: ErrorOut}
