"""Personal access tokens for tests, and requests made with one (or with an org key) as a pipeline would."""

import json
from urllib.parse import urlencode

from django.test import Client

from reviewer.tokens.services import token_create


def token_of(person, org, name: str = "laptop", **fields) -> str:
    """A new personal token of `person` in `org`: its plaintext."""
    return token_create(user=person, org=org, name=name, **fields).plaintext


def api(client: Client, token: str, method: str, path: str, body: dict | None = None, **query):
    """`method` on /api/v1`path` with `Authorization: Bearer token`; a JSON body when given."""
    extra = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    url = "/api/v1" + path
    if query:
        url += "?" + urlencode(query)
    if body is None:
        return client.generic(method, url, **extra)
    return client.generic(method, url, json.dumps(body), "application/json", **extra)
