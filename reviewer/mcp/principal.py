"""Who an MCP client acts as. One function turns a token into a principal, for both transports (stdio reads the
token from TOLLGATE_TOKEN, HTTP from `Authorization: Bearer`); the tools read the principal of the call in hand.

Today a principal is an org API key, reading the whole org. Personal access tokens (issue 42, part 1) extend
`mcp_principal` alone: a person's token gives a principal whose `reach` is that person's."""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from grading.api.keys import api_key_authenticate
from grading.models import ApiKey, Org
from grading.models.reach import Reach


@dataclass(frozen=True)
class McpPrincipal:
    org: Org
    reach: Reach  # what the tools may read: an org key reads the whole org
    name: str  # the key's name, as the API's whoami gives it
    api_key: ApiKey


class NotAuthenticated(Exception):
    pass


def mcp_principal(token: str) -> McpPrincipal | None:
    """The principal `token` stands for; None for an unknown or revoked token."""
    api_key = api_key_authenticate(token.strip())
    if api_key is None:
        return None
    return McpPrincipal(org=api_key.org, reach=Reach(api_key.org_id), name=api_key.name, api_key=api_key)


# Set by the transport around the calls it serves: the SDK runs each sync tool in a worker thread with a copy of the
# caller's context, so a context variable reaches it whichever transport is in use.
_principal: ContextVar[McpPrincipal | None] = ContextVar("mcp_principal", default=None)


@contextmanager
def acting_as(principal: McpPrincipal) -> Iterator[None]:
    token = _principal.set(principal)
    try:
        yield
    finally:
        _principal.reset(token)


def principal_now() -> McpPrincipal:
    principal = _principal.get()
    if principal is None:  # a transport that serves a call without authenticating it first
        raise NotAuthenticated("no Tollgate token was given")
    return principal
