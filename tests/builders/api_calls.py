"""A pipeline's view of the API for the resilience tests: calls with an org key, and the rows a call may write."""

import json
from collections.abc import Callable
from functools import cache

from django.db import connection
from django.test import Client

from grading.api.keys import api_key_create
from grading.models import Conversation, Draft, Feedback, Message, Org, Review

ApiCall = Callable[..., object]


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
    return {model.__name__: model.objects.count() for model in (Conversation, Message, Feedback, Draft, Review)}


def error_fields(response) -> list[str]:
    """The fields a 400 names."""
    return [problem["field"] for problem in response.json()["errors"]]


@cache
def _snapshot_sql(tables: tuple[str, ...]) -> str:
    # Per table, its row count and the sum of its rows' 64-bit hashes (in any order: no sort), all in one round trip.
    # A key's last use is not a write a request owes: any authenticated call may move it (grading/api/keys.py).
    row = "hashtextextended((to_jsonb(r) - 'last_used_at')::text, 0)"
    quote = connection.ops.quote_name
    return " UNION ALL ".join(
        f"SELECT '{table}', count(*), sum({row}) FROM {quote(table)} r"  # noqa: S608 - our table names
        for table in tables
    )


def database_snapshot() -> dict[str, tuple[int, int]]:
    """Every table's rows, digested: equal before and after a refused request, or it inserted, changed or deleted
    something (row counts alone miss an update, or a delete with an insert)."""
    tables = tuple(sorted(t for t in connection.introspection.table_names() if t != "django_migrations"))
    with connection.cursor() as cursor:
        cursor.execute(_snapshot_sql(tables))
        return {table: (count, digest) for table, count, digest in cursor.fetchall()}
