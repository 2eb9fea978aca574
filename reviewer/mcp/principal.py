"""Who an MCP client acts as. One function turns a token into a principal, for both transports (stdio reads the
token from TOLLGATE_TOKEN, HTTP from `Authorization: Bearer`); the tools read the principal of the call in hand.

A principal is an org's API key, reading the whole org as it does on the API, or a person's token: the person in the
token's org, with the roles and reach their memberships give at that call (reviewer/tokens/callers.py
`person_caller`, which the API's authentication reads too). A person sees through the tools what they may see on
the pages: their reach, blind review, and the tools their roles open (`refusal`)."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from grading.api.keys import api_key_authenticate, caller_reach
from grading.models import ApiKey, Org
from grading.models.reach import Reach
from reviewer.queue.reads import operator_reaches
from reviewer.tokens.callers import NoLongerMember, PersonCaller, operation_refusal, person_caller


class NotAuthenticated(Exception):
    pass


@dataclass(frozen=True)
class McpPrincipal:
    caller: ApiKey | PersonCaller  # what `request.auth` would be on the API for the same token

    @property
    def org(self) -> Org:
        return self.caller.org

    @property
    def name(self) -> str:  # the key's or the token's name, as the API's whoami gives it
        return self.caller.name

    @property
    def person(self) -> AbstractBaseUser | None:
        return self.caller.person

    @property
    def reach(self) -> Reach:
        """What the tools may read: an org key, the whole org; a person, what all their memberships cover."""
        return caller_reach(self.caller)

    def queue_reaches(self) -> list[Reach]:
        """What the queue shows: an org key, the whole org's; a person, what their queue roles cover, as on the page."""
        if self.person is None:
            return [self.reach]
        return operator_reaches(self.person, org_id=self.org.pk)

    def refusal(self, operation: str) -> str | None:
        """Why the principal may not do what the API's `operation` does (a tool's twin); None when it may. An org
        key may do everything the tools do; a person, what one of their roles opens on the API."""
        if self.person is None:
            return None
        return operation_refusal(self.caller, operation)


def mcp_principal(token: str) -> McpPrincipal | None:
    """The principal `token` stands for now; None for an unknown, revoked or expired token. Raises
    NotAuthenticated, saying why, for a person's token whose person is no longer a member of its org."""
    token = token.strip()
    api_key = api_key_authenticate(token)
    if api_key is not None:
        return McpPrincipal(caller=api_key)
    try:
        caller = person_caller(token)
    except NoLongerMember as exc:
        raise NotAuthenticated(str(exc)) from None
    return McpPrincipal(caller=caller) if caller is not None else None


# Set by the transport around the calls it serves: how to read the principal of a call. The SDK runs each sync tool
# in a worker thread with a copy of the caller's context, so a context variable reaches it whichever transport is in
# use. Over HTTP each request is one call, its principal read as the request came in; over stdio one process serves
# many calls, so each reads the token afresh (a revoked token, a role taken away, are gone at the next call).
_principal: ContextVar[Callable[[], McpPrincipal | None] | None] = ContextVar("mcp_principal", default=None)


@contextmanager
def acting_as(principal: Callable[[], McpPrincipal | None]) -> Iterator[None]:
    token = _principal.set(principal)
    try:
        yield
    finally:
        _principal.reset(token)


def principal_now() -> McpPrincipal:
    read = _principal.get()
    if read is None:  # a transport that serves a call without authenticating it first
        raise NotAuthenticated("no Tollgate token was given")
    principal = read()
    if principal is None:
        raise NotAuthenticated("the Tollgate token is no longer live (revoked or expired)")
    return principal
