"""The JSON body of an API request, read once for every endpoint that takes one (django-ninja's body parser).

A body that cannot be read is refused with what is wrong with it: not UTF-8 (and where), not JSON (and where),
nested deeper than `MAX_DEPTH`, or holding an integer longer than `MAX_INTEGER_DIGITS`. Without the last two,
JSON 1,000 deep (Python's recursion limit) or a 5,000-digit integer (Python's 4,300-digit limit on converting
text to int) failed somewhere inside `json.loads`, and the sender was told only that the body was not JSON.

Both limits are far above any payload the API accepts (its deepest shape is about six levels, and no field holds a
number near a hundred digits), and far below what would trouble the code that reads a stored value back: the
fingerprint's JSON, the judge prompt, a worker's stack.
"""

import json
from typing import Any

from django.http import HttpRequest
from ninja.parser import Parser

MAX_DEPTH = 64
MAX_INTEGER_DIGITS = 100


class InvalidJsonBody(ValueError):
    """The message completes "the body ..." in the API's 400 for the field `body`."""


def _integer(literal: str) -> int:
    # The scanner hands over the integer's text before converting it, so the length is checked before any work.
    if len(literal.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise InvalidJsonBody(f"holds a number longer than {MAX_INTEGER_DIGITS} digits")
    return int(literal)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests containers more than `limit` deep, walked one level at a time (no recursion)."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        level = [
            child
            for container in level
            for child in (container.values() if isinstance(container, dict) else container)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return bool(level)


def _refuse_constant(name: str) -> Any:
    raise InvalidJsonBody(f"holds {name}, which is not JSON")


def request_json(body: bytes, *, refuse_constants: bool = False) -> Any:
    """The JSON value of a request body, or InvalidJsonBody saying what is wrong with it. Python reads the
    non-JSON tokens NaN and Infinity as floats; `refuse_constants` refuses them here rather than leaving them to a
    schema that names the field."""
    try:
        text = body.decode("utf-8-sig")  # a byte-order mark is tolerated, as RFC 8259 allows; UTF-16 is not JSON
    except UnicodeDecodeError as exc:
        raise InvalidJsonBody(f"is not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        value = json.loads(text, parse_int=_integer, parse_constant=_refuse_constant if refuse_constants else None)
    except RecursionError:
        raise InvalidJsonBody(f"is JSON nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise InvalidJsonBody(f"is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    # Only a body with more openers than the limit can be that deep: most are answered by counting.
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        raise InvalidJsonBody(f"is JSON nested deeper than {MAX_DEPTH} levels")
    return value


class RequestJsonParser(Parser):
    """django-ninja wraps whatever this raises in its own 400 (`HttpError`, the cause kept as `__cause__`); the
    API's handler for it answers with the cause's message."""

    def parse_body(self, request: HttpRequest) -> Any:
        return request_json(request.body)
