"""A pipeline's view of the API for the resilience tests: calls with an org key, and the rows a call may write."""

import json
from collections.abc import Callable

from django.test import Client

from grading.api.keys import api_key_create
from grading.models import Conversation, Draft, Feedback, Message, Org, Review
from tests.builders.database import rows_counted

ApiCall = Callable[..., object]
WRITTEN = (Conversation, Message, Feedback, Draft, Review)  # every table an ingestion call writes


def api_caller(client: Client, org: Org) -> ApiCall:
    """`call(method, path, body=None, raw=None)`: `body` is sent as JSON, `raw` (str or bytes) as it is."""
    key = api_key_create(org=org, name="hostile pipeline").plaintext

    def call(method: str, path: str, body=None, *, raw: str | bytes | None = None):
        kwargs: dict = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        if body is not None or raw is not None:
            kwargs.update(data=json.dumps(body) if raw is None else raw, content_type="application/json")
        return getattr(client, method)(f"/api/v1{path}", **kwargs)

    return call


def row_counts() -> dict[str, int]:
    """Every table an ingestion call writes: equal before and after a rejected call, or something was half-written."""
    counts = rows_counted(tuple(model._meta.db_table for model in WRITTEN))
    return {model.__name__: count for model, count in zip(WRITTEN, counts, strict=True)}


def error_fields(response) -> list[str]:
    """The fields a 400 names."""
    return [problem["field"] for problem in response.json()["errors"]]
